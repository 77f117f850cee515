"""Crashes while an errors.json envelope is written: old or new, never torn, applied once.

The crash points of the errors.json write (``fs/faults.py``'s ``errors:*``, and the steps
around it) with errors.json in an agent system's envelope form: its existing file is
replaced by an exchange, not created, so every point of that path is taken. The bare-array
form's crash tests are in test_postflight_faults.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers.documents import researched_doc, task_entry
from helpers.paths import FIXTURES
from helpers.project import project, write_meta

#: Real console-script runs in bulk: `pytest -m "not slow"` leaves them out.
pytestmark = pytest.mark.slow

ENVELOPE = (FIXTURES / "errors_json" / "envelope.json").read_text("utf-8")
RECORDS_END = '\n  ],\n  "aggregations"'

#: Every point from state.json's write on at which errors.json is old or new.
CRASH_POINTS = [
    "after-state-write",
    "after-todo-write",
    "errors:after-temp-write",
    "errors:before-exchange",
    "errors:after-exchange",
    "errors:after-replace",
    "before-delete",
    "after-delete",
]

TASK = "259_prove_completeness"
TODO = "# TODO\n\n### 259. Prove completeness\n- **Status**: [RESEARCHING]\n"


def process(path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "postflightd", "process", str(path)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **env},
        timeout=120,
    )


def failed_doc() -> dict[str, Any]:
    doc = researched_doc()
    doc["status"] = "failed"
    doc["artifacts"] = []
    doc["errors"] = [{"type": "build_error", "message": "lake build failed", "recoverable": True}]
    return doc


def make_project(tmp_path: Path) -> Path:
    root = project(tmp_path / "p", [task_entry(259, "prove_completeness")], todo=TODO)
    (root / "specs" / "errors.json").write_text(ENVELOPE, encoding="utf-8")
    return root


def envelope(root: Path) -> tuple[str, dict[str, Any]]:
    text = (root / "specs" / "errors.json").read_text("utf-8")
    return text, json.loads(text)  # never torn: it always parses


def assert_kept_but_errors(text: str) -> None:
    """Every byte of the fixture but _last_updated's value and what follows its records."""
    head, tail = ENVELOPE.split(RECORDS_END)
    stamp_at = head.index('"_last_updated": "') + len('"_last_updated": "')
    assert text[:stamp_at] == head[:stamp_at]
    assert text[stamp_at + 20 :].startswith(head[stamp_at + 20 :])
    assert text.endswith(RECORDS_END + tail)


def mine(doc: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [r for r in doc["errors"] if r["type"] == kind and "file" in r["context"]]


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_a_crash_while_recording_a_failed_outcome_then_a_rerun_records_it_once(
    tmp_path: Path, point: str
) -> None:
    root = make_project(tmp_path)
    meta = write_meta(root, TASK, failed_doc())
    crashed = process(meta, POSTFLIGHTD_CRASH_AT=point)
    assert crashed.returncode == -signal.SIGKILL, crashed.stdout + crashed.stderr
    text, doc = envelope(root)
    if text != ENVELOPE:  # old, or new with its record: nothing in between
        assert_kept_but_errors(text)
        assert len(mine(doc, "build_error")) == 1

    if meta.exists():
        again = process(meta)
        assert again.returncode == 0, again.stdout + again.stderr
    assert not meta.exists()
    text, doc = envelope(root)
    assert_kept_but_errors(text)
    assert [r["message"] for r in mine(doc, "build_error")] == ["lake build failed"]
    assert len(doc["errors"]) == len(json.loads(ENVELOPE)["errors"]) + 1
    assert not list((root / "specs").glob(".errors.json.*")), "no temporary file left"


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_a_crash_while_fixing_a_validation_failed_record_then_a_rerun_fixes_it(
    tmp_path: Path, point: str
) -> None:
    root = make_project(tmp_path)
    invalid = researched_doc()
    invalid["status"] = "completed"
    meta = write_meta(root, TASK, invalid)
    assert process(meta).returncode == 1
    _, doc = envelope(root)
    assert [r["fix_status"] for r in mine(doc, "validation_failed")] == ["unfixed"]
    recorded = doc["errors"]

    write_meta(root, TASK, failed_doc())  # a later file of the task: valid, applied
    crashed = process(meta, POSTFLIGHTD_CRASH_AT=point)
    assert crashed.returncode == -signal.SIGKILL, crashed.stdout + crashed.stderr
    text, doc = envelope(root)
    statuses = [r["fix_status"] for r in mine(doc, "validation_failed")]
    # Old (unfixed, no new record), or new (fixed, with the failed run's record).
    assert (statuses, len(mine(doc, "build_error"))) in ((["unfixed"], 0), (["fixed"], 1))

    if meta.exists():
        again = process(meta)
        assert again.returncode == 0, again.stdout + again.stderr
    assert not meta.exists()
    text, doc = envelope(root)
    assert_kept_but_errors(text)
    assert [r["fix_status"] for r in mine(doc, "validation_failed")] == ["fixed"]
    assert len(mine(doc, "build_error")) == 1
    assert len(doc["errors"]) == len(recorded) + 1
    assert not list((root / "specs").glob(".errors.json.*")), "no temporary file left"
