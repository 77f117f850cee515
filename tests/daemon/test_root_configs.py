"""Each root a daemon watches is governed by its own configuration, at start and after SIGHUP,
through a real ``postflightd watch`` process.

A's ``.postflightd.toml`` (which A's agents can write) maps A's ``researched`` outcomes to
``abandoned``; B, watched by the same daemon, must keep its own mapping whatever A's file says,
and a file of A's that turns unreadable must neither stop the daemon nor B's postflight.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from helpers.daemon_process import DaemonFactory
from helpers.documents import final_text
from helpers.project import meta_path, project, task_status, user_config
from helpers.waiting import wait_until

#: A project file turning its own ``researched`` outcomes into another status.
ABANDON = '[postflight.status_map]\nresearched = "abandoned"\n'

#: Project files Python's own TOML reader and int() refuse with RecursionError / ValueError.
HOSTILE = {
    "nested": "x = " + "[" * 5000 + "]" * 5000 + "\n",
    "long_integer": "[timeouts]\nresearch = 1" + "0" * 5000 + "\n",
}


def two_projects(tmp_path: Path, a_config: str | None = ABANDON) -> tuple[Path, Path]:
    """A (with ``a_config`` as its own file) and B (no file), one task each."""
    return project(tmp_path / "a", 1, config=a_config), project(tmp_path / "b", 1)


def post_both(a: Path, b: Path) -> None:
    """A final ``researched`` file in each project, then wait until the daemon applied both."""
    for root in (a, b):
        meta_path(root, 1).write_text(final_text(1), encoding="utf-8")
    wait_until(
        "both files applied", lambda: not meta_path(a, 1).exists() and not meta_path(b, 1).exists()
    )


@pytest.mark.parametrize("order", ["ab", "ba"])
def test_each_root_is_applied_under_its_own_file_whatever_the_order(
    tmp_path: Path, start_daemon: DaemonFactory, order: str
) -> None:
    a, b = two_projects(tmp_path)
    start_daemon(*((a, b) if order == "ab" else (b, a)))
    post_both(a, b)
    assert task_status(a, 1) == "abandoned"
    assert task_status(b, 1) == "researched", "A's status_map decided B's outcome"


def test_roots_from_the_user_file_are_each_governed_by_their_own(
    tmp_path: Path, start_daemon: DaemonFactory
) -> None:
    a, b = two_projects(tmp_path)
    user_config(f'[watch]\nroots = ["{a}", "{b}"]\n')
    daemon = start_daemon()
    (started,) = daemon.events("daemon_started")
    assert started["roots"] == [str(a), str(b)]
    post_both(a, b)
    assert (task_status(a, 1), task_status(b, 1)) == ("abandoned", "researched")


def test_sighup_reloads_each_root_from_its_own_file(
    tmp_path: Path, start_daemon: DaemonFactory
) -> None:
    """Started on the user's file (neither project has one); A then writes its own: after
    SIGHUP it governs A, and B stays on the user's file."""
    a, b = two_projects(tmp_path, a_config=None)
    user_config("[timeouts]\nresearch = 3600\n")
    daemon = start_daemon(b, a)
    (a / ".postflightd.toml").write_text(ABANDON, encoding="utf-8")
    daemon.signal(signal.SIGHUP)
    reloaded = daemon.wait_event("config_reloaded", count=2)
    sources = {e["root"]: e["config"] for e in reloaded}
    assert sources == {str(a): str(a / ".postflightd.toml"), str(b): str(user_config_file())}
    post_both(a, b)
    assert (task_status(a, 1), task_status(b, 1)) == ("abandoned", "researched")


def user_config_file() -> Path:
    from postflightd.config import user_config_path

    return user_config_path()


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_a_root_whose_file_turns_bad_keeps_its_old_configuration_on_sighup(
    tmp_path: Path, start_daemon: DaemonFactory, kind: str
) -> None:
    a, b = two_projects(tmp_path)
    daemon = start_daemon(a, b)
    (a / ".postflightd.toml").write_text(HOSTILE[kind], encoding="utf-8")
    daemon.signal(signal.SIGHUP)
    (failed,) = daemon.wait_event("config_reload_failed")
    assert failed["root"] == str(a)
    assert str(a / ".postflightd.toml") in failed["error"]
    assert failed["kept"] == str(a / ".postflightd.toml")
    (reloaded,) = daemon.wait_event("config_reloaded")
    assert reloaded["root"] == str(b)
    post_both(a, b)
    assert task_status(a, 1) == "abandoned", "A is applied under its old configuration"
    assert task_status(b, 1) == "researched"
    assert daemon.proc.poll() is None, "the daemon is still running"
    assert daemon.stop() == 0


# --- a root whose file is bad at the start ----------------------------------------------------


