"""conftest's leak check: a test that leaves a thread or a child process running fails."""

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
    """
)


def test_a_leaked_thread_or_child_process_fails_the_test(tmp_path: Path) -> None:
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
    assert "4 passed, 2 errors" in out, out
    assert "ERROR test_inner.py::test_leaves_a_thread - " in out, out
    assert "ERROR test_inner.py::test_leaves_a_child_process - " in out, out
    assert "Failed: the test left running: thread 'leaky'" in out, out
    assert re.search(r"Failed: the test left running: process \d+ sleep", out), out
