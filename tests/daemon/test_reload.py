"""SIGHUP's reload, in-process on a fake clock: what ``Daemon.request_reload`` (the signal
handler's body) and the next turn of the loop do. (test_watch.py and test_journald.py
send the real SIGHUP to a subprocess.)"""

from __future__ import annotations

import os
import socket
from pathlib import Path

from structlog.testing import capture_logs

from helpers.documents import final_text
from helpers.inprocess_daemon import (
    FakeClock,
    events,
    holder,
    in_progress,
    open_daemon,
    step,
)
from helpers.project import error_records, meta_path, project, task_status, user_config
from postflightd.daemon.sdnotify import SystemdNotifier


def set_config(root: Path, text: str) -> None:
    """A new project configuration file: ``text``."""
    (root / ".postflightd.toml").write_text(text, encoding="utf-8")


def messages(sock: socket.socket) -> list[str]:
    """Every datagram waiting on ``sock``."""
    out: list[str] = []
    sock.setblocking(False)
    try:
        while True:
            out.append(sock.recv(4096).decode())
    except BlockingIOError:
        return out
    finally:
        sock.settimeout(5)


def test_a_reloaded_timeout_applies_to_the_run_in_flight(
    tmp_path: Path, listener: socket.socket
) -> None:
    root = project(tmp_path / "proj", 1, config="[timeouts]\nresearch = 3600\n")
    clock = FakeClock()
    notifier = SystemdNotifier({"NOTIFY_SOCKET": listener.getsockname()})
    with capture_logs() as logs, open_daemon(root, clock=clock, notifier=notifier) as daemon:
        meta_path(root, 1).write_text(in_progress(1, clock.now()), encoding="utf-8")
        step(daemon, clock)
        step(daemon, clock, 120)
        assert events(logs, "run_stuck") == []
        messages(listener)

        set_config(root, "[timeouts]\nresearch = 60\n")
        daemon.request_reload()
        daemon.iterate()
        assert daemon.roots[0].config.timeouts.research == 60
        (reloaded,) = events(logs, "config_reloaded")
        assert reloaded["rewatch"] is False
        # sd_notify(3): RELOADING=1 while re-reading, READY=1 after; then the stuck timer,
        # due at once since the forced rescan re-read the file with the new timeout.
        assert messages(listener) == [
            "RELOADING=1\nSTATUS=reloading the configuration",
            "READY=1\nSTATUS=watching 1 root; 1 run in flight",
            "STATUS=watching 1 root; 1 run in flight, 1 stuck",
        ]
        (stuck,) = events(logs, "run_stuck")
        assert (stuck["task"], stuck["timeout_s"]) == (1, 60)
        assert len(error_records(root, "timeout")) == 1


def test_a_bad_configuration_is_refused_and_the_old_one_kept(tmp_path: Path) -> None:
    root = project(tmp_path / "proj", 2, config="[timeouts]\nresearch = 3600\n")
    clock = FakeClock()
    with capture_logs() as logs, open_daemon(root, clock=clock) as daemon:
        before = daemon.roots[0].config
        set_config(root, "[timeouts]\nresearh = 1\n")  # a typo: an unknown key
        daemon.request_reload()
        daemon.iterate()
        (failed,) = events(logs, "config_reload_failed")
        assert "researh" in failed["error"]
        assert failed["kept"] == str(root / ".postflightd.toml")
        assert daemon.roots[0].config is before
        assert events(logs, "config_reloaded") == []

        meta_path(root, 1).write_text(final_text(1), encoding="utf-8")
        step(daemon, clock)
        assert task_status(root, 1) == "researched", "still applying with the old one"


def test_a_reload_moving_the_specs_directory_moves_the_instance_lock(tmp_path: Path) -> None:
    root = project(tmp_path / "proj", 1)
    (root / "work").mkdir()
    (root / "specs" / "state.json").rename(root / "work" / "state.json")
    clock = FakeClock()
    with capture_logs() as logs, open_daemon(root, clock=clock) as daemon:
        assert holder(root / "specs") == os.getpid()
        set_config(root, 'specs_dir = "work"\n')
        daemon.request_reload()
        daemon.iterate()
        (reloaded,) = events(logs, "config_reloaded")
        assert reloaded["rewatch"] is True
        assert holder(root / "work") == os.getpid()
        assert holder(root / "specs") is None, "the old lock is released"
        assert [e["specs_dir"] for e in events(logs, "watching")][-1] == str(root / "work")
    assert holder(root / "work") is None, "close releases the lock it moved to"


def test_a_reload_keeps_the_old_lock_when_the_new_specs_directory_is_held(
    tmp_path: Path,
) -> None:
    from postflightd.fs.locks import InstanceLock

    root = project(tmp_path / "proj", 1)
    (root / "work").mkdir()
    other = InstanceLock(root / "work")
    other.acquire(root)  # another daemon already watches the new specs directory
    clock = FakeClock()
    try:
        with capture_logs() as logs, open_daemon(root, clock=clock) as daemon:
            set_config(root, 'specs_dir = "work"\n')
            daemon.request_reload()
            daemon.iterate()
            (lost,) = events(logs, "instance_lock_lost")
            assert "already watching" in lost["error"]
            assert holder(root / "specs") == os.getpid(), "the old lock is kept"
        assert holder(root / "specs") is None
    finally:
        other.release()


def test_roots_changed_in_the_configuration_are_ignored_until_restart(tmp_path: Path) -> None:
    root = project(tmp_path / "proj", 1)
    clock = FakeClock()
    with capture_logs() as logs, open_daemon(root, clock=clock) as daemon:
        user_config(f'[watch]\nroots = ["{tmp_path}"]\n')
        daemon.request_reload()
        daemon.iterate()
        assert [e["reason"] for e in events(logs, "config_roots_ignored")] == [
            "[watch] roots changed: restart the daemon to watch the new roots"
        ]
        assert [wr.root for wr in daemon.roots] == [root]