@pytest.mark.parametrize("named_by", ["arguments", "user file"])
def test_a_root_whose_file_is_bad_at_the_start_is_skipped_and_watched_once_fixed(
    tmp_path: Path, start_daemon: DaemonFactory, named_by: str
) -> None:
    """A's file does not load when the daemon starts: A is skipped with its reason, B is
    watched and post-flighted; once A's file is fixed, SIGHUP watches A too (what A's agent
    left meanwhile is applied, under A's now good file)."""
    a, b = two_projects(tmp_path, a_config=HOSTILE["nested"])
    if named_by == "user file":
        user_config(f'[watch]\nroots = ["{a}", "{b}"]\n')
        daemon = start_daemon()
    else:
        daemon = start_daemon(a, b)
    (skipped,) = daemon.events("root_skipped")
    assert skipped["root"] == str(a)
    assert str(a / ".postflightd.toml") in skipped["error"]
    (started,) = daemon.events("daemon_started")
    assert started["roots"] == [str(b)]
    meta_path(a, 1).write_text(final_text(1), encoding="utf-8")
    meta_path(b, 1).write_text(final_text(1), encoding="utf-8")
    wait_until("B's file applied", lambda: not meta_path(b, 1).exists())
    assert task_status(b, 1) == "researched"
    assert meta_path(a, 1).exists(), "a skipped root was post-flighted"
    assert task_status(a, 1) == "researching"
    assert not (a / "specs" / ".postflightd.pid").exists()

    (a / ".postflightd.toml").write_text(ABANDON, encoding="utf-8")
    daemon.signal(signal.SIGHUP)
    (watched,) = daemon.wait_event("root_watched")
    assert watched["root"] == str(a)
    assert watched["config"] == str(a / ".postflightd.toml")
    wait_until("A's file applied", lambda: not meta_path(a, 1).exists())
    assert task_status(a, 1) == "abandoned", "A is applied under its own, fixed file"
    assert daemon.proc.poll() is None, "the daemon is still running"
    assert daemon.stop() == 0


def test_a_skipped_root_still_bad_at_sighup_stays_skipped(
    tmp_path: Path, start_daemon: DaemonFactory
) -> None:
    a, b = two_projects(tmp_path, a_config=HOSTILE["long_integer"])
    daemon = start_daemon(a, b)
    daemon.signal(signal.SIGHUP)
    skipped = daemon.wait_event("root_skipped", count=2)
    assert [e["root"] for e in skipped] == [str(a), str(a)]
    daemon.wait_event("config_reloaded")
    post = meta_path(b, 1)
    post.write_text(final_text(1), encoding="utf-8")
    wait_until("B's file applied", lambda: not post.exists())
    assert not daemon.events("root_watched")
    assert daemon.stop() == 0


def test_a_daemon_whose_every_root_is_skipped_exits_2_with_the_reasons(
    tmp_path: Path, start_daemon: DaemonFactory
) -> None:
    a = project(tmp_path / "a", 1, config=HOSTILE["nested"])
    b = project(tmp_path / "b", 1, config=HOSTILE["long_integer"])
    daemon = start_daemon(a, b, wait_ready=False)
    assert daemon.proc.wait(30) == 2
    text = daemon.log_path.read_text(encoding="utf-8")
    assert "Traceback" not in text
    assert [e["root"] for e in daemon.events("root_skipped")] == [str(a), str(b)]
    (last,) = [line for line in text.splitlines() if line.startswith("postflightd: ")]
    assert last.startswith("postflightd: nothing to watch: ")
    assert str(a / ".postflightd.toml") in last
    assert str(b / ".postflightd.toml") in last
    assert not daemon.events("daemon_started")


@pytest.mark.parametrize("names", ["a directory it lacks", "a link"])
def test_a_root_whose_file_names_a_specs_directory_it_cannot_watch_is_skipped(
    tmp_path: Path, start_daemon: DaemonFactory, names: str
) -> None:
    """A's file loads, but the specs directory it names is missing, or a link out of the
    root: that one project's file does not stop the daemon either. A is skipped with its
    reason, B is watched; once A's file names its own specs directory again, SIGHUP watches A."""
    a, b = two_projects(tmp_path, a_config='specs_dir = "tasks"\n')
    if names == "a link":
        (tmp_path / "elsewhere").mkdir()
        (a / "tasks").symlink_to(tmp_path / "elsewhere")
    daemon = start_daemon(a, b)
    (skipped,) = daemon.events("root_skipped")
    assert skipped["root"] == str(a)
    assert skipped["error"].startswith(str(a)) and "tasks" in skipped["error"]
    (started,) = daemon.events("daemon_started")
    assert started["roots"] == [str(b)]
    meta_path(a, 1).write_text(final_text(1), encoding="utf-8")
    meta_path(b, 1).write_text(final_text(1), encoding="utf-8")
    wait_until("B's file applied", lambda: not meta_path(b, 1).exists())
    assert meta_path(a, 1).exists(), "a skipped root was post-flighted"
    if names == "a link":
        assert not list((tmp_path / "elsewhere").iterdir()), "written through the link"

    (a / ".postflightd.toml").write_text(ABANDON, encoding="utf-8")
    daemon.signal(signal.SIGHUP)
    (watched,) = daemon.wait_event("root_watched")
    assert watched["root"] == str(a)
    wait_until("A's file applied", lambda: not meta_path(a, 1).exists())
    assert task_status(a, 1) == "abandoned"
    assert daemon.stop() == 0
