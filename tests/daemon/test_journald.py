"""The daemon under systemd: syslog priority prefixes for journald, console lines without
None fields, STATUS= on each change of the run table, RELOADING=1 on SIGHUP."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from helpers.documents import researched_doc, task_entry
from helpers.project import project, write_meta
from helpers.waiting import wait_until


@pytest.fixture
def daemons() -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    try:
        yield procs
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)


def _start(
    procs: list[subprocess.Popen[bytes]], root: Path, log: Path, *args: str, env: dict[str, str]
) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "postflightd", "watch", str(root), *args],
            stdout=subprocess.DEVNULL,
            stderr=out,
            env={**os.environ, **env},
        )
    procs.append(proc)
    return proc


def _stuck_doc() -> dict[str, object]:
    return {
        "status": "in_progress",
        "started_at": "2020-01-01T00:00:00Z",
        "artifacts": [],
        "partial_progress": {"stage": "initializing", "details": "started"},
        "metadata": researched_doc()["metadata"],
    }


def test_log_lines_carry_the_syslog_priority_under_journald(
    tmp_path: Path, daemons: list[subprocess.Popen[bytes]]
) -> None:
    root = project(tmp_path / "p", [task_entry(262, "parser_rewrite")])
    write_meta(root, "262_parser_rewrite", _stuck_doc())
    log = tmp_path / "journal-stream.log"
    log.touch()
    st = log.stat()
    # JOURNAL_STREAM names the very file stderr is: as systemd sets it for a unit's output.
    proc = _start(
        daemons,
        root,
        log,
        "--log-format",
        "json",
        env={"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"},
    )
    wait_until("the stuck run logged", lambda: "run_stuck" in log.read_text(encoding="utf-8"))
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(10) == 0
    lines = log.read_text(encoding="utf-8").splitlines()
    assert lines
    for line in lines:
        assert line[:3] in ("<3>", "<4>", "<6>", "<7>"), line
        json.loads(line[3:])  # the rest is the JSON line, unchanged
    stuck = next(line for line in lines if '"run_stuck"' in line)
    assert stuck.startswith("<3>")
    started = next(line for line in lines if '"daemon_started"' in line)
    assert started.startswith("<6>")


def test_no_prefix_when_stderr_is_not_the_journal_stream(
    tmp_path: Path, daemons: list[subprocess.Popen[bytes]]
) -> None:
    root = project(tmp_path / "p", [])
    log = tmp_path / "plain.log"
    proc = _start(daemons, root, log, "--log-format", "json", env={"JOURNAL_STREAM": "1:2"})
    wait_until("start", lambda: log.exists() and "daemon_started" in log.read_text("utf-8"))
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(10) == 0
    for line in log.read_text(encoding="utf-8").splitlines():
        assert line.startswith("{"), line


def test_console_lines_leave_out_fields_that_are_none(
    tmp_path: Path, daemons: list[subprocess.Popen[bytes]]
) -> None:
    root = project(tmp_path / "p", [])
    log = tmp_path / "console.log"
    proc = _start(daemons, root, log, "--log-format", "console", env={})
    wait_until("start", lambda: log.exists() and "daemon_started" in log.read_text("utf-8"))
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(10) == 0
    text = log.read_text(encoding="utf-8")
    assert "daemon_started" in text
    assert "=None" not in text


def test_status_follows_the_run_table_and_sighup_sends_reloading(
    tmp_path: Path, daemons: list[subprocess.Popen[bytes]]
) -> None:
    root = project(tmp_path / "p", [task_entry(1, "task1")])
    address = str(tmp_path / "notify.sock")
    seen: list[str] = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(address)
        sock.settimeout(30)

        def receive_until(predicate: Callable[[str], bool]) -> str:
            while True:
                for line in seen:
                    if predicate(line):
                        seen.remove(line)
                        return line
                seen.extend(sock.recv(4096).decode().splitlines())

        proc = _start(daemons, root, tmp_path / "d.log", env={"NOTIFY_SOCKET": address})
        receive_until(lambda line: line == "READY=1")
        assert "0 runs in flight" in receive_until(lambda line: line.startswith("STATUS="))
        doc = _stuck_doc()
        doc["started_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        write_meta(root, "1_task1", doc)
        assert "1 run in flight" in receive_until(
            lambda line: line.startswith("STATUS=") and "1 run in" in line
        )
        proc.send_signal(signal.SIGHUP)
        receive_until(lambda line: line == "RELOADING=1")
        receive_until(lambda line: line == "READY=1")
        proc.send_signal(signal.SIGTERM)
        receive_until(lambda line: line == "STOPPING=1")
        assert proc.wait(10) == 0
