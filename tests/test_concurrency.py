"""Work in other processes: one helper, and workers that add nothing to a command's output."""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.documents import researched_doc, task_entry
from helpers.project import project, write_meta
from helpers.waiting import wait_until
from postflightd.concurrency import process_pool, stop
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


def _ended(pid: int) -> bool:
    """Whether the process ``pid`` has ended (reaped, or a zombie not yet reaped)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rpartition(")")[2].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_a_worker_interrupted_while_waiting_for_work_says_nothing(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """Ctrl-C reaches a worker between two calls: it ends without a word on this process's
    stderr (multiprocessing would print its traceback), and the pool is still shut down."""
    pool = process_pool(1)
    assert pool is not None
    try:
        worker = pool.submit(os.getpid).result(timeout=60)
        os.kill(worker, signal.SIGINT)
        wait_until("the worker ends", lambda: _ended(worker), 60)
    finally:
        stop(pool)
    assert capfd.readouterr().err == ""
