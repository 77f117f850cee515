"""The forked parallel check: a scan large enough to fork gives what one process gives.

The number of processes is forced through ``$POSTFLIGHTD_SCAN_WORKERS`` (what the scan honours
on any machine, one core included), and the forks are counted from outside the module: a fork
hook of this process (``os.register_at_fork``) counts them and reads each child's pid, which
the child writes first thing.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from helpers.documents import researched_doc, task_entry
from helpers.project import project, write_artifact, write_meta
from postflightd.config import Config, policy_from
from postflightd.pipeline import apply as pipeline
from postflightd.pipeline import parallel
from postflightd.pipeline.check import check_file, metadata_refs, rule_options
from postflightd.pipeline.results import FileReport
from postflightd.project.metafiles import MetaFileRef
from postflightd.project.root import Project


class Forks:
    """The forks of this process while ``counting_forks`` is on: how many, each child's pid,
    and, for the child chosen to die, how it ended (seen before the scan reaps it)."""

    def __init__(self, wait_for: int | None) -> None:
        self.count = 0
        self.pids: list[int] = []
        self.wait_for = wait_for
        self.ended: tuple[int, int] | None = None  # (si_code, si_status)
        self.read_fd, self.write_fd = os.pipe()


_counting: list[Forks] = []  # the one on, if any


def _before_fork() -> None:
    if _counting:
        _counting[0].count += 1  # the child keeps its copy: its own number


def _in_child() -> None:
    if _counting:
        os.write(_counting[0].write_fd, os.getpid().to_bytes(4, "little"))


def _in_parent() -> None:
    if not _counting:
        return
    forks = _counting[0]
    data = b""
    while len(data) < 4:
        data += os.read(forks.read_fd, 4 - len(data))
    pid = int.from_bytes(data, "little")
    forks.pids.append(pid)
    if forks.count == forks.wait_for:
        # Until the chosen child ends, without reaping it (WNOWAIT): the scan reaps it.
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        assert info is not None
        forks.ended = (info.si_code, info.si_status)


# A fork hook cannot be removed: installed once, doing nothing unless counting_forks is on.
os.register_at_fork(before=_before_fork, after_in_child=_in_child, after_in_parent=_in_parent)


@contextlib.contextmanager
def counting_forks(wait_for: int | None = None) -> Iterator[Forks]:
    """Count this process's forks; ``wait_for``: the number of the child (1, 2, ...) whose end
    the parent waits for right after forking it (a child that dies on its own, soon)."""
    forks = Forks(wait_for)
    _counting.append(forks)
    try:
        yield forks
    finally:
        _counting.clear()
        os.close(forks.read_fd)
        os.close(forks.write_fd)


def _reaped(pids: list[int]) -> bool:
    """Every one of these children ended and was reaped (none left behind)."""
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            continue
        return False
    return True


def _scan(root: Path, monkeypatch: pytest.MonkeyPatch, workers: int) -> tuple[Any, Forks]:
    monkeypatch.setenv(parallel.WORKERS_ENV, str(workers))
    config = Config()
    with counting_forks() as forks:
        report = pipeline.scan([root], config, policy_from(config), NOW).to_json()
    assert _reaped(forks.pids)
    return report, forks


NOW = datetime.now(UTC)


def test_parallel_scan_equals_sequential_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scan forced to two processes forks one worker and reports exactly what a single
    process reports."""
    n = 600
    root = project(tmp_path, [task_entry(i, f"t{i}") for i in range(1, n + 1, 2)])
    for i in range(1, n + 1):
        doc = researched_doc(f"{i}_t{i}")
        if i % 7 == 0:
            doc["status"] = "completed"
        if i % 5 == 0:
            write_artifact(root, f"specs/{i}_t{i}/reports/research-001.md")
        write_meta(root, f"{i}_t{i}", doc if i % 11 else '{"status": ')
    forked, forks = _scan(root, monkeypatch, 2)
    single, no_forks = _scan(root, monkeypatch, 1)
    assert (forks.count, len(forks.pids), no_forks.count) == (1, 1, 0)
    assert forked == single
    assert forked["summary"]["files"] == n
    codes = {f["code"] for file in forked["files"] for f in file["findings"]}
    assert {"PF102", "PF203", "PF502", "PF600"} <= codes


def _mixed_project(tmp_path: Path, n: int) -> Path:
    root = project(tmp_path, [task_entry(i, f"t{i}") for i in range(1, n + 1, 2)])
    for i in range(1, n + 1):
        doc = researched_doc(f"{i}_t{i}")
        if i % 7 == 0:
            doc["status"] = "completed"
        write_meta(root, f"{i}_t{i}", doc if i % 11 else '{"status": ')
    return root


#: Files enough for nine chunks of parallel.CHUNK_FILES: more chunks than processes.
MANY = 1100


@pytest.mark.parametrize("workers", [2, 3, 4])
def test_any_number_of_workers_taking_chunks_from_the_queue_gives_the_sequential_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    """More processes than cores still share the chunks so that each is checked once, and
    the output comes in task order; each worker beyond this process is one fork, reaped."""
    assert MANY // parallel.CHUNK_FILES > 4
    root = _mixed_project(tmp_path, MANY)
    single, no_forks = _scan(root, monkeypatch, 1)
    forked, forks = _scan(root, monkeypatch, workers)
    assert no_forks.count == 0
    assert (forks.count, len(set(forks.pids))) == (workers - 1, workers - 1)
    assert forked == single
    assert [f["task"] for f in forked["files"]] == list(range(1, MANY + 1))


