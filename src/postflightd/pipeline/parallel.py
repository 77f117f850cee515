"""The forked parallel check of a large scan: chunks of files shared with worker processes.

A scan of more files than one process pays for forks workers (``worker_count``,
``postflightd.concurrency``). The files
are cut into chunks, and every process, this one included, takes the next chunk from one
queue as soon as it is free: a pipe holding the chunks' numbers, from which each read of
four bytes takes one number, whole, and no two processes the same (``_ChunkQueue``). Who is
faster checks more: this process also writes the output, and takes fewer chunks for it.
Workers send back plain rows (``_Row``) with their chunk's number; this process reads them
in chunk order, so the output is the one process's output, streamed.
"""

from __future__ import annotations

import contextlib
import os
import select
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Final

from postflightd.concurrency import Worker, grow_pipe
from postflightd.pipeline.results import FileReport
from postflightd.project.meta_file import Loaded
from postflightd.project.metafiles import MetaFileRef
from postflightd.rules.findings import Finding, Severity
from postflightd.rules.positions import with_positions

#: Each worker process beyond the first needs this many files to pay for itself.
PARALLEL_MIN_FILES = 2000


#: Files a process checks in one go (and a worker sends back in one message): small enough
#: that the processes finish together, large enough that taking a chunk costs nothing.
CHUNK_FILES = 128

