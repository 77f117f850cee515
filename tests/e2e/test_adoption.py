"""Adopting postflightd in an agent system that already has its own ways, end to end through
the real CLI: the example project grown as such projects are (skills that post-flight by hand,
errors.json kept as an envelope, a final file left months ago), then `init`, `scan` and
`process` as a new user runs them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from helpers.agent_system import HAND_WORKFLOW
from helpers.paths import FIXTURES, copy_example

pytestmark = pytest.mark.slow

ENVELOPE = (FIXTURES / "errors_json" / "envelope.json").read_text("utf-8")
META = ".return-meta.json"
#: When the leftover was written: long past every operation's timeout.
LEFT_AT = datetime(2026, 3, 11, 1, 30, tzinfo=UTC)


def cli(root: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "postflightd", *argv],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def state_entry(root: Path, number: int) -> dict[str, Any]:
    state = json.loads((root / "specs" / "state.json").read_text("utf-8"))
    entry: dict[str, Any] = next(
        t for t in state["active_projects"] if t["project_number"] == number
    )
    return entry


@pytest.fixture
def grown(tmp_path: Path) -> Path:
    """The example project as a real agent system's: its workflow files, its errors.json, a
    leftover (task 259's valid file, written in March), a failed run of task 263 and a file
    of task 260 with a status no workflow knows and an artifact that is not there."""
    root = copy_example(tmp_path / "project")
    for rel, text in HAND_WORKFLOW.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    (root / "specs" / "errors.json").write_text(ENVELOPE, encoding="utf-8")
    left = root / "specs" / "259_prove_completeness" / META
    os.utime(left, (LEFT_AT.timestamp(), LEFT_AT.timestamp()))
    failed = {
        "status": "failed",
        "artifacts": [],
        "metadata": {
            "session_id": state_entry(root, 263)["session_id"],
            "agent_type": "general-research-agent",
            "delegation_depth": 1,
            "delegation_path": ["orchestrator", "research", "general-research-agent"],
        },
        "errors": [
            {
                "type": "execution",
                "message": "the CI logs could not be fetched",
                "recoverable": True,
                "recommendation": "retry once the CI service answers",
            }
        ],
    }
    (root / "specs" / "263_flaky_ci" / META).write_text(json.dumps(failed, indent=2) + "\n")
    bad = json.loads((root / "specs" / "260_lsp_setup" / META).read_text("utf-8"))
    bad["status"] = "done"
    bad["artifacts"][0]["path"] = "specs/260_lsp_setup/plans/implementation-009.md"
    (root / "specs" / "260_lsp_setup" / META).write_text(json.dumps(bad, indent=2) + "\n")
    return root


def test_a_real_agent_system_adopts_postflightd(grown: Path) -> None:
    root = grown
    # init sees the hand-written postflight first, and chooses to validate only.
    init = cli(root, "init", "--yes", "--runtime", "claude")
    assert init.returncode == 0, init.stderr
    head = "\n".join(init.stdout.splitlines()[:6])
    assert "apply = false" in head or "validator" in head, init.stdout
    assert "apply = false" in (root / ".postflightd.toml").read_text("utf-8")
    assert "envelope" in init.stdout

    # Every finding at once: the unknown status does not hide the missing artifact; the
    # leftover is said to be one, with its date.
    scan = cli(root, "scan", "--format", "json")
    report = json.loads(scan.stdout)
    codes = {f["path"].split("/")[1]: {x["code"] for x in f["findings"]} for f in report["files"]}
    assert {"PF202", "PF502"} <= codes["260_lsp_setup"]
    assert "PF607" in codes["259_prove_completeness"]

    # The failed run's record lands inside `errors`, every other key kept byte for byte.
    before = json.loads(ENVELOPE)
    done = cli(root, "process", f"specs/263_flaky_ci/{META}")
    assert done.returncode == 0, done.stdout + done.stderr
    after = json.loads((root / "specs" / "errors.json").read_text("utf-8"))
    assert after["errors"][: len(before["errors"])] == before["errors"]
    added = after["errors"][len(before["errors"]) :]
    assert [r["context"]["task"] for r in added] == [263]
    assert "the CI logs could not be fetched" in json.dumps(added)
    assert list(after) == list(before)  # the keys in their order
    # Every byte but the new record and _last_updated's value: the head up to the last old
    # record, and everything from the end of the errors array on (aggregations and all).
    text = (root / "specs" / "errors.json").read_text("utf-8")
    stamp = re.search(r'"_last_updated": "[^"]*"', text)
    assert stamp is not None
    kept = re.sub(r'"_last_updated": "[^"]*"', lambda _: stamp.group(0), ENVELOPE)
    records_end = kept.index('\n  ],\n  "aggregations"')
    assert text.startswith(kept[:records_end])
    assert text.endswith(kept[records_end:])
    assert after["_last_updated"] != before["_last_updated"]

    # The leftover keeps its date in state.json and TODO.md.
    applied = cli(root, "process", f"specs/259_prove_completeness/{META}")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    entry = state_entry(root, 259)
    assert entry["status"] == "researched"
    assert entry["last_updated"].startswith("2026-03-11T01:30")
    assert entry["researched"].startswith("2026-03-11")
    assert not (root / "specs" / "259_prove_completeness" / META).exists()
    assert time.time() - LEFT_AT.timestamp() > 30 * 86400  # the date kept is not today's
