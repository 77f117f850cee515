"""The instance lock follows the specs directory, in-process on a fake clock: the supervisor
finds it replaced, takes the lock in the new one and releases the old, or keeps the old one
when another daemon holds the new. And ``open`` holds nothing when it fails."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from helpers.documents import final_text
from helpers.inprocess_daemon import (
    FakeClock,
    config_loader,
    events,
    holder,
    open_daemon,
    polling_config,
    step,
)
from helpers.project import meta_path, project, task_status
from postflightd.daemon.loop import Daemon
from postflightd.daemon.sdnotify import SystemdNotifier
from postflightd.errors import UsageError
from postflightd.fs.locks import AlreadyRunningError, InstanceLock


def replace_specs(root: Path) -> Path:
    """The specs directory swapped for a copy (a restore from backup): returns the old one."""
    old = root / "specs.old"
    shutil.copytree(root / "specs", root / "specs.new")
    (root / "specs").rename(old)
    (root / "specs.new").rename(root / "specs")
    return old


def test_a_replaced_specs_directory_is_relocked_and_watched(tmp_path: Path) -> None:
    root = project(tmp_path / "proj", 1)
    clock = FakeClock()
    with capture_logs() as logs, open_daemon(root, clock=clock) as daemon:
        assert holder(root / "specs") == os.getpid()
        old = replace_specs(root)
        step(daemon, clock)
        (restarted,) = events(logs, "watch_restarted")
        assert restarted["reason"] == "the specs directory was replaced"
        assert holder(root / "specs") == os.getpid()
        assert holder(old) is None, "the lock in the old directory is released"
        assert events(logs, "instance_lock_lost") == []

        meta_path(root, 1).write_text(final_text(1), encoding="utf-8")
        step(daemon, clock)
        assert task_status(root, 1) == "researched"
    assert holder(root / "specs") is None


def test_a_replaced_specs_directory_held_by_another_daemon_keeps_the_old_lock(
    tmp_path: Path,
) -> None:
    root = project(tmp_path / "proj", 1)
    clock = FakeClock()
    with capture_logs() as logs, open_daemon(root, clock=clock) as daemon:
        old = replace_specs(root)
        other = InstanceLock(root / "specs")
        other.acquire(root)  # another daemon got there first
        try:
            step(daemon, clock)
            (lost,) = events(logs, "instance_lock_lost")
            assert lost["root"] == str(root)
            assert "already watching" in lost["error"]
            assert holder(old) == os.getpid(), "the old lock is kept, not dropped"
        finally:
            other.release()
    assert holder(old) is None


def test_a_specs_directory_that_goes_missing_and_comes_back_is_relocked(tmp_path: Path) -> None:
    root = project(tmp_path / "proj", 1)
    clock = FakeClock()
    with capture_logs() as logs, open_daemon(root, clock=clock) as daemon:
        (root / "specs").rename(root / "away")
        step(daemon, clock)
        assert [e["reason"] for e in events(logs, "specs_dir_missing")] == [
            "the specs directory is gone"
        ]
        assert daemon.roots[0].missing
        shutil.copytree(root / "away", root / "specs")
        step(daemon, clock)
        assert [e["reason"] for e in events(logs, "watch_restarted")] == [
            "the specs directory is back"
        ]
        assert not daemon.roots[0].missing
        assert holder(root / "specs") == os.getpid()
        assert holder(root / "away") is None


def test_open_fails_holding_nothing_when_another_daemon_holds_one_root(tmp_path: Path) -> None:
    first, second = (
        project(tmp_path / "a", 1),
        project(tmp_path / "b", 1),
    )
    clock = FakeClock()
    with open_daemon(second, clock=clock):
        daemon = Daemon(
            [first, second],
            polling_config(),
            config_loader(),
            notifier=SystemdNotifier({}),
            clock=clock.clock(),
        )
        with pytest.raises(AlreadyRunningError, match=f"pid {os.getpid()}"):
            daemon.open()
        assert holder(first / "specs") is None, "the lock it took on the first root is let go"
        daemon.close()


def test_open_refuses_a_root_without_a_specs_directory(tmp_path: Path) -> None:
    clock = FakeClock()
    daemon = Daemon(
        [tmp_path],
        polling_config(),
        config_loader(),
        notifier=SystemdNotifier({}),
        clock=clock.clock(),
    )
    with pytest.raises(UsageError, match="no specs/ directory to watch"):
        daemon.open()
    daemon.close()
