"""``postflightd status --watch``: driven in a pseudo-terminal while a simulated agent runs."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest

from helpers.documents import task_entry
from helpers.paths import REPO
from helpers.project import project
from postflightd.reporters.live import HIGHLIGHT, HOME, LiveView, describe_change
from postflightd.runs.status import RootStatus, RunStatus

AGENT_SIM = REPO / "examples" / "agent_sim.py"


STATUS_WATCH = [sys.executable, "-m", "postflightd", "status", "--watch", "--interval", "0.2"]


@contextmanager
def interruptible_children() -> Iterator[None]:
    """Children started inside have SIGINT at its default, as when started from a terminal.

    A test run started in the background has SIGINT ignored, and exec keeps an ignored signal:
    Python then installs no KeyboardInterrupt handler, and the live view's Ctrl-C exit could
    not be tested (it waited out the deadline). A handler in this process resets at exec.
    """
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class Screen:
    """Everything the live view wrote to the terminal, read with deadlines."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.data = b""

    def pump(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            ready, _, _ = select.select([self.fd], [], [], left)
            if not ready:
                return
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:  # EIO: the other side closed
                return
            if not chunk:
                return
            self.data += chunk

    def wait_for(self, what: bytes, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while what not in self.data:
            if time.monotonic() > deadline:
                tail = self.data[-1500:].decode("utf-8", "replace")
                pytest.fail(f"timed out waiting for {what!r} on the screen; last output:\n{tail}")
            self.pump(0.2)


@pytest.mark.slow
def test_status_watch_in_a_terminal_follows_a_simulated_agent(tmp_path: Path) -> None:
    root = project(tmp_path / "p", [task_entry(5, "task5", session_id=None)])
    master, slave = pty.openpty()
    # A wide terminal: lines are never cut, so the rows can be matched whole.
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 200, 0, 0))
    with interruptible_children():
        proc = subprocess.Popen(
            [*STATUS_WATCH, str(root)],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env={**os.environ, "TERM": "xterm"},
        )
    os.close(slave)
    agent: subprocess.Popen[bytes] | None = None
    screen = Screen(master)
    try:
        screen.wait_for(b"no runs in flight")
        agent = subprocess.Popen(
            [
                sys.executable,
                str(AGENT_SIM),
                str(root),
                "5_task5",
                "--steps",
                "2",
                "--interval",
                "0.8",
                "--final",
                "researched",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        screen.wait_for(b"task 5: appeared (running, in_progress)")
        screen.wait_for(b"task 5: phase 1 1/2")
        screen.wait_for(b"task 5: phase 2 2/2")
        screen.wait_for(b"task 5: in_progress running -> researched waiting")
        assert agent.wait(30) == 0
        # The changed row is drawn highlighted, and every frame is redrawn in place.
        assert HIGHLIGHT.encode() + b"  5 " in screen.data
        assert screen.data.count(HOME.encode()) >= 3
        assert b"WAITING" in screen.data
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0  # Ctrl-C leaves the live view with exit 0
        screen.pump(0.5)
        assert b"\x1b[?25h" in screen.data  # the cursor is given back
        assert b"Traceback" not in screen.data
    finally:
        for p in (proc, agent):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
        os.close(master)


@pytest.mark.slow
def test_status_watch_into_a_pipe_prints_changes_without_escapes(tmp_path: Path) -> None:
    root = project(tmp_path / "p", [task_entry(5, "task5")])
    with interruptible_children():
        proc = subprocess.Popen(
            [*STATUS_WATCH, str(root)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    with proc:  # its pipes are closed whatever happens (an unclosed one warns in a later test)
        try:
            assert proc.stdout is not None
            first = proc.stdout.readline()
            assert first.startswith(b"postflightd status --watch")
            second = proc.stdout.readline() + proc.stdout.readline()  # the root, then its runs
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 0, err
    assert b"\x1b" not in first + second + out
    assert b"no runs in flight" in second


def run(task: int, state: str, stage: str | None = None, done: int | None = None) -> RunStatus:
    return RunStatus(
        file=f"specs/{task}_x/.return-meta.json",
        task=task,
        status="in_progress" if state in ("running", "stuck") else "researched",
        state=state,
        valid=True,
        stuck=state == "stuck",
        agent="a",
        session="s",
        operation="research",
        stage=stage,
        phases_completed=done,
        phases_total=3 if done is not None else None,
        started_at=None,
        elapsed_s=1.0,
        timeout_s=60.0,
    )


def test_live_view_notes_transitions_and_highlights_for_a_while() -> None:
    view = LiveView(hold_s=3.0)
    root = Path("/r")
    assert not view.update([RootStatus(root, None, [run(1, "running", "a", 0)])], 0.0, "t0")
    assert not view.hot  # the first reading is no transition
    changed = view.update([RootStatus(root, None, [run(1, "running", "b", 1)])], 1.0, "t1")
    assert changed
    assert view.recent[0] == "t1  task 1: b 1/3"
    assert ("/r", "specs/1_x/.return-meta.json") in view.hot
    view.update([RootStatus(root, None, [run(1, "running", "b", 1)])], 5.0, "t2")
    assert not view.hot  # held for hold_s only
    view.update([RootStatus(root, None, [])], 6.0, "t3")
    assert view.recent[0].startswith("t3  task 1: gone")
    lines = view.lines([RootStatus(root, None, [])], "header", 80, ansi=True)
    assert lines[0] == "header"
    assert "recent transitions:" in lines


def test_a_file_caught_mid_write_is_no_transition() -> None:
    """A run whose file is being written (does not parse yet, changed within settle_ms) keeps
    its last reading; a new one appears only once its file is whole."""
    view = LiveView(hold_s=3.0)
    root = Path("/r")
    view.update([RootStatus(root, None, [])], 0.0, "t0")
    assert not view.update([RootStatus(root, None, [run(1, "writing")])], 1.0, "t1")
    assert view.update([RootStatus(root, None, [run(1, "running", "a", 0)])], 2.0, "t2")
    assert view.recent[0] == "t2  task 1: appeared (running, in_progress)"
    assert not view.update([RootStatus(root, None, [run(1, "writing")])], 3.0, "t3")
    assert view.update([RootStatus(root, None, [run(1, "running", "b", 1)])], 4.0, "t4")
    assert view.recent[0] == "t4  task 1: b 1/3"


def test_status_says_writing_for_a_file_that_does_not_parse_yet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """status shows a truncated file modified a moment ago as being written, not invalid; once
    it is older than settle_ms it is invalid (PF102), as the daemon judges it."""
    import json

    from postflightd.cli import main

    root = project(tmp_path / "p", [task_entry(5, "x")])
    meta = root / "specs" / "5_x" / ".return-meta.json"
    meta.parent.mkdir()
    meta.write_text('{"status": "in_prog', "utf-8")
    (root / ".postflightd.toml").write_text("[watch]\nsettle_ms = 60000\n", "utf-8")
    main(["status", str(root), "--format", "json"])
    assert json.loads(capsys.readouterr().out)["roots"][0]["runs"][0]["state"] == "writing"
    (root / ".postflightd.toml").write_text("[watch]\nsettle_ms = 0\n", "utf-8")
    main(["status", str(root), "--format", "json"])
    assert json.loads(capsys.readouterr().out)["roots"][0]["runs"][0]["state"] == "invalid"


def test_describe_change_of_state() -> None:
    assert describe_change(run(1, "running"), run(1, "stuck")) == (
        "task 1: in_progress running -> in_progress stuck"
    )
    assert describe_change(run(1, "running"), run(1, "running")) is None


def test_rows_are_cut_to_the_terminal_width() -> None:
    view = LiveView(hold_s=1.0)
    statuses = [RootStatus(Path("/r"), None, [run(1, "running", "x" * 300, 1)])]
    view.update(statuses, 0.0, datetime.now(UTC).strftime("%H:%M:%S"))
    assert all(len(line) <= 60 for line in view.lines(statuses, "h", 60, ansi=True))


def test_transitions_show_agent_values_inert() -> None:
    """A stage written by an agent never reaches the terminal as an escape sequence."""
    hostile = run(1, "running", "\x1b[2J\x1b[Hphase\n2", 1)
    line = describe_change(run(1, "running", "a", 0), hostile)
    assert line == "task 1: \\x1b[2J\\x1b[Hphase\\n2 1/3"


def test_status_watch_with_json_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from postflightd.cli import main

    project(tmp_path, [])
    assert main(["status", "--watch", "--format", "json", str(tmp_path)]) == 2
    assert "--watch shows the text table" in capsys.readouterr().err
