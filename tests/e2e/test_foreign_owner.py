"""A project another user owns is left alone by the commands that write, through the real CLI.

Run as root (or any user) from a directory inside another user's project, a hook or a
``process`` would post-flight that user's project and leave files of its own in it: a
root-owned ``specs/.state.lock`` the owner can no longer open. As git leaves a repository of
"dubious ownership" alone, the hook does nothing there and says why on stderr, and
``process``, ``scan --apply`` and ``verify --repair`` refuse (exit 2). What only reads
(``scan``, ``process --dry-run``) stays allowed, and so does the daemon, whose roots are named
by whoever starts it (docs/safety.md, "A project of another user").
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.daemon_process import daemons
from helpers.documents import researched_doc
from helpers.hooks import IDS, MINUTE_AGO, OWN, RUNTIMES, TASKS, Runtime, hook_process, payload
from helpers.hooks import written as written_ago
from helpers.needs import require
from helpers.project import META, project, task_status, user_config, write_meta
from helpers.waiting import wait_until


@pytest.fixture(autouse=True)
def _as_root() -> None:
    require(os.geteuid() == 0, "giving a project to another user takes root")


#: The other user: nobody.
OTHER_UID = 65534
#: A command that hangs this long has failed (each one here finishes at once).
TIMEOUT_S = 60


def foreign_project(tmp_path: Path) -> Path:
    """A project with a valid final file of task 259 (``give_away`` gives it to OTHER_UID)."""
    root = project(tmp_path / "proj", TASKS, todo=True, artifacts=[259])
    written_ago(write_meta(root, OWN, researched_doc()), MINUTE_AGO)
    return root


def give_away(root: Path, whose: str = "root") -> None:
    """All of the project to OTHER_UID (``whose="root"``), or its specs directory alone."""
    top = root if whose == "root" else root / "specs"
    for path in [top, *top.rglob("*")]:
        os.lchown(path, OTHER_UID, OTHER_UID)


def assert_untouched(root: Path, state: bytes) -> None:
    specs = root / "specs"
    assert (specs / "state.json").read_bytes() == state, "state.json was written"
    assert (specs / OWN / META).exists(), "the metadata file was post-flighted"
    assert not (specs / ".state.lock").exists(), "a lock file was left in the project"
    assert {p.stat().st_uid for p in specs.rglob("*")} == {OTHER_UID}, "a file of ours was left"


def cli(*args: object, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "postflightd", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
        cwd=cwd,
    )


def assert_refused(out: subprocess.CompletedProcess[str], root: Path) -> None:
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith(f"postflightd: {root}")
    assert "owned by nobody (uid 65534)" in out.stderr
    assert "run postflightd as its owner" in out.stderr


@pytest.mark.parametrize("runtime", RUNTIMES, ids=IDS)
@pytest.mark.parametrize("whose", ["root", "specs"])
def test_the_hook_leaves_another_users_project_alone(
    tmp_path: Path, runtime: Runtime, whose: str
) -> None:
    """The agent's directory is a task directory below the other user's specs/: the hook
    answers "nothing to do" in the runtime's protocol (every runtime's exit 0) and says why in
    one line on stderr."""
    root = foreign_project(tmp_path)
    stdin = payload(runtime, root / "specs" / OWN)
    give_away(root, whose)
    state = (root / "specs" / "state.json").read_bytes()
    answer = hook_process(runtime, stdin)
    assert_untouched(root, state)
    assert answer.doc == {}
    assert answer.code == 0
    assert answer.stderr.count("\n") == 1, answer.stderr
    owned = root if whose == "root" else root / "specs"
    assert answer.stderr.startswith(f"postflightd: {owned}: owned by nobody (uid 65534), ")


@pytest.mark.parametrize("whose", ["root", "specs"])
def test_process_refuses_another_users_project(tmp_path: Path, whose: str) -> None:
    root = foreign_project(tmp_path)
    give_away(root, whose)
    state = (root / "specs" / "state.json").read_bytes()
    out = cli("process", root / "specs" / OWN / META)
    assert_untouched(root, state)
    assert_refused(out, root if whose == "root" else root / "specs")


def test_scan_apply_refuses_another_users_project_found_from_below_its_specs(
    tmp_path: Path,
) -> None:
    root = foreign_project(tmp_path)
    give_away(root)
    state = (root / "specs" / "state.json").read_bytes()
    out = cli("scan", "--apply", cwd=root / "specs" / OWN)
    assert_untouched(root, state)
    assert_refused(out, root)


def test_verify_repair_refuses_another_users_project(tmp_path: Path) -> None:
    root = foreign_project(tmp_path)
    give_away(root)
    state = (root / "specs" / "state.json").read_bytes()
    assert_refused(cli("verify", "--repair", root), root)
    assert_untouched(root, state)


def test_what_only_reads_another_users_project_is_allowed(tmp_path: Path) -> None:
    root = foreign_project(tmp_path)
    give_away(root)
    state = (root / "specs" / "state.json").read_bytes()
    scanned = cli("scan", cwd=root / "specs" / OWN)
    assert scanned.returncode == 0, scanned.stdout + scanned.stderr
    dry = cli("process", "--dry-run", root / "specs" / OWN / META)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert "+++ " in dry.stdout
    applied_dry = cli("scan", "--apply", "--dry-run", root)
    assert applied_dry.returncode == 0, applied_dry.stdout + applied_dry.stderr
    assert_untouched(root, state)


def test_the_daemon_watches_a_root_of_another_user_it_was_given(tmp_path: Path) -> None:
    """Its roots are named by whoever starts it (arguments, their own ``[watch] roots``):
    a service run for other users' projects is a deliberate set-up, not a directory one
    happened to stand in."""
    root = foreign_project(tmp_path)
    give_away(root)
    with daemons(tmp_path) as start:
        daemon = start(root)
        (started,) = daemon.events("daemon_started")
        assert started["roots"] == [str(root)]
        wait_until("the file applied", lambda: not (root / "specs" / OWN / META).exists())
        assert daemon.stop() == 0


@pytest.mark.parametrize("runtime", RUNTIMES[:1], ids=IDS[:1])
def test_a_root_the_users_configuration_trusts_is_post_flighted(
    tmp_path: Path, runtime: Runtime
) -> None:
    """As git's safe.directory: a root named in the user's ``[postflight] trusted_roots`` is
    written by the hook and by process, its owner notwithstanding."""
    root = foreign_project(tmp_path)
    give_away(root)
    user_config(f'[postflight]\ntrusted_roots = ["{tmp_path}/other", "{root}"]\n')
    answer = hook_process(runtime, payload(runtime, root / "specs" / OWN))
    assert answer.code == 0, answer
    assert not (root / "specs" / OWN / META).exists(), answer.stderr
    assert task_status(root, 259) == "researched"
    written_ago(write_meta(root, OWN, researched_doc()), MINUTE_AGO)
    out = cli("process", root / "specs" / OWN / META)
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_project_cannot_trust_itself(tmp_path: Path) -> None:
    """``trusted_roots`` in the project's own file (which its agents write) is refused: exit 2
    naming the key, nothing written."""
    root = foreign_project(tmp_path)
    (root / ".postflightd.toml").write_text(
        f'[postflight]\ntrusted_roots = ["{root}"]\n', encoding="utf-8"
    )
    give_away(root)
    state = (root / "specs" / "state.json").read_bytes()
    out = cli("process", root / "specs" / OWN / META)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "'postflight.trusted_roots'" in out.stderr and "not allowed in a project's own" in (
        out.stderr
    )
    assert_untouched(root, state)
