"""errors.json in the form an agent system keeps it: the envelope, through the real CLI.

Agent systems keep errors.json as an object (``_schema_version``, ``_last_updated``,
``_comment``, ``_schema``, ``errors``, ``aggregations``); the fixture is one in that form, with
records of its own. `process`, `scan --apply` and `watch` (a real daemon) add their records
inside ``errors`` and keep every other byte; a file of neither form is refused (PF606) and
never overwritten.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers.daemon_process import daemons
from helpers.documents import researched_doc, task_entry
from helpers.paths import FIXTURES
from helpers.project import error_records, project, write_meta
from helpers.waiting import wait_until

#: Real console-script runs and daemons: `pytest -m "not slow"` leaves them out.
pytestmark = pytest.mark.slow

ENVELOPE = (FIXTURES / "errors_json" / "envelope.json").read_text("utf-8")
#: Where the envelope's records end: what follows is ``aggregations`` and the end of the file.
RECORDS_END = '\n  ],\n  "aggregations"'
OLD_STAMP = '"_last_updated": "2026-01-15T18:35:00Z"'
STAMP_RE = re.compile(r'"_last_updated": "(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)"')

TODO = (
    "# TODO\n\n### 259. Prove completeness\n- **Status**: [RESEARCHING]\n\n"
    "### 260. Second task\n- **Status**: [RESEARCHING]\n"
)
TASK = "259_prove_completeness"


def run(*argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "postflightd", *argv],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **env},
        timeout=120,
    )


def make_project(tmp_path: Path, errors: str | None = ENVELOPE) -> Path:
    """Tasks 259 and 260, their reports, TODO.md, and errors.json as ``errors`` (None: none)."""
    root = project(
        tmp_path / "p",
        [task_entry(259, "prove_completeness"), task_entry(260, "second_task")],
        todo=TODO,
        artifacts=True,
    )
    if errors is not None:
        (root / "specs" / "errors.json").write_text(errors, encoding="utf-8")
    return root


def failed_doc(message: str = "lake build failed: 2 unsolved goals") -> dict[str, Any]:
    doc = researched_doc()
    doc["status"] = "failed"
    doc["artifacts"] = []
    doc["errors"] = [
        {
            "type": "build_error",
            "message": message,
            "recoverable": True,
            "recommendation": "Fix the goals, then run /implement 259 again",
        }
    ]
    return doc


def invalid_doc() -> dict[str, Any]:
    doc = researched_doc()
    doc["status"] = "completed"  # not a status a metadata file may hold: PF203
    return doc


def invalid_records(root: Path) -> list[dict[str, Any]]:
    """The validation_failed records postflightd wrote: those about a metadata file."""
    return [r for r in error_records(root, "validation_failed") if "file" in r["context"]]


def errors_text(root: Path) -> str:
    return (root / "specs" / "errors.json").read_text("utf-8")


def assert_envelope_kept(text: str, added: int) -> dict[str, Any]:
    """``text`` is the fixture with ``added`` records appended to ``errors`` and a new
    ``_last_updated``: every other byte as it was, the new records in the file's layout."""
    doc: dict[str, Any] = json.loads(text)
    old = json.loads(ENVELOPE)
    assert list(doc) == list(old), "key order kept"
    stamp = STAMP_RE.search(text)
    assert stamp is not None and stamp.group(0) != OLD_STAMP, "_last_updated set, same form"
    head = ENVELOPE[: ENVELOPE.index(RECORDS_END)].replace(OLD_STAMP, stamp.group(0))
    assert text.startswith(head), "everything up to the last old record, byte for byte"
    assert text.endswith(ENVELOPE[ENVELOPE.index(RECORDS_END) :]), "aggregations, byte for byte"
    appended = text[len(head) : text.index(RECORDS_END)]
    if added:
        # Each new record indented as the old ones are: 4 spaces, its keys 6.
        assert appended.startswith(',\n    {\n      "id": "err_'), appended[:80]
    else:
        assert appended == ""
    assert doc["errors"][: len(old["errors"])] == old["errors"]
    assert len(doc["errors"]) == len(old["errors"]) + added
    return doc


def apply_with(command: str, root: Path, meta: Path, tmp_path: Path) -> str:
    """Apply ``meta`` with ``command`` (a daemon: until the file is gone); its output."""
    if command == "process":
        out = run("process", str(meta))
        assert out.returncode == 0, out.stdout + out.stderr
        return out.stdout + out.stderr
    if command == "scan":
        out = run("scan", "--apply", str(root))
        assert out.returncode == 0, out.stdout + out.stderr
        return out.stdout + out.stderr
    logs = tmp_path / "logs"
    logs.mkdir(exist_ok=True)
    with daemons(logs) as start:
        daemon = start(root)
        wait_until("the daemon to apply the file", lambda: not meta.exists())
        daemon.wait_event("applied")
        assert daemon.events("incomplete") == []
        assert daemon.stop() == 0
        return json.dumps(daemon.events())


# --- 1. records land inside the envelope, every other byte kept ---------------------------------


