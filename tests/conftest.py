"""Shared fixtures: isolated config/state directories and small project builders."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from postflightd.daemon.watch.inotify_tree import EVENT_READER
from postflightd.project.state import STATE_CACHE

SESSION = "sess_1736700000_abc123"


@pytest.fixture(autouse=True)
def _isolated_dirs(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """Tests never touch the real home: config, state, cache and logs live in a temp dir."""
    home = tmp_path_factory.mktemp("home")
    for var, sub in (
        ("XDG_CONFIG_HOME", "config"),
        ("XDG_STATE_HOME", "state"),
        ("XDG_DATA_HOME", "data"),
        ("XDG_CACHE_HOME", "cache"),
    ):
        monkeypatch.setenv(var, str(home / sub))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("POSTFLIGHTD_CONFIG", raising=False)
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    yield


#: How long a thread or child process a test stopped may take to be gone: the machines running
#: the suite are shared, and a daemon asked to stop finishes its batch and closes its journal.
LEAK_GRACE_S = 10.0


def child_processes() -> set[tuple[int, str]]:
    """This process's child processes (pid, command name), zombies included (unwaited)."""
    me = os.getpid()
    children: set[tuple[int, str]] = set()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return children  # no /proc: processes are not checked on this system
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read().decode("utf-8", "replace")
        except OSError:
            continue  # gone meanwhile
        name, _, rest = stat.partition(" (")[2].rpartition(") ")
        fields = rest.split()
        if len(fields) > 1 and fields[1] == str(me):
            children.add((int(entry), f"{name} ({fields[0]})"))
    return children


@pytest.fixture(autouse=True)
def _no_leaked_threads_or_processes() -> Iterator[None]:
    """Fail a test that leaves a thread running or a child process unwaited (STYLE.md).

    Compared with what ran before the test, after a grace deadline for what is shutting down.
    The inotify reader thread is process-wide by design: it is stopped here once no watch
    uses it (a watch left running keeps it, and the test fails).
    """
    threads = set(threading.enumerate())
    children = {pid for pid, _ in child_processes()}
    yield
    EVENT_READER.stop_if_unused()
    leaked: list[str] = []

    def settled() -> bool:
        leaked[:] = [
            f"thread {t.name!r}" for t in threading.enumerate() if t not in threads and t.is_alive()
        ] + [f"process {pid} {name}" for pid, name in child_processes() if pid not in children]
        return not leaked

    try:
        wait_until("threads and child processes to end", settled, LEAK_GRACE_S)
    except pytest.fail.Exception:
        pytest.fail(f"the test left running: {', '.join(leaked)}")


@pytest.fixture(autouse=True)
def _fresh_state_cache() -> Iterator[None]:
    """Each test starts with no parsed state.json held over from another test's tmp_path."""
    STATE_CACHE.clear()
    yield
    STATE_CACHE.clear()


def task_entry(number: int, name: str, **extra: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "project_number": number,
        "project_name": name,
        "status": "researching",
        "language": "general",
        "session_id": SESSION,
        "last_updated": "2026-01-08T14:30:00Z",
        "artifacts": [],
    }
    entry.update(extra)
    return entry


def make_project(root: Path, tasks: list[dict[str, Any]] | None = None) -> Path:
    """A project root with specs/state.json listing ``tasks`` (None: no state.json)."""
    specs = root / "specs"
    specs.mkdir(parents=True, exist_ok=True)
    if tasks is not None:
        state = {"next_project_number": 1000, "active_projects": tasks}
        (specs / "state.json").write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
    return root


def write_meta(root: Path, task_dir: str, doc: Any) -> Path:
    """Write ``specs/<task_dir>/.return-meta.json`` (a str is written verbatim)."""
    directory = root / "specs" / task_dir
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / ".return-meta.json"
    text = doc if isinstance(doc, str) else json.dumps(doc, indent=2)
    path.write_text(text, encoding="utf-8")
    return path


def write_artifact(root: Path, rel: str, text: str = "content\n") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def researched_doc(task_dir: str = "259_prove_completeness") -> dict[str, Any]:
    """Seed 004's 'Research Success' example, for task_dir."""
    return {
        "status": "researched",
        "artifacts": [
            {
                "type": "report",
                "path": f"specs/{task_dir}/reports/research-001.md",
                "summary": "Research report with 5 plugin patterns",
            }
        ],
        "next_steps": "Run /plan to create implementation plan",
        "metadata": {
            "session_id": SESSION,
            "agent_type": "neovim-research-agent",
            "duration_seconds": 180,
            "delegation_depth": 1,
            "delegation_path": ["orchestrator", "research", "neovim-research-agent"],
            "findings_count": 5,
        },
    }


def wait_until(what: str, cond: Callable[[], Any], timeout: float = 30.0) -> Any:
    """Poll ``cond`` until it returns something truthy, and return that; fail naming ``what``
    at the deadline. Deadlines are generous: the machines running the suite are shared."""
    deadline = time.monotonic() + timeout
    while not (value := cond()):
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.01)
    return value
