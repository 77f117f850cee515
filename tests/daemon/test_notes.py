"""The daemon's notes for ``status`` (daemon/notes.py): what a stalled root's note is found
from, and what a torn, foreign or stale notes file gives (nothing, never an error)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from platformdirs import user_state_path

from postflightd.daemon.notes import (
    daemon_note,
    remove_daemon_notes,
    stalled_roots,
    write_daemon_notes,
)
from postflightd.daemon.turns import STALL_ENV, STALL_S, stall_after_s


def _notes_file(name: str, text: str) -> Path:
    path = user_state_path("postflightd") / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_live_daemons_stalled_root_is_found_without_its_pid(tmp_path: Path) -> None:
    root = tmp_path / "a"
    write_daemon_notes({str(root): "stalled since 06:31:02 UTC (polling)", "/b": "polling: x"})
    try:
        assert stalled_roots() == {str(root): (os.getpid(), "stalled since 06:31:02 UTC (polling)")}
        assert daemon_note(Path("/b"), os.getpid()) == "polling: x"
    finally:
        remove_daemon_notes()
    assert stalled_roots() == {}


#: (notes file, what ``daemon_note`` reads from it for /a). ``status`` names the daemon itself
#: (the instance lock's holder) and reads that pid's file whatever pid the file says inside;
#: only a string under "roots" is a note. ``stalled_roots`` believes none of these.
MALFORMED = [
    ('{"pid": 1, "roots": {"/a": "stalled since', None),  # torn mid-write
    ("", None),
    ("[]", None),
    ('"stalled"', None),
    ('{"pid": "PID", "roots": {"/a": "stalled"}}', "stalled"),
    ('{"pid": true, "roots": {"/a": "stalled"}}', "stalled"),
    ('{"pid": 0, "roots": {"/a": "stalled"}}', "stalled"),
    ('{"pid": -1, "roots": {"/a": "stalled"}}', "stalled"),
    ('{"roots": {"/a": "stalled"}}', "stalled"),
    ('{"pid": PID, "roots": ["/a"]}', None),
    ('{"pid": PID, "roots": {"/a": 7}}', None),
    ('{"pid": PID, "roots": {"/a": null}}', None),
    ('{"pid": PID}', None),
]


@pytest.mark.parametrize(("text", "note"), MALFORMED)
def test_a_torn_or_foreign_notes_file_is_no_stalled_root(text: str, note: str | None) -> None:
    pid = os.getpid()
    _notes_file(f"daemon-{pid}.json", text.replace("PID", str(pid)))
    assert stalled_roots() == {}
    assert daemon_note(Path("/a"), pid) == note


def test_a_dead_daemons_notes_are_not_believed() -> None:
    pid = _dead_pid()
    _notes_file(f"daemon-{pid}.json", json.dumps({"pid": pid, "roots": {"/a": "stalled"}}))
    assert stalled_roots() == {}


def test_an_unreadable_notes_file_is_no_note() -> None:
    pid = os.getpid()
    path = _notes_file(f"daemon-{pid}.json", "{}")
    path.unlink()
    path.mkdir()  # a directory where the file should be: reading it fails
    assert stalled_roots() == {}
    assert daemon_note(Path("/a"), pid) is None


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, STALL_S),
        ("", STALL_S),
        ("2.5", 2.5),
        ("0", STALL_S),
        ("-3", STALL_S),
        ("soon", STALL_S),
        ("nan", STALL_S),
        ("inf", STALL_S),
    ],
)
def test_the_stall_threshold_hook_takes_only_a_positive_number(
    monkeypatch: pytest.MonkeyPatch, raw: str | None, expected: float
) -> None:
    if raw is None:
        monkeypatch.delenv(STALL_ENV, raising=False)
    else:
        monkeypatch.setenv(STALL_ENV, raw)
    assert stall_after_s() == expected