@pytest.mark.parametrize("command", ["process", "scan", "watch"])
def test_a_failed_outcome_lands_inside_errors_and_every_other_byte_is_kept(
    tmp_path: Path, command: str
) -> None:
    root = make_project(tmp_path)
    meta = write_meta(root, TASK, failed_doc())
    apply_with(command, root, meta, tmp_path)
    assert not meta.exists()
    doc = assert_envelope_kept(errors_text(root), added=1)
    (record,) = doc["errors"][4:]
    assert (record["type"], record["message"]) == (
        "build_error",
        "lake build failed: 2 unsolved goals",
    )
    assert record["context"]["task"] == 259
    assert record["fix_status"] == "unfixed"


def test_the_same_outcome_applied_again_writes_its_record_once(tmp_path: Path) -> None:
    """TODO.md fails after errors.json's turn came: the file is kept; the run that completes
    it adds nothing to errors.json, which stays byte for byte (no new _last_updated)."""
    root = make_project(tmp_path)
    doc = failed_doc()
    doc["status"] = "blocked"  # blocked writes TODO.md's marker and errors.json's record
    meta = write_meta(root, TASK, doc)
    first = run("process", str(meta), POSTFLIGHTD_FAULT_AT="todo:write=ENOSPC")
    assert first.returncode == 4, first.stdout + first.stderr
    assert "PF606" in first.stdout and meta.exists()
    written = errors_text(root)
    assert_envelope_kept(written, added=1)
    again = run("process", str(meta))
    assert again.returncode == 0, again.stdout + again.stderr
    assert not meta.exists()
    assert errors_text(root) == written
    assert "[BLOCKED]" in (root / "specs" / "TODO.md").read_text("utf-8")


# --- 2. a validation_failed record is fixed by a later file of its task -------------------------

#: A bare array, as another project keeps it: one record of its own.
BARE = json.dumps(json.loads(ENVELOPE)["errors"][:1], indent=2) + "\n"


@pytest.mark.parametrize("form", ["envelope", "bare", "missing"])
def test_a_later_file_of_the_task_sets_its_validation_failed_record_to_fixed(
    tmp_path: Path, form: str
) -> None:
    root = make_project(tmp_path, {"envelope": ENVELOPE, "bare": BARE, "missing": None}[form])
    meta = write_meta(root, TASK, invalid_doc())
    invalid = run("process", str(meta))
    assert invalid.returncode == 1, invalid.stdout + invalid.stderr
    assert meta.exists()
    (record,) = invalid_records(root)
    assert (record["context"]["task"], record["fix_status"]) == (259, "unfixed")
    before = errors_text(root)

    write_meta(root, TASK, researched_doc())
    fixed = run("process", str(meta))
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert not meta.exists()
    text = errors_text(root)
    assert [(r["id"], r["fix_status"]) for r in invalid_records(root)] == [(record["id"], "fixed")]
    # Only that value changed: the same text with "unfixed" at that one place.
    assert text.count('"fix_status": "fixed"') == before.count('"fix_status": "fixed"') + 1
    if form == "envelope":
        assert_envelope_kept(text, added=1)
        # The project's own validation_failed record of task 259 (about a return, not a
        # metadata file) is the project's to close.
        own = json.loads(ENVELOPE)["errors"][2]
        assert own in error_records(root) and own["fix_status"] == "unfixed"
    elif form == "bare":
        assert error_records(root)[0] == json.loads(BARE)[0]
    else:
        assert isinstance(json.loads(text), list), "a missing errors.json is made a bare array"


def test_a_fix_that_cannot_be_written_keeps_the_file_and_the_rerun_writes_it(
    tmp_path: Path,
) -> None:
    """errors.json cannot be written (a full disk) when a researched file would close the
    task's record: kept (PF606, exit 4), as a record of its own would be; the rerun closes it."""
    root = make_project(tmp_path)
    meta = write_meta(root, TASK, invalid_doc())
    assert run("process", str(meta)).returncode == 1
    before = errors_text(root)
    write_meta(root, TASK, researched_doc())
    failed = run("process", str(meta), POSTFLIGHTD_FAULT_AT="errors:write=ENOSPC")
    assert failed.returncode == 4, failed.stdout + failed.stderr
    assert "PF606" in failed.stdout and "No space left on device" in failed.stdout
    assert meta.exists() and errors_text(root) == before
    again = run("process", str(meta))
    assert again.returncode == 0, again.stdout + again.stderr
    assert not meta.exists()
    assert [r["fix_status"] for r in invalid_records(root)] == ["fixed"]


