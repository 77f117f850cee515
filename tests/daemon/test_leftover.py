"""The daemon at start-up meets a final file left long ago (a leftover): it is first seen now,
so it is PF607, and its outcome keeps the date the agent wrote it. A file written while the
daemon watches is no leftover. A real ``postflightd watch`` process."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from helpers.daemon_process import DaemonFactory, applied
from helpers.documents import researched_doc
from helpers.project import meta_path, project
from helpers.waiting import wait_until
from postflightd.timestamps import parse_timestamp

pytestmark = pytest.mark.slow


def test_a_leftover_found_at_start_keeps_its_date_and_gets_pf607(
    tmp_path: Path, start_daemon: DaemonFactory
) -> None:
    root = project(tmp_path / "p", 2)
    left = meta_path(root, 1)
    left.write_text(json.dumps(researched_doc("1_task1")), encoding="utf-8")
    written = (datetime.now(UTC) - timedelta(days=120)).replace(microsecond=0)
    os.utime(left, (written.timestamp(), written.timestamp()))

    daemon = start_daemon(root)
    wait_until("the leftover applied", lambda: applied(root, 1))
    meta_path(root, 2).write_text(json.dumps(researched_doc("2_task2")), encoding="utf-8")
    wait_until("the new file applied", lambda: applied(root, 2))

    state = json.loads((root / "specs" / "state.json").read_text("utf-8"))
    stamps = {t["project_number"]: t["researched"] for t in state["active_projects"]}
    assert parse_timestamp(stamps[1]) == written
    fresh = parse_timestamp(stamps[2])
    assert fresh is not None and datetime.now(UTC) - fresh < timedelta(hours=1)
    warnings = {e["task"]: e["warnings"] for e in daemon.wait_event("applied", count=2)}
    assert warnings == {1: ["PF607"], 2: []}
    assert daemon.stop() == 0
