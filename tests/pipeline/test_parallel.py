"""The forked parallel check: a scan large enough to fork gives what one process gives."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from helpers.documents import researched_doc, task_entry
from helpers.project import project, write_artifact, write_meta
from postflightd.config import Config, policy_from
from postflightd.pipeline import apply as pipeline
from postflightd.pipeline import parallel


def test_parallel_scan_equals_sequential_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scan large enough to fork reports exactly what a single process reports."""
    n = parallel.PARALLEL_MIN_FILES + 10
    root = project(tmp_path, [task_entry(i, f"t{i}") for i in range(1, n + 1, 2)])
    for i in range(1, n + 1):
        doc = researched_doc(f"{i}_t{i}")
        if i % 7 == 0:
            doc["status"] = "completed"
        if i % 5 == 0:
            write_artifact(root, f"specs/{i}_t{i}/reports/research-001.md")
        write_meta(root, f"{i}_t{i}", doc if i % 11 else '{"status": ')
    config = Config()
    policy = policy_from(config)
    now = datetime.now(UTC)
    forked = pipeline.scan([root], config, policy, now).to_json()
    monkeypatch.setattr(parallel, "PARALLEL_MIN_FILES", 10**9)
    single = pipeline.scan([root], config, policy, now).to_json()
    assert forked == single
    assert forked["summary"]["files"] == n
    codes = {f["code"] for file in forked["files"] for f in file["findings"]}
    assert {"PF102", "PF203", "PF502", "PF600"} <= codes
