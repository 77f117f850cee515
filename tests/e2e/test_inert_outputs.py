"""Every output is inert: hostile characters an agent writes reach no output raw.

An agent (wrong, or prompt-injected) writes ESC (``\\x1b[2J``, clear the screen), a C1 CSI
(``\\x9b``), a right-to-left override (U+202E), a left-to-right isolate (U+2066) and a line
separator (U+2028) where it writes anything: a task directory name, an artifact path and its
summary, a session id, an agent type, a stage, a status word. Each output format of each
command is fed them, and none of the five characters may appear raw in what it writes, on
stdout or stderr. Per format, what the test asks instead:

* text (``scan``, ``status``, ``status --watch``, ``report``, ``history``, ``process``,
  ``check-return``, the daemon's console log lines) and ``github`` (workflow commands are
  text lines): the values are written as visible escapes (``\\x1b[2J``), as ``inert`` makes
  them.
* json and sarif (the same commands, and the daemon's JSON log lines): written as JSON
  ``\\uXXXX`` escapes. A JSON string may hold these characters raw, but a raw C1 or bidi
  character still acts on the terminal or page that shows the output (``cat``, a CI log),
  so the escape is required; the parsed value must still hold the characters (nothing is
  lost).
* html (``report``): escaped as ``inert`` does, then as HTML.
"""

from __future__ import annotations

import html
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from importlib import import_module
from pathlib import Path
from typing import Any

import pytest

from helpers.documents import SESSION, researched_doc, task_entry
from helpers.project import project, write_meta
from helpers.waiting import wait_until
from postflightd.cli import main
from postflightd.inert import inert

HOSTILE = "\x1b[2J\x9b\u202e\u2066\u2028"
RAW = tuple(HOSTILE.replace("[2J", ""))
#: Task 7's directory: its name is hostile too.
HOSTILE_DIR = f"7_t{HOSTILE}"


def _registry(module: str) -> tuple[str, ...]:
    return tuple(import_module(f"postflightd.reporters.{module}").REPORTERS)


def hostile_doc(task_dir: str, **changes: Any) -> dict[str, Any]:
    """A research return for ``task_dir`` with a hostile value in every field an agent writes."""
    doc = researched_doc(task_dir)
    doc["artifacts"][0]["path"] = f"specs/{task_dir}/reports/{HOSTILE}.md"
    doc["artifacts"][0]["summary"] = f"summary {HOSTILE}"
    doc["metadata"]["session_id"] = f"{SESSION}{HOSTILE}"
    doc["metadata"]["agent_type"] = f"agent{HOSTILE}"
    doc["metadata"]["delegation_path"] = ["orchestrator", f"agent{HOSTILE}"]
    doc.update(changes)
    return doc


def in_progress_doc(task_dir: str, stage: str = f"stage{HOSTILE}") -> dict[str, Any]:
    return hostile_doc(
        task_dir,
        status="in_progress",
        artifacts=[],
        started_at=datetime.now(UTC).isoformat(),
        partial_progress={"stage": stage, "details": f"details{HOSTILE}", "phases_completed": 1},
    )


def hostile_project(root: Path) -> Path:
    """Task 7 in a hostile directory with a hostile status word; task 8 running; task 9 done."""
    project(root, [task_entry(n, f"t{n}") for n in (7, 8, 9)])
    write_meta(root, HOSTILE_DIR, hostile_doc(HOSTILE_DIR, status=f"researched{HOSTILE}"))
    write_meta(root, "8_t8", in_progress_doc("8_t8"))
    write_meta(root, "9_t9", hostile_doc("9_t9"))
    return root


def assert_inert(text: str, fmt: str) -> None:
    """No hostile character raw; the values were written, in the format's escaped form."""
    leaked = [f"U+{ord(c):04X}" for c in RAW if c in text]
    assert not leaked, f"{fmt}: raw {leaked} in {text!r}"
    if fmt in ("json", "sarif"):
        assert_json_keeps_the_values(text)
    elif fmt == "html":
        assert html.escape(inert(HOSTILE)) in text, text
    else:
        assert "\\x1b[2J" in text, text


def _json_strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _json_strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _json_strings(v)


def assert_json_keeps_the_values(text: str) -> None:
    """Parsed, the output holds the values: as the very characters (a value written with
    ``\\uXXXX`` escapes), or as ``inert`` shows them (a finding's message quoting a value)."""
    strings = [s for doc in _json_documents(text) for s in _json_strings(doc)]
    assert any(HOSTILE in s or inert(HOSTILE) in s for s in strings), text


def _json_documents(text: str) -> list[object]:
    text = text.strip()
    try:
        return [json.loads(text)]
    except json.JSONDecodeError:  # JSON lines
        return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def check(out: str, err: str, fmt: str) -> None:
    assert_inert(out, fmt)
    assert not [c for c in RAW if c in err], f"raw hostile character on stderr: {err!r}"


# --- the commands, in-process -----------------------------------------------------------------


