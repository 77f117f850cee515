"""conftest's leak check: a test that leaves a thread or a child process running, or a file
descriptor open, fails."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

INNER = textwrap.dedent(
    """
    import atexit
    import os
    import subprocess
    import threading

    import conftest

    conftest.LEAK_GRACE_S = 1.0  # the inner tests fail fast
    stop = threading.Event()
    atexit.register(stop.set)


    def test_leaves_a_thread() -> None:
        threading.Thread(target=stop.wait, name="leaky", daemon=True).start()


    def test_leaves_a_child_process() -> None:
        proc = subprocess.Popen(["sleep", "30"])
        atexit.register(proc.wait)
        atexit.register(proc.kill)


    def test_a_thread_that_ends_within_the_grace_period_is_no_leak() -> None:
        threading.Thread(target=stop.wait, args=(0.3,), name="brief").start()


    def test_a_waited_child_is_no_leak() -> None:
        subprocess.run(["true"], check=True)


    kept = []
    atexit.register(lambda: [os.close(fd) for fd in kept])


    def test_leaves_a_descriptor_open() -> None:
        kept.append(os.open("leaky.txt", os.O_WRONLY | os.O_CREAT, 0o644))


    def test_a_closed_descriptor_is_no_leak() -> None:
        with open("closed.txt", "w") as fh:
            fh.write("x")
    """
)


def test_a_leaked_thread_child_process_or_descriptor_fails_the_test(tmp_path: Path) -> None:
    shutil.copy(Path(__file__).with_name("conftest.py"), tmp_path / "conftest.py")
    shutil.copytree(Path(__file__).with_name("helpers"), tmp_path / "helpers")
    (tmp_path / "test_inner.py").write_text(INNER, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rE", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    assert "6 passed, 3 errors" in out, out
    assert "ERROR test_inner.py::test_leaves_a_thread - " in out, out
    assert "ERROR test_inner.py::test_leaves_a_child_process - " in out, out
    assert "Failed: the test left running: thread 'leaky'" in out, out
    assert re.search(r"Failed: the test left running: process \d+ sleep", out), out
    assert "ERROR test_inner.py::test_leaves_a_descriptor_open - " in out, out
    leaked_fd = r"Failed: the test left running: file descriptor \d+ \(\S*leaky.txt\)"
    assert re.search(leaked_fd, out), out