def test_a_file_of_another_task_leaves_the_record_unfixed(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    meta = write_meta(root, TASK, invalid_doc())
    assert run("process", str(meta)).returncode == 1
    before = errors_text(root)
    other = write_meta(root, "260_second_task", researched_doc("260_second_task"))
    out = run("process", str(other))
    assert out.returncode == 0, out.stdout + out.stderr
    assert errors_text(root) == before, "nothing to add, nothing fixed: not rewritten"


def test_the_daemon_records_an_invalid_file_and_fixes_the_record_when_it_is_repaired(
    tmp_path: Path,
) -> None:
    root = make_project(tmp_path)
    (tmp_path / "logs").mkdir()
    with daemons(tmp_path / "logs") as start:
        daemon = start(root)
        meta = write_meta(root, TASK, invalid_doc())
        daemon.wait_event("invalid")
        wait_until("the validation_failed record", lambda: invalid_records(root))
        write_meta(root, TASK, researched_doc())
        wait_until("the repaired file applied", lambda: not meta.exists())
        wait_until(
            "the record fixed",
            lambda: [r["fix_status"] for r in invalid_records(root)] == ["fixed"],
        )
        assert daemon.events("incomplete") == []
        assert daemon.stop() == 0
    assert_envelope_kept(errors_text(root), added=1)


# --- 3. a file of neither form: PF606, nothing written ------------------------------------------

HUGE = 17 * 1024 * 1024

MALFORMED = {
    "errors-not-an-array": (
        ENVELOPE.replace('"errors": [', '"errors": {"list": [', 1).replace(
            RECORDS_END, "\n  ]},\n  " + '"aggregations"', 1
        ),
        'an object whose "errors" is an object, not an array',
    ),
    "errors-missing": (
        ENVELOPE.replace('"errors": [', '"error_log": [', 1),
        'an object without an "errors" key',
    ),
    "string": ('"no errors yet"\n', "a string"),
    "number": ("0\n", "a number"),
    "truncated": (ENVELOPE[: len(ENVELOPE) // 2], "truncated"),
    "huge": (ENVELOPE, "larger than 16 MiB"),
}


def write_errors_file(root: Path, case: str) -> Path:
    path = root / "specs" / "errors.json"
    path.write_text(MALFORMED[case][0], encoding="utf-8")
    if case == "huge":
        with path.open("r+b") as fh:
            fh.truncate(HUGE)  # sparse: never read, never rewritten
    return path


@pytest.mark.parametrize("case", list(MALFORMED))
def test_an_errors_json_of_neither_form_is_pf606_and_never_written(
    tmp_path: Path, case: str
) -> None:
    """The failed outcome is in state.json, its file kept (exit 4) with a message saying what
    errors.json is and which forms are accepted; errors.json is not touched. A researched
    outcome of the same batch, which adds nothing to errors.json, is applied."""
    root = make_project(tmp_path, errors=None)
    path = write_errors_file(root, case)
    before = path.read_bytes() if case != "huge" else None
    kept = write_meta(root, TASK, failed_doc())
    done = write_meta(root, "260_second_task", researched_doc("260_second_task"))

    out = run("scan", "--apply", "--format", "json", str(root))
    assert out.returncode == 4, out.stdout + out.stderr
    assert "Traceback" not in out.stderr
    files = {f["path"]: f for f in json.loads(out.stdout)["files"]}
    bad = files[f"specs/{TASK}/.return-meta.json"]
    assert bad["outcome"] == "incomplete"
    ((code, message),) = [(f["code"], f["message"]) for f in bad["findings"]]
    assert code == "PF606"
    assert "errors.json is not usable (" in message and MALFORMED[case][1] in message
    assert 'a JSON array of records, or an object whose "errors" key is that array' in message
    assert "not overwritten" in message and "move it away" not in message
    assert message.count("run again") == 1, message  # what to do, said once
    # Said once, by the finding: no note repeating it under the same file.
    assert "errors.json is not usable" not in json.dumps(bad.get("notes", []))
    assert files["specs/260_second_task/.return-meta.json"]["outcome"] == "applied"
    assert kept.exists() and not done.exists()

    if before is not None:
        assert path.read_bytes() == before
    else:
        assert path.stat().st_size == HUGE
        assert path.stat().st_blocks * 512 < 1024 * 1024, "still sparse: never rewritten"
    assert not list(path.parent.glob(".errors.json.*")), "no temporary file left"

    # The same through `process`: one clear line, the same exit.
    again = run("process", str(kept))
    assert again.returncode == 4
    assert "PF606" in again.stdout and MALFORMED[case][1] in again.stdout
    assert "Traceback" not in again.stderr


def test_an_errors_json_link_to_an_envelope_is_refused_and_nothing_written_through_it(
    tmp_path: Path,
) -> None:
    """A link is never followed, whatever it points to (PF604, as for every project file)."""
    root = make_project(tmp_path, errors=None)
    target = tmp_path / "elsewhere.json"
    target.write_text(ENVELOPE, encoding="utf-8")
    (root / "specs" / "errors.json").symlink_to(target)
    meta = write_meta(root, TASK, failed_doc())
    out = run("process", str(meta))
    assert out.returncode == 4, out.stdout + out.stderr
    assert "errors.json" in out.stdout and "symbolic link" in out.stdout
    assert "Traceback" not in out.stderr
    assert meta.exists()
    assert target.read_text("utf-8") == ENVELOPE
    assert (root / "specs" / "errors.json").is_symlink()