@pytest.mark.parametrize("fmt", _registry("scan"))
def test_scan(tmp_path: Path, fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    root = hostile_project(tmp_path / "p")
    assert main(["scan", "--format", fmt, str(root)]) == 1
    captured = capsys.readouterr()
    check(captured.out, captured.err, fmt)


@pytest.mark.parametrize("fmt", _registry("status"))
def test_status(tmp_path: Path, fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    root = hostile_project(tmp_path / "p")
    assert main(["status", "--format", fmt, str(root)]) == 0
    captured = capsys.readouterr()
    check(captured.out, captured.err, fmt)


@pytest.mark.parametrize("fmt", _registry("process"))
@pytest.mark.parametrize("task_dir", [HOSTILE_DIR, "9_t9"], ids=["hostile-name", "9_t9"])
def test_process(
    tmp_path: Path, fmt: str, task_dir: str, capsys: pytest.CaptureFixture[str]
) -> None:
    root = hostile_project(tmp_path / "p")
    main(["process", "--format", fmt, str(root / "specs" / task_dir / ".return-meta.json")])
    captured = capsys.readouterr()
    check(captured.out, captured.err, fmt)


def _journaled(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every file of the hostile project validated, and what happened journaled."""
    assert main(["scan", "--apply", str(root)]) == 1
    capsys.readouterr()


@pytest.mark.parametrize(
    ("fmt", "show"),
    # --show adds the content to the text form only (JSON rows always carry it).
    [(f, s) for f in _registry("history") for s in ([], ["--show"]) if f == "text" or not s],
)
def test_history(
    tmp_path: Path, fmt: str, show: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    _journaled(hostile_project(tmp_path / "p"), capsys)
    assert main(["history", "--format", fmt, *show]) == 0
    captured = capsys.readouterr()
    check(captured.out, captured.err, fmt)


@pytest.mark.parametrize("fmt", _registry("report"))
def test_report(tmp_path: Path, fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    _journaled(hostile_project(tmp_path / "p"), capsys)
    assert main(["report", "--format", fmt]) == 0
    captured = capsys.readouterr()
    check(captured.out, captured.err, fmt)


@pytest.mark.parametrize("fmt", _registry("check_return"))
def test_check_return(tmp_path: Path, fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    root = project(tmp_path / "p", [task_entry(7, "t7")])
    doc = hostile_doc(HOSTILE_DIR, status=f"completed{HOSTILE}", summary=f"done {HOSTILE}")
    returned = tmp_path / f"return{HOSTILE}.json"
    returned.write_text(json.dumps(doc), encoding="utf-8")
    assert main(["check-return", str(returned), "--root", str(root), "--format", fmt]) == 1
    captured = capsys.readouterr()
    check(captured.out, captured.err, fmt)


# --- the daemon and the live view, in a real process ------------------------------------------


@pytest.mark.parametrize("fmt", ["console", "json"])
def test_daemon_log_lines(tmp_path: Path, fmt: str) -> None:
    """What the daemon logs of the hostile project (invalid files, a running run) is inert."""
    root = hostile_project(tmp_path / "p")
    log = tmp_path / "daemon.log"
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "postflightd", "watch", str(root), "--log-format", fmt],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        wait_until(
            "the daemon to log the three files",
            lambda: log.read_bytes().count(b"run_") >= 3 and b"daemon_started" in log.read_bytes(),
        )
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = log.read_text(encoding="utf-8")
    check(text, "", "json" if fmt == "json" else "text")


def _read_until(proc: subprocess.Popen[bytes], seen: bytearray, what: bytes) -> None:
    """Read ``proc``'s stdout into ``seen`` until ``what`` is in it (fail at a deadline)."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    deadline = time.monotonic() + 30
    while what not in seen:
        left = deadline - time.monotonic()
        if left <= 0:
            pytest.fail(f"timed out waiting for {what!r}; output so far: {bytes(seen)!r}")
        ready, _, _ = select.select([fd], [], [], left)
        chunk = os.read(fd, 65536) if ready else b""
        if ready and not chunk:
            pytest.fail(f"status --watch ended before {what!r}: {bytes(seen)!r}")
        seen += chunk


@pytest.mark.slow
def test_status_watch_transition_lines(tmp_path: Path) -> None:
    """``status --watch`` into a pipe: a run appears, then changes session, stage and status,
    each time to a hostile value; every transition line is inert."""
    root = project(tmp_path / "p", [task_entry(8, "t8")])
    steps = [
        (in_progress_doc("8_t8", stage="reading"), b"task 8: appeared"),
        (_with_session(in_progress_doc("8_t8", stage="reading")), b"task 8: new session"),
        (_with_session(in_progress_doc("8_t8")), b"task 8: stage"),
        (
            {**_with_session(in_progress_doc("8_t8")), "status": f"in_progress{HOSTILE}"},
            b"in_progress invalid ->",
        ),
    ]
    seen = bytearray()
    proc = subprocess.Popen(
        [sys.executable, "-m", "postflightd", "status", "--watch", "--interval", "0.2", str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    with proc:  # its pipes are closed whatever happens
        try:
            _read_until(proc, seen, b"no runs in flight")
            for doc, line in steps:
                write_meta(root, "8_t8", doc)
                _read_until(proc, seen, line)
            # SIGTERM, not Ctrl-C: a test run started in the background has SIGINT ignored,
            # and its children inherit that. How the view exits is test_live's subject.
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    check((bytes(seen) + out).decode("utf-8"), err.decode("utf-8"), "text")


def _with_session(doc: dict[str, Any]) -> dict[str, Any]:
    doc["metadata"]["session_id"] = f"sess_other{HOSTILE}"
    return doc
