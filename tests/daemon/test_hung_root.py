"""A root whose filesystem hangs stalls nothing else: a real ``postflightd watch`` on two roots,
one of them a FUSE mount (tests/fixtures/hangfs.py) whose every operation blocks while a
control file exists, as a hard NFS mount whose server stopped answering blocks its callers.

The other root's files are applied meanwhile, ``status`` shows the hung root stalled, the log
has ``root_stalled``; released, the root resumes with a rescan that applies what was written
during the hang; SIGTERM during a hang exits 0 promptly. Skipped (saying why) where FUSE
cannot mount (no /dev/fuse, no libfuse2, no fusepy, or no right to mount), and failed
instead under CI, whose .ci/run provides all of them (helpers.needs).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers.daemon_process import DaemonFactory, applied
from helpers.documents import researched_doc
from helpers.needs import unavailable
from helpers.project import meta_path, project, user_config, write_meta
from helpers.waiting import wait_until

#: Real daemons and a FUSE process: `pytest -m "not slow"` leaves them out.
pytestmark = pytest.mark.slow

HANGFS = Path(__file__).parents[1] / "fixtures" / "hangfs.py"
#: The stall threshold for these daemons (the test hook), instead of a minute.
STALL_ENV = {"POSTFLIGHTD_STALL_AFTER_S": "1"}


@dataclass
class HungMount:
    """A FUSE mount of ``source`` at ``mount`` that blocks while ``control`` exists."""

    source: Path
    mount: Path
    control: Path

    def hang(self) -> None:
        self.control.touch()

    def release(self) -> None:
        self.control.unlink(missing_ok=True)


def _fuse_unavailable() -> str | None:
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse (.ci/run makes it: mknod /dev/fuse c 10 229)"
    if shutil.which("fusermount") is None and shutil.which("fusermount3") is None:
        return "no fusermount (the fuse package): the mount is taken down with it"
    try:
        import fuse  # type: ignore[import-untyped]  # noqa: F401
    except ImportError:
        return "fusepy is not installed"
    except OSError as exc:  # fusepy raises EnvironmentError when libfuse cannot be found
        return f"libfuse2 is not installed ({exc})"
    return None


@pytest.fixture
def hung_mount(tmp_path: Path, start_daemon: DaemonFactory) -> Iterator[HungMount]:
    """The mount, released and unmounted at the end (before the daemons are killed)."""
    why = _fuse_unavailable()
    if why is not None:
        unavailable(f"cannot mount a FUSE filesystem here: {why}")
    hm = HungMount(tmp_path / "a-source", tmp_path / "a", tmp_path / "hang")
    hm.source.mkdir()
    hm.mount.mkdir()
    log = (tmp_path / "hangfs.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, str(HANGFS), str(hm.source), str(hm.mount), str(hm.control)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        try:
            wait_until(
                "the FUSE mount", lambda: os.path.ismount(hm.mount) or proc.poll() is not None, 15
            )
        except pytest.fail.Exception:
            unavailable("cannot mount a FUSE filesystem here: it did not appear in 15 s")
        if proc.poll() is not None:
            text = (tmp_path / "hangfs.log").read_text(errors="replace").strip()
            unavailable(f"the FUSE filesystem exited before it was mounted: {text[-600:]}")
        yield hm
    finally:
        hm.release()
        fusermount = shutil.which("fusermount") or shutil.which("fusermount3")
        if fusermount is not None and os.path.ismount(hm.mount):
            subprocess.run([fusermount, "-u", "-z", str(hm.mount)], check=False)
        if proc.poll() is None:
            proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()


def _status(root: Path) -> dict[str, object]:
    """``postflightd status ROOT --format json``, bounded: a status that hangs fails the test."""
    out = subprocess.run(
        [sys.executable, "-m", "postflightd", "status", str(root), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    data = json.loads(out.stdout)
    roots = data["roots"] if isinstance(data, dict) else data
    (entry,) = [r for r in roots if r["root"] == str(root)]
    return dict(entry)


def test_a_hung_root_stalls_nothing_else(
    tmp_path: Path, start_daemon: DaemonFactory, hung_mount: HungMount
) -> None:
    project(hung_mount.source, 2)
    a = hung_mount.mount
    b = project(tmp_path / "b", 2)
    # A reconciliation every half second: the daemon meets the hang soon without an event.
    user_config("[watch]\nrescan_interval_s = 0.5\n")
    daemon = start_daemon(a, b, env=STALL_ENV)
    try:
        hung_mount.hang()
        stalled = daemon.wait_event("root_stalled")
        assert stalled[0]["root"] == str(a)
        assert stalled[0]["level"] == "warning"
        # Written while A hangs, beside the mount (no event can reach the daemon): only the
        # rescan at its resumption can find it.
        write_meta(hung_mount.source, "1_task1", researched_doc("1_task1"))
        write_meta(b, "1_task1", researched_doc("1_task1"))
        wait_until("B's file applied while A hangs", lambda: applied(b, 1))
        assert not daemon.events("root_resumed")
        note = _status(a)
        assert "stalled" in str(note.get("note")), note
        shown = _status(b)["daemon"]
        assert (shown["running"], shown["pid"]) == (True, daemon.proc.pid)
        hung_mount.release()
        resumed = daemon.wait_event("root_resumed")
        assert resumed[0]["root"] == str(a)
        assert resumed[0]["stalled_s"] >= 1
        wait_until("A's file applied once it answers", lambda: applied(hung_mount.source, 1))
        # Hung again, then told to stop: the other root's file is applied, and the daemon
        # exits 0 without waiting for the hung one.
        hung_mount.hang()
        daemon.wait_event("root_stalled", count=2)
        write_meta(b, "2_task2", researched_doc("2_task2"))
        wait_until("B's second file applied", lambda: applied(b, 2))
        assert daemon.stop(timeout=20) == 0
        assert daemon.events("daemon_stopped")
    finally:
        hung_mount.release()
    assert meta_path(hung_mount.source, 2).parent.is_dir()
