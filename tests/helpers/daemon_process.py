"""``postflightd watch`` as a real process: its JSON log, and the files the tests write for it.

The fixture that starts daemons (and kills every one at the end) is ``start_daemon`` in
tests/daemon/conftest.py; this module holds what it returns and what the tests write and read.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from helpers.documents import SESSION, researched_doc
from helpers.project import meta_path, task_status
from helpers.waiting import wait_until


class Daemon:
    """One ``postflightd watch`` process and its JSON log."""

    def __init__(self, proc: subprocess.Popen[bytes], log_path: Path) -> None:
        self.proc = proc
        self.log_path = log_path

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        out = []
        for line in self.log_path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue  # a traceback or a partial line
            if isinstance(event, dict) and (name is None or event.get("event") == name):
                out.append(event)
        return out

    def wait_event(self, name: str, timeout: float = 30.0, count: int = 1) -> list[dict[str, Any]]:
        return wait_until(
            f"{count} log event(s) {name!r}",
            lambda: (found := self.events(name)) and len(found) >= count and found,
            timeout,
        )

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, then the exit code (a deadline only: a healthy daemon exits at once)."""
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)


DaemonFactory = Callable[..., Daemon]


def terminate(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> int:
    """SIGTERM, then the exit code; killed (and its code that of the kill) if it has not
    exited within ``timeout`` seconds, so that a test never leaves it behind."""
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


@contextmanager
def daemons(log_dir: Path) -> Iterator[DaemonFactory]:
    """Start daemons logging into ``log_dir``; every one of them is killed at the end."""
    procs: list[subprocess.Popen[bytes]] = []
    counter = iter(range(1000))

    def start(
        *roots: Path,
        argv_prefix: list[str] | None = None,
        env: dict[str, str] | None = None,
        wait_ready: bool = True,
    ) -> Daemon:
        log_path = log_dir / f"daemon-{next(counter)}.log"
        prefix = argv_prefix or [sys.executable, "-m", "postflightd"]
        argv = [*prefix, "watch", *map(str, roots), "--log-format", "json", "--log-level", "debug"]
        with log_path.open("wb") as log_file:
            proc = subprocess.Popen(
                argv,
                stdout=subprocess.DEVNULL,
                stderr=log_file,
                env={**os.environ, **(env or {})},
            )
        procs.append(proc)
        daemon = Daemon(proc, log_path)
        if wait_ready:
            wait_until(
                "the daemon to start",
                lambda: daemon.events("daemon_started") or proc.poll() is not None,
            )
            if proc.poll() is not None:
                pytest.fail(f"daemon exited {proc.returncode}: {log_path.read_text()}")
        return daemon

    try:
        yield start
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)  # a test may have stopped it
                proc.kill()
            proc.wait(5)


def in_progress_doc(n: int, *, session: str = SESSION, stage: str = "reading") -> dict[str, Any]:
    """An ``in_progress`` file for task n, started now, one phase of three done."""
    doc = researched_doc(f"{n}_task{n}")
    doc["status"] = "in_progress"
    doc["artifacts"] = []
    doc["started_at"] = datetime.now(UTC).isoformat()
    doc["partial_progress"] = {"stage": stage, "details": "working", "phases_completed": 1}
    doc["metadata"]["session_id"] = session
    doc["metadata"]["phases_total"] = 3
    return doc


def applied(root: Path, n: int) -> bool:
    """Task n is researched and its metadata file is gone."""
    return task_status(root, n) == "researched" and not os.path.lexists(meta_path(root, n))
