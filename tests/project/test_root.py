"""``Project`` holds the specs directory open: every caller closes it, none relies on ``__del__``.

``Directory.__del__`` stays as a safety net for a daemon that runs for months. These tests take
it away, keep a reference to every project opened (so nothing is collected either), and count
the process's descriptors in ``/proc/self/fd``: any project left open shows up.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from helpers.documents import researched_doc, task_entry
from helpers.needs import require
from helpers.project import project, write_artifact, write_meta
from postflightd.commands.process import run_process
from postflightd.commands.scan import ScanOutput, run_scan
from postflightd.commands.status import collect_status
from postflightd.config import Config, policy_from
from postflightd.fs.directory import Directory
from postflightd.hooks import claude
from postflightd.hooks.decision import Verdict, answer
from postflightd.journal.database import Journal, journal_path
from postflightd.project.root import Project

ROUNDS = 20


@pytest.fixture(autouse=True)
def _linux_proc() -> None:
    require(Path("/proc/self/fd").is_dir(), "needs /proc (the open descriptors are counted there)")


def open_fds() -> int:
    # What earlier tests left for the collector is closed first, so it is not counted.
    gc.collect()
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def no_safety_net(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A Directory that nobody closes stays open: only ``with`` or ``close()`` closes it."""
    monkeypatch.delattr(Directory, "__del__")
    yield


def leaves_no_descriptor(run: Callable[[], object]) -> None:
    run()  # once first: whatever opens lazily (a cached module, a log handler) opens now
    before = open_fds()
    kept = [run() for _ in range(ROUNDS)]
    assert open_fds() == before, f"{open_fds() - before} descriptor(s) left open"
    del kept


def project_root(tmp_path: Path) -> Path:
    root = project(tmp_path / "proj", [task_entry(259, "prove_completeness")])
    write_artifact(root, "specs/259_prove_completeness/reports/research-001.md")
    return root


@pytest.mark.usefixtures("no_safety_net")
@pytest.mark.parametrize("read_only", [False, True])
def test_projects_opened_and_closed_in_a_loop_leave_no_descriptor(
    tmp_path: Path, read_only: bool
) -> None:
    root = project_root(tmp_path)
    config = Config()

    def once() -> Project:
        with Project.open(root, config, read_only=read_only) as project:
            assert project.specs is not None
            return project  # kept by the caller: only the with block closes it

    leaves_no_descriptor(once)


@pytest.mark.usefixtures("no_safety_net")
def test_a_missing_a_refused_and_an_unusable_specs_directory_leave_no_descriptor(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "missing"
    missing.mkdir()
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "specs").symlink_to(project_root(tmp_path) / "specs")
    unusable = project(tmp_path / "unusable")
    (unusable / "specs" / "state.json").write_text("{not json", encoding="utf-8")
    config = Config()

    def once() -> list[Project]:
        out = []
        for root in (missing, linked, unusable):
            with Project.open(root, config) as project:
                out.append(project)
        return out

    leaves_no_descriptor(once)


def test_a_closed_project_has_no_open_specs_directory(tmp_path: Path) -> None:
    with Project.open(project_root(tmp_path), Config()) as project:
        assert project.specs is not None
        fd = project.specs.fd
        os.fstat(fd)
    assert project.specs.fd == -1
    with pytest.raises(OSError):
        os.fstat(fd)


@pytest.mark.usefixtures("no_safety_net")
def test_status_scan_and_process_close_every_project_they_open(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = project_root(tmp_path)
    config = Config()
    meta = write_meta(root, "259_prove_completeness", researched_doc())
    now = datetime.now(UTC)

    def once() -> None:
        collect_status([root], {root: (config, policy_from(config))}, now)
        for apply, output in ((False, None), (True, ScanOutput(dry_run=True))):
            run_scan(
                roots=[str(root)],
                fmt="text",
                select=(),
                ignore=(),
                strict=None,
                apply=apply,
                config_path=None,
                output=output,
            )
        run_process(file=str(meta), fmt="text", config_path=None, dry_run=True)
        capsys.readouterr()

    leaves_no_descriptor(once)


@pytest.mark.usefixtures("no_safety_net")
def test_process_and_the_hook_close_every_project_they_open(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = project_root(tmp_path)
    meta = root / "specs" / "259_prove_completeness" / ".return-meta.json"

    def open_journal(config: Config) -> Journal:
        return Journal.open(journal_path(config.journal.path))

    def once() -> None:
        write_meta(root, "259_prove_completeness", researched_doc())
        assert run_process(file=str(meta), fmt="text", config_path=None) == 0
        write_meta(root, "259_prove_completeness", researched_doc())
        request = claude.parse({"cwd": str(root), "hook_event_name": "Stop"}, {})
        assert answer(request, lambda _start: Config(), open_journal) == Verdict()
        assert not meta.exists()
        capsys.readouterr()

    leaves_no_descriptor(once)
