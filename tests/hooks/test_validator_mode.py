"""`[hook] apply = false`: the stop hook validates and blocks, but leaves every file in place.

A workflow whose later stage reads the metadata file, then runs `postflightd process`, keeps
its file: the hook only makes sure the agent's own file is right before it stops.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from helpers.documents import researched_doc, task_entry
from helpers.project import project, write_meta

TASKS = [task_entry(259, "prove_completeness"), task_entry(260, "plan_it")]
VALIDATOR = "[hook]\napply = false\n"
CLI = [sys.executable, "-m", "postflightd"]


def run(*args: str, stdin: dict[str, Any] | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [*CLI, *args],
        input=json.dumps(stdin).encode() if stdin is not None else None,
        capture_output=True,
        check=False,
        timeout=120,
    )


def stop(root: Path) -> dict[str, Any]:
    out = run("hook", "claude", stdin={"cwd": str(root), "hook_event_name": "Stop"})
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert isinstance(doc, dict)
    return doc


def test_a_valid_file_is_left_for_the_workflow_and_process_applies_it(tmp_path: Path) -> None:
    root = project(tmp_path / "proj", TASKS, artifacts=[259], config=VALIDATOR)
    meta = write_meta(root, "259_prove_completeness", researched_doc())
    state = root / "specs" / "state.json"
    before = state.read_bytes()
    assert stop(root) == {}
    assert meta.exists()
    assert state.read_bytes() == before
    # The workflow's stage reads the file, then post-flights it.
    out = run("process", str(meta), "--format", "json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["outcome"] == "applied"
    assert doc["state_entry"]["status"] == "researched"
    assert not meta.exists()


def test_the_agents_own_invalid_file_still_blocks_it(tmp_path: Path) -> None:
    root = project(tmp_path / "proj", TASKS, config=VALIDATOR)
    meta = write_meta(root, "259_prove_completeness", '{"status": "researched",\n')
    doc = stop(root)
    assert doc.get("decision") == "block", doc
    assert "specs/259_prove_completeness/.return-meta.json" in doc["reason"]
    assert meta.exists()