def test_task_directories_without_a_file_are_skipped_by_whichever_process_looks_into_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scan lists its task directories without looking into them: each process looks
    into those of the chunks it takes, and one without a metadata file (a third of them
    here, spread over every chunk) is reported by none, forked or not."""
    root = _mixed_project(tmp_path, MANY)
    for i in range(3, MANY + 1, 3):
        (root / "specs" / f"{i}_t{i}" / ".return-meta.json").unlink()
    single, _ = _scan(root, monkeypatch, 1)
    forked, forks = _scan(root, monkeypatch, 3)
    assert forks.count == 2
    assert forked == single
    assert [f["task"] for f in forked["files"]] == [i for i in range(1, MANY + 1) if i % 3]


def test_thousands_of_task_directories_with_few_files_fork_no_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A project keeps its task directories after their files are applied and deleted: the
    workers are counted by the files the directories hold (from a sample of them), not by
    the directories, and a few files among thousands of directories fork nothing."""
    monkeypatch.delenv(parallel.WORKERS_ENV, raising=False)
    n = 3 * parallel.PARALLEL_MIN_FILES
    root = project(tmp_path, [task_entry(i, f"t{i}") for i in range(1, n + 1)])
    for i in range(1, n + 1):
        (root / "specs" / f"{i}_t{i}").mkdir(parents=True, exist_ok=True)
    for i in (5, 2500, 5999):
        write_meta(root, f"{i}_t{i}", researched_doc(f"{i}_t{i}"))
    config = Config()
    with counting_forks() as forks:
        report = pipeline.scan([root], config, policy_from(config), NOW).to_json()
    assert forks.count == 0
    assert [f["task"] for f in report["files"]] == [5, 2500, 5999]


def _summary(report: FileReport) -> tuple[Any, ...]:
    findings = [(f.code, f.severity, f.location, f.message) for f in report.findings]
    return (report.path_text, report.task, report.valid, report.raw_status, findings)


def test_a_worker_killed_mid_chunk_loses_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first of two workers is killed (SIGKILL, as the OOM killer would) on the third file
    of the chunk it took: that chunk, and every one it would have taken, are checked by the
    others; nothing is missing, nothing twice, and the killed worker is seen dead by SIGKILL.

    The check given to the scan is the real one, through the scan's own ``check`` argument; it
    kills the process it runs in when that is the first worker."""
    root = _mixed_project(tmp_path, MANY)
    config = Config()
    monkeypatch.setenv(parallel.WORKERS_ENV, "3")
    parent = os.getpid()
    with Project.open(root, config, read_only=True) as opened:
        refs = metadata_refs(opened)
        check = partial(
            check_file,
            opened,
            config=config,
            policy=policy_from(config),
            now=NOW,
            options=rule_options(config, model=False),
        )
        expected = [_summary(check(ref)) for ref in refs]
        with counting_forks(wait_for=1) as forks:
            got = [
                _summary(report)
                for report in parallel.check_all(
                    refs, _killed_on_third_file(check, parent, forks), opened.root
                )
            ]
    assert got == expected
    assert forks.count == 2 and len(forks.pids) == 2
    assert forks.ended == (os.CLD_KILLED, signal.SIGKILL)
    assert _reaped(forks.pids)


def _killed_on_third_file(
    check: Callable[[MetaFileRef], FileReport], parent: int, forks: Forks
) -> Callable[[MetaFileRef], FileReport]:
    calls = [0]

    def checked(ref: MetaFileRef) -> FileReport:
        if os.getpid() != parent and forks.count == 1:  # in the first worker
            calls[0] += 1
            if calls[0] == 3:
                os.kill(os.getpid(), signal.SIGKILL)
        return check(ref)

    return checked


def test_the_workers_env_sets_the_processes_whatever_the_cores(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A whole number from 1 to 64 is the count, even for ten files; anything else leaves the
    default: one process per core, one more only for each PARALLEL_MIN_FILES files."""
    monkeypatch.delenv(parallel.WORKERS_ENV, raising=False)
    default = parallel.worker_count(parallel.PARALLEL_MIN_FILES)
    assert default == min(len(os.sched_getaffinity(0)), 2)
    monkeypatch.setenv(parallel.WORKERS_ENV, "3")
    assert parallel.worker_count(10) == 3
    for raw in ("0", "-2", "x", "2.5", "65", ""):
        monkeypatch.setenv(parallel.WORKERS_ENV, raw)
        assert parallel.worker_count(parallel.PARALLEL_MIN_FILES) == default
        assert parallel.worker_count(parallel.PARALLEL_MIN_FILES - 1) == 1


def test_the_queue_hands_out_each_chunk_once_in_order_then_says_it_is_empty() -> None:
    queue = parallel._ChunkQueue.create(5)
    assert queue is not None
    queue.close_writer()
    assert [queue.take() for _ in range(7)] == [0, 1, 2, 3, 4, None, None]
    queue.close()


def test_more_chunk_numbers_than_a_pipe_holds_make_no_queue_rather_than_wait() -> None:
    """Nobody reads the queue before the fork: numbers that do not fit in the pipe (four
    megabytes, past the largest pipe a process may ask for; a user past the pipe quota gets
    one page) make no queue, and one process checks everything, instead of waiting forever."""
    before = len(os.listdir("/proc/self/fd"))
    assert parallel._ChunkQueue.create(1_000_000) is None
    assert len(os.listdir("/proc/self/fd")) == before
