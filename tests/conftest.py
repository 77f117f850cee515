"""Fixtures for every test: isolated config/state directories, a fresh state cache, and the
check that a test leaves no thread, child process or open file descriptor behind; and, for the
whole session, hypothesis's files kept in a temp dir.

Plain helper functions are in tests/helpers/ (imported as ``helpers.<module>``), not here.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

# Before the first import of a helper: their asserts report values as the tests' own do.
pytest.register_assert_rewrite("helpers")

#: helpers.needs sees every skip: under CI, one without an allowance fails.
pytest_plugins = ("helpers.needs",)

from helpers.processes import child_processes, open_descriptors  # noqa: E402
from helpers.waiting import wait_until  # noqa: E402
from postflightd.daemon.watch.inotify_tree import EVENT_READER  # noqa: E402
from postflightd.project.state import STATE_CACHE  # noqa: E402


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
    # postflightd on PATH, as an installed one is (init writes the hook's command by name
    # then): the virtualenv's bin directory first, whether or not it was activated.
    bin_dir = str(Path(sys.executable).parent)
    monkeypatch.setenv("PATH", os.pathsep.join([bin_dir, os.environ.get("PATH", "")]))
    yield


_HYPOTHESIS_HOME: list[str] = []


def pytest_sessionstart(session: pytest.Session) -> None:
    """Hypothesis keeps its files (a cache of the constants it reads from the code under test,
    written as it collects) in a temp dir, not in a .hypothesis/ of whatever directory pytest
    runs from. The property tests keep no example database at all (``database=None``)."""
    from hypothesis.configuration import set_hypothesis_home_dir

    _HYPOTHESIS_HOME.append(tempfile.mkdtemp(prefix="pytest-hypothesis-"))
    set_hypothesis_home_dir(_HYPOTHESIS_HOME[-1])


def pytest_sessionfinish(session: pytest.Session) -> None:
    while _HYPOTHESIS_HOME:
        shutil.rmtree(_HYPOTHESIS_HOME.pop(), ignore_errors=True)


#: How long a thread or child process a test stopped may take to be gone: the machines running
#: the suite are shared, and a daemon asked to stop finishes its batch and closes its journal.
LEAK_GRACE_S = 10.0


@pytest.fixture(autouse=True)
def _no_leaked_threads_or_processes() -> Iterator[None]:
    """Fail a test that leaves a thread running, a child process unwaited or a file descriptor
    open: each would outlive the test and act on, or hold open, the files of the tests after
    it (and a daemon that leaks a descriptor per postflight runs out of them in a month).

    Compared with what ran before the test, after a grace deadline for what is shutting down.
    The inotify reader thread is process-wide by design: it is stopped here once no watch
    uses it (a watch left running keeps it, and the test fails).
    """
    threads = set(threading.enumerate())
    children = {pid for pid, _ in child_processes()}
    descriptors = set(open_descriptors().items())
    yield
    EVENT_READER.stop_if_unused()
    leaked: list[str] = []

    def settled() -> bool:
        leaked[:] = (
            [
                f"thread {t.name!r}"
                for t in threading.enumerate()
                if t not in threads and t.is_alive()
            ]
            + [f"process {pid} {name}" for pid, name in child_processes() if pid not in children]
            + [
                f"file descriptor {fd} ({target})"
                for fd, target in sorted(open_descriptors().items())
                if (fd, target) not in descriptors
            ]
        )
        return not leaked

    try:
        wait_until("threads, child processes and descriptors to end", settled, LEAK_GRACE_S)
    except pytest.fail.Exception:
        pytest.fail(f"the test left running: {', '.join(leaked)}")


@pytest.fixture(autouse=True)
def _fresh_state_cache() -> Iterator[None]:
    """Each test starts with no parsed state.json held over from another test's tmp_path."""
    STATE_CACHE.clear()
    yield
    STATE_CACHE.clear()
