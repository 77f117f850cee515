"""Work in other processes: one helper, and workers that add nothing to a command's output."""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers.documents import researched_doc, task_entry
from helpers.project import project, write_meta
from helpers.waiting import wait_until
from postflightd.concurrency import Worker
from postflightd.pipeline import parallel

SRC = Path(__file__).resolve().parents[1] / "src" / "postflightd"

#: What starts a process to work in: the calls, and the modules that make pools of them.
_FORK_CALLS = {"fork", "forkpty"}
_POOL_MODULES = ("multiprocessing", "concurrent.futures")


def _is_pool_module(name: str) -> bool:
    return any(name == m or name.startswith(m + ".") for m in _POOL_MODULES)


def _forking_names(path: Path) -> set[str]:
    """The forking calls and pool modules a module's code names."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and node.attr in _FORK_CALLS:
            found.add(node.attr)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if _is_pool_module(a.name)}
        elif isinstance(node, ast.ImportFrom) and _is_pool_module(node.module or ""):
            found.add(node.module or "")
    return found


def test_only_the_concurrency_module_starts_processes_to_work_in() -> None:
    """Every piece of work run in another process goes through ``postflightd.concurrency``:
    no other module forks or builds a pool of its own (a subprocess of another program is
    not work of ours)."""
    offenders = {
        str(path.relative_to(SRC)): names
        for path in sorted(SRC.rglob("*.py"))
        if path.name != "concurrency.py" and (names := _forking_names(path))
    }
    assert offenders == {}


def _two_roots(tmp_path: Path) -> tuple[Path, Path]:
    first = project(tmp_path / "first", [task_entry(1, "t1")])
    write_meta(first, "1_t1", '{"status": ')
    second = project(tmp_path / "second", [task_entry(i, f"t{i}") for i in range(1, 400, 2)])
    for i in range(1, 400):
        write_meta(second, f"{i}_t{i}", researched_doc(f"{i}_t{i}") if i % 9 else "{")
    return first, second


def _scan(roots: tuple[Path, Path], workers: int, fmt: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, parallel.WORKERS_ENV: str(workers)}
    argv = [sys.executable, "-m", "postflightd", "scan", "--format", fmt, *map(str, roots)]
    return subprocess.run(argv, capture_output=True, text=True, env=env, check=False, timeout=120)


def test_a_forked_scan_of_a_second_root_prints_the_first_roots_lines_once(
    tmp_path: Path,
) -> None:
    """stdout to a pipe is written in blocks: the first root's lines may still be in this
    process's buffer when the second root's scan starts its workers, which hold a copy of it.
    The output is the one process's, byte for byte, whatever the workers."""
    roots = _two_roots(tmp_path)
    for fmt in ("text", "github"):
        single = _scan(roots, 1, fmt)
        forked = _scan(roots, 3, fmt)
        assert (forked.returncode, forked.stdout, forked.stderr) == (
            single.returncode,
            single.stdout,
            single.stderr,
        )
        assert single.returncode == 1 and "1_t1" in single.stdout


def test_an_interrupted_forked_scan_says_so_once_without_a_traceback(tmp_path: Path) -> None:
    """Ctrl-C reaches the whole process group, workers included: the scan ends as an
    interrupted command does (exit 130), and no worker prints a traceback."""
    root = project(tmp_path / "big", [task_entry(i, f"t{i}") for i in range(1, 6000, 2)])
    for i in range(1, 6000):
        write_meta(root, f"{i}_t{i}", researched_doc(f"{i}_t{i}") if i % 2 else "{")
    env = {**os.environ, parallel.WORKERS_ENV: "3"}
    argv = [sys.executable, "-m", "postflightd", "scan", "--format", "text", str(root)]
    with subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
        start_new_session=True,
    ) as scan:
        assert scan.stdout is not None
        wait_until("a first line", lambda: bool(scan.stdout and scan.stdout.readline()), 60)
        time.sleep(0.05)  # the workers are running by the first line out
        os.killpg(scan.pid, signal.SIGINT)
        _, err = scan.communicate(timeout=60)
    assert scan.returncode == 130
    assert "Traceback" not in err


def test_a_worker_sends_its_messages_in_order_then_ends() -> None:
    """What ``work`` sends arrives whole and in order, any size; then the end, and the worker
    is reaped."""
    big = "x" * (3 << 20)  # more than a pipe holds
    worker = Worker.start(lambda send: [send(m) for m in (1, ("two", [2.0]), big)])
    assert worker is not None
    pid = worker.pid
    assert [worker.receive() for _ in range(3)] == [1, ("two", [2.0]), big]
    assert (worker.receive(), worker.ended) == (None, True)
    assert worker.fd == -1
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def test_a_worker_that_fails_is_seen_ended(capfd: pytest.CaptureFixture[str]) -> None:
    """An exception in the work, or Ctrl-C while it waits: the worker ends without a word on
    this process's streams, and its caller sees the end (the work is the caller's to do)."""

    def fails(send: Callable[[object], None]) -> None:
        raise RuntimeError("boom")

    def waits(send: Callable[[object], None]) -> None:
        # Python's own handler, whatever this test process was started with (a shell's
        # background job ignores SIGINT).
        signal.signal(signal.SIGINT, signal.default_int_handler)
        send("waiting")
        signal.pause()

    worker = Worker.start(fails)
    assert worker is not None
    assert (worker.receive(), worker.ended) == (None, True)
    worker = Worker.start(waits)
    assert worker is not None
    assert worker.receive() == "waiting"
    os.kill(worker.pid, signal.SIGINT)
    assert (worker.receive(), worker.ended) == (None, True)
    assert capfd.readouterr() == ("", "")