#: At most this many chunks (the queue holds four bytes a chunk, in one pipe's buffer).
_MAX_CHUNKS: Final = 16_000

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
    check: Callable[[MetaFileRef], FileReport | None],
    root: Path,
    positions: bool = False,
    before_fork: Callable[[], object] | None = None,
    files: int | None = None,
) -> Iterator[FileReport]:
    """``check`` of every ref, in order; a large scan shares the chunks with forked workers.

    ``check`` gives None for a ref that has no file after all (a task directory listed
    without being looked into: each process looks into those of its own chunks), and
    nothing is reported for it; ``files``: how many of ``refs`` hold a file, when that is
    not all of them (what the workers are counted by: an estimate will do).

    ``root``: the project root the refs are under (a row sent back does not carry it);
    ``positions``: findings need lines and columns, found in the worker from the bytes it
    read (they are not sent back); ``before_fork``: loads what every process would otherwise
    load for itself (``rules.metadata.prepare_type_check``), once, for the workers to inherit.

    Validation is CPU-bound Python: every process takes chunks from the queue until it is
    empty. Output streams in chunk order as it is produced; while a worker's chunk is not
    ready this process checks the next ones, up to ``_AHEAD`` chunks, so memory holds a few
    chunks per process, not the whole result. Workers only read; a chunk a failed worker
    took is checked here.
    """
    workers = worker_count(len(refs) if files is None else files)
    if workers < 2:
        yield from _checked(check, refs)
        return
    size = max(CHUNK_FILES, -(-len(refs) // _MAX_CHUNKS))
    chunks = [refs[i : i + size] for i in range(0, len(refs), size)]
    queue = _ChunkQueue.create(len(chunks))
    if queue is None:  # no pipe to spare: one process checks everything
        yield from _checked(check, refs)
        return
    if before_fork is not None:
        before_fork()
    helpers: list[_Worker] = []
    try:
        for _ in range(1, workers):
            helper = _Worker.start(
                partial(_take_chunks, queue, chunks, lambda ref: _row(check(ref), positions)),
                [h.fd for h in helpers],
            )
            if helper is not None:
                helpers.append(helper)
        queue.close_writer()
        mine: dict[int, list[FileReport]] = {}  # chunks taken and checked here, not yet out
        taken = -1  # the last chunk this process took
        done = False  # the queue is empty
        for i, chunk in enumerate(chunks):
            # Take chunks here until chunk i is one of them, or is known to be a worker's
            # (taken before this process's last) and its rows are ready; a worker's chunk not
            # ready yet is waited for only with _AHEAD chunks checked here and held.
            while (
                i not in mine
                and not done
                and (i > taken or (len(mine) < _AHEAD and not _ready(helpers, i)))
            ):
                own = queue.take()
                if own is None:
                    done = True
                else:
                    taken = own
                    mine[own] = list(_checked(check, chunks[own]))
            if i in mine:
                yield from mine.pop(i)
                continue
            rows = _rows_of(helpers, i, len(chunk))
            if rows is None:  # the worker that took it failed: checked here
                yield from _checked(check, chunk)
            else:
                # Each row names its file: the chunk's refs are not made again here.
                for row in rows:
                    if row is not None:
                        yield _from_row(root, row)
    finally:
        queue.close()
        for helper in helpers:
            helper.stop()


def _checked(
    check: Callable[[MetaFileRef], FileReport | None], refs: Iterable[MetaFileRef]
) -> Iterator[FileReport]:
    for ref in refs:
        report = check(ref)
        if report is not None:
            yield report


#: Chunks this process checks ahead of the output while a worker's chunk is not ready.
_AHEAD: Final = 4


def _ready(helpers: list[_Worker], index: int) -> bool:
    """Whether the rows of chunk ``index`` (a worker's) are here or on their way, or a worker
    has ended (its chunks may be this process's to check): then waiting costs little."""
    waiting = []
    for helper in helpers:
        if helper.ended or (helper.head is not None and helper.head[0] == index):
            return True
        if helper.head is None:
            waiting.append(helper.fd)
    if not waiting:
        return True
    try:
        return bool(select.select(waiting, [], [], 0)[0])
    except (OSError, ValueError):
        return True


def _rows_of(helpers: list[_Worker], index: int, count: int) -> list[_Row | None] | None:
    """The rows of chunk ``index``, from the worker that took it; None when that worker
    failed (or no worker sends it: each sends its chunks in the order it took them, so once
    every live worker is past ``index`` none will)."""
    while True:
        waiting: list[_Worker] = []
        for helper in helpers:
            if helper.head is None and not helper.ended:
                waiting.append(helper)
            elif helper.head is not None and helper.head[0] == index:
                rows = helper.head[1]
                helper.head = None
                return rows if len(rows) == count else None
        if not waiting:
            return None
        if len(waiting) > 1:  # whichever has something to say first
            with contextlib.suppress(OSError, ValueError):
                ready = set(select.select([h.fd for h in waiting], [], [])[0])
                waiting = [h for h in waiting if h.fd in ready]
        for helper in waiting:
            helper.receive()


class _ChunkQueue:
    """The chunks' numbers, four bytes each, in a pipe every process reads from.

    Written whole before the fork and then closed for writing: a read of four bytes takes
    the next number atomically (a pipe's reads are serialized, and four bytes are always
    there until the end), and an empty pipe reads as its end.
    """

    __slots__ = ("_read", "_write")

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self._read = read_fd
        self._write = write_fd

    @classmethod
    def create(cls, chunks: int) -> _ChunkQueue | None:
        try:
            read_fd, write_fd = os.pipe()
        except OSError:
            return None
        queue = cls(read_fd, write_fd)
        data = b"".join(i.to_bytes(4, "little") for i in range(chunks))
        try:
            grow_pipe(write_fd, len(data))
            # Nobody reads before the fork: a pipe smaller than the numbers (a user past the
            # system's pipe quota gets one page) must refuse them, not wait forever.
            os.set_blocking(write_fd, False)
            view = memoryview(data)
            while view:
                view = view[os.write(write_fd, view) :]
        except OSError:  # more than a pipe holds here: one process checks everything
            queue.close()
            return None
        return queue

    def take(self) -> int | None:
        """The next chunk's number, or None when every chunk is taken."""
        try:
            data = os.read(self._read, 4)
        except OSError:
            return None
        return int.from_bytes(data, "little") if len(data) == 4 else None

    def close_writer(self) -> None:
        fd, self._write = self._write, -1
        if fd >= 0:
            os.close(fd)

    def close(self) -> None:
        self.close_writer()
        fd, self._read = self._read, -1
        if fd >= 0:
            os.close(fd)


class _Worker:
    """A worker (``concurrency.Worker``) sending back ``(chunk number, rows)`` per chunk it
    takes, and the next such message read but not yet wanted (``head``)."""

    __slots__ = ("head", "worker")

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.head: tuple[int, list[_Row | None]] | None = None

    @classmethod
    def start(
        cls, work: Callable[[Callable[[object], None]], object], inherited: list[int]
    ) -> _Worker | None:
        worker = Worker.start(work, inherited)
        return None if worker is None else cls(worker)

    @property
    def fd(self) -> int:
        return self.worker.fd

    @property
    def ended(self) -> bool:
        return self.worker.ended

    def receive(self) -> None:
        """Read the next message into ``head``; at the end, or on anything but a message,
        the worker is over (``ended``)."""
        head = self.worker.receive()
        if (
            isinstance(head, tuple)
            and len(head) == 2
            and isinstance(head[0], int)
            and isinstance(head[1], list)
        ):
            self.head = head
        elif not self.worker.ended:
            self.worker.ended = True
            self.worker.stop()

    def stop(self) -> None:
        self.worker.stop()


def _take_chunks(  # pragma: no cover - runs in the worker
    queue: _ChunkQueue,
    chunks: Sequence[Sequence[MetaFileRef]],
    check: Callable[[MetaFileRef], _Row | None],
    send: Callable[[object], None],
) -> None:
    """A worker's work: every chunk it takes from the queue, checked and sent back."""
    queue.close_writer()
    while (index := queue.take()) is not None:
        send((index, [check(ref) for ref in chunks[index]]))


_FindingRow = tuple[str, str, str, str, int | None, int | None]


_Row = tuple[str, int | None, str | None, str | None, bool, bool, list[_FindingRow]]


def _row(report: FileReport | None, positions: bool = False) -> _Row | None:
    """What a scan report needs of a file, as plain values: unpickling dataclasses, paths and
    models costs more than checking the files did (None: no file there)."""
    if report is None:
        return None
    if positions:
        # The bytes stay in the child: where each finding is must be found here.
        report.findings = with_positions(report.findings, report.loaded.raw)
    findings = [
        (f.code, f.severity.value, f.location, f.message, f.line, f.col) for f in report.findings
    ]
    return (
        report.path_text,
        report.task,
        report.raw_status,
        report.session,
        report.valid,
        report.stuck,
        findings,
    )


#: Severities by value: a dictionary look-up, not the enumeration's call, per finding.
_SEVERITIES: Final = {s.value: s for s in Severity}

#: A row's file as the parent knows it: its bytes and document stayed in the worker.
_NOT_SENT = Loaded()


def _from_row(root: Path, row: _Row) -> FileReport:
    path_text, task, raw_status, session, valid, stuck, finding_rows = row
    findings = [
        Finding(c, _SEVERITIES[sev], loc, msg, line, col)
        for c, sev, loc, msg, line, col in finding_rows
    ]
    return FileReport(
        root=root,
        path_text=path_text,
        task=task,
        findings=findings,
        valid=valid,
        loaded=_NOT_SENT,
        raw_status=raw_status,
        session=session,
        stuck=stuck,
    )
