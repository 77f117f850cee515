"""The forked parallel check of a large scan: chunks of files shared with worker processes.

A scan of more files than one process pays for runs workers (``worker_count``) in a process
pool (``postflightd.concurrency``). The files are cut into chunks, handed out in order: the
pool is kept two chunks a worker ahead, and this process takes the next chunk not handed out
whenever it would otherwise wait. Who is faster checks more: this process also writes the
output, and takes fewer chunks for it. Workers send back plain rows (``_Row``) for each
chunk; this process reads them in chunk order, so the output is the one process's output,
streamed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

from postflightd.pipeline.results import FileReport
from postflightd.project.metadata import Loaded
from postflightd.project.metafiles import MetaFileRef
from postflightd.rules.findings import Finding, Severity
from postflightd.rules.positions import with_positions

if TYPE_CHECKING:
    from postflightd.concurrency import Future

#: Each worker process beyond the first needs this many files to pay for itself.
PARALLEL_MIN_FILES = 2000


#: Files a process checks in one go (and a worker sends back in one message): small enough
#: that the processes finish together, large enough that taking a chunk costs nothing.
CHUNK_FILES = 128

#: Chunks handed to the pool ahead, per worker: one being checked, one waiting for it.
_QUEUED: Final = 2

#: Chunks this process checks ahead of the output while a worker's chunk is not ready.
_AHEAD: Final = 4


#: The processes a scan checks its files with, when set to a whole number from 1 to
#: ``_MAX_WORKERS``: whatever the cores and the files (1: never fork). For a machine whose
#: cores the process cannot see, and for the tests of a forked scan on one core.
WORKERS_ENV: Final = "POSTFLIGHTD_SCAN_WORKERS"
_MAX_WORKERS: Final = 64


def worker_count(files: int) -> int:
    """Processes for checking ``files`` files: ``$POSTFLIGHTD_SCAN_WORKERS`` when it is set,
    else one per core this process may run on, and no more than the files pay for (a fork
    plus its rows cost about what 1,000 checks do)."""
    if not hasattr(os, "fork"):
        return 1
    raw = os.environ.get(WORKERS_ENV, "").strip()
    if raw.isdecimal() and 1 <= int(raw) <= _MAX_WORKERS:
        return int(raw)
    if not hasattr(os, "sched_getaffinity"):
        return 1
    return max(1, min(len(os.sched_getaffinity(0)), 1 + files // PARALLEL_MIN_FILES))


def check_all(
    refs: Sequence[MetaFileRef],
    check: Callable[[MetaFileRef], FileReport],
    root: Path,
    positions: bool = False,
    before_fork: Callable[[], object] | None = None,
) -> Iterator[FileReport]:
    """``check`` of every ref, in order; a large scan shares the chunks with forked workers.

    ``root``: the project root the refs are under (a row sent back does not carry it);
    ``positions``: findings need lines and columns, found in the worker from the bytes it
    read (they are not sent back); ``before_fork``: loads what every process would otherwise
    load for itself (``rules.metadata.prepare_type_check``), once, for the workers to inherit.

    Validation is CPU-bound Python. Output streams in chunk order as it is produced; while a
    worker's chunk is not ready this process checks the next ones, up to ``_AHEAD`` chunks,
    so memory holds a few chunks per process, not the whole result. Workers only read; a
    chunk a failed worker took (a worker that dies breaks the pool) is checked here.
    """
    workers = worker_count(len(refs))
    if workers < 2:
        for ref in refs:
            yield check(ref)
        return
    from postflightd.concurrency import process_pool, stop

    chunks = [refs[i : i + CHUNK_FILES] for i in range(0, len(refs), CHUNK_FILES)]
    if before_fork is not None:
        before_fork()
    pool = process_pool(workers - 1, _install, (chunks, lambda ref: _row(check(ref), positions)))
    if pool is None:
        for ref in refs:
            yield check(ref)
        return
    try:
        given: dict[int, Future[list[_Row]]] = {}  # chunks handed to the pool, not yet out
        mine: dict[int, list[FileReport]] = {}  # chunks taken and checked here, not yet out
        free = 0  # the first chunk handed to nobody
        broken = False  # the pool takes no more chunks

        def hand_out() -> None:
            nonlocal free, broken
            busy = sum(not f.done() for f in given.values())
            while not broken and free < len(chunks) and busy < _QUEUED * (workers - 1):
                try:
                    given[free] = pool.submit(_check_chunk, free)
                except (RuntimeError, OSError):  # a worker died (the pool is broken), or no process
                    broken = True
                    break
                free += 1
                busy += 1

        for i, chunk in enumerate(chunks):
            hand_out()
            # Take chunks here until chunk i is one of them, or it is the pool's and its rows
            # are ready; a pool's chunk not ready yet is waited for only with _AHEAD chunks
            # checked here and held.
            while i not in mine and (
                i >= free or (len(mine) < _AHEAD and not given[i].done() and free < len(chunks))
            ):
                mine[free] = [check(ref) for ref in chunks[free]]
                free += 1
                hand_out()
            if i in mine:
                yield from mine.pop(i)
                continue
            rows = _rows_of(given.pop(i), len(chunk))
            if rows is None:  # the worker that took it failed: checked here
                for ref in chunk:
                    yield check(ref)
            else:
                for ref, row in zip(chunk, rows, strict=True):
                    yield _from_row(root, ref, row)
    finally:
        stop(pool)


def _rows_of(future: Future[list[_Row]], count: int) -> list[_Row] | None:
    """The rows of a chunk handed to the pool; None when the worker failed."""
    try:
        rows = future.result()
    except Exception:  # noqa: BLE001 - a broken pool (a worker died), or the check raised there
        return None
    return rows if isinstance(rows, list) and len(rows) == count else None


#: In a worker: the chunks and the check of one file, as ``_install`` gave them.
_work: list[tuple[Sequence[Sequence[MetaFileRef]], Callable[[MetaFileRef], _Row]]] = []


def _install(  # pragma: no cover - runs in the worker
    chunks: Sequence[Sequence[MetaFileRef]], check: Callable[[MetaFileRef], _Row]
) -> None:
    _work.append((chunks, check))


def _check_chunk(index: int) -> list[_Row]:  # pragma: no cover - runs in the worker
    chunks, check = _work[0]
    return [check(ref) for ref in chunks[index]]


_FindingRow = tuple[str, str, str, str, int | None, int | None]


_Row = tuple[int | None, str | None, str | None, bool, bool, list[_FindingRow]]


def _row(report: FileReport, positions: bool = False) -> _Row:
    """What a scan report needs of a file, as plain values: unpickling dataclasses, paths and
    models costs more than checking the files did."""
    if positions:
        # The bytes stay in the child: where each finding is must be found here.
        report.findings = with_positions(report.findings, report.loaded.raw)
    findings = [
        (f.code, f.severity.value, f.location, f.message, f.line, f.col) for f in report.findings
    ]
    return (report.task, report.raw_status, report.session, report.valid, report.stuck, findings)


#: Severities by value: a dictionary look-up, not the enumeration's call, per finding.
_SEVERITIES: Final = {s.value: s for s in Severity}

#: A row's file as the parent knows it: its bytes and document stayed in the worker.
_NOT_SENT = Loaded()


def _from_row(root: Path, ref: MetaFileRef, row: _Row) -> FileReport:
    task, raw_status, session, valid, stuck, finding_rows = row
    findings = [
        Finding(c, _SEVERITIES[sev], loc, msg, line, col)
        for c, sev, loc, msg, line, col in finding_rows
    ]
    return FileReport(
        root=root,
        path_text=ref.path_text,
        task=task,
        findings=findings,
        valid=valid,
        loaded=_NOT_SENT,
        raw_status=raw_status,
        session=session,
        stuck=stuck,
    )
