"""The forked parallel check of a large scan: chunks of files shared with worker processes.

A scan of more files than one process pays for forks workers (``worker_count``), each
checking its share of the chunks and sending back plain rows (``_Row``) through a pipe; the
parent reads them back in order, so the output is the one process's output, streamed.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from io import BufferedReader
from pathlib import Path
from typing import Final

from postflightd.pipeline.results import FileReport
from postflightd.project.metadata import Loaded
from postflightd.project.metafiles import MetaFileRef
from postflightd.rules.findings import Finding, Severity
from postflightd.rules.positions import with_positions

#: Each worker process beyond the first needs this many files to pay for itself.
PARALLEL_MIN_FILES = 2000


#: Files a worker checks and sends back in one piece: what the parent holds of its output.
CHUNK_FILES = 256


def worker_count(files: int) -> int:
    """Processes for checking ``files`` files: one per core this process may run on, and no
    more than the files pay for (a fork plus its rows cost about what 1,000 checks do)."""
    if not hasattr(os, "fork") or not hasattr(os, "sched_getaffinity"):
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

    Validation is CPU-bound Python: with W workers, chunk i is checked by worker i mod W
    (worker 0 is this process) and read back in order, so output streams as it is produced
    and memory holds at most a chunk per worker, not the whole result. Workers only read; a
    worker that fails has its chunks checked here.
    """
    workers = worker_count(len(refs))
    if workers < 2:
        for ref in refs:
            yield check(ref)
        return
    if before_fork is not None:
        before_fork()

    chunks = [refs[i : i + CHUNK_FILES] for i in range(0, len(refs), CHUNK_FILES)]
    helpers: dict[int, _Worker | None] = {}
    try:
        for w in range(1, workers):
            helpers[w] = _Worker.start(
                chunks[w::workers],
                lambda ref: _row(check(ref), positions),
                [h.pipe.fileno() for h in helpers.values() if h is not None],
            )
        for i, chunk in enumerate(chunks):
            helper = helpers.get(i % workers)
            rows = helper.next_rows(len(chunk)) if helper is not None else None
            if rows is None:
                if helper is not None:
                    helper.stop()
                    helpers[i % workers] = None
                for ref in chunk:
                    yield check(ref)
            else:
                for ref, row in zip(chunk, rows, strict=True):
                    yield _from_row(root, ref, row)
    finally:
        for helper in helpers.values():
            if helper is not None:
                helper.stop()


class _Worker:
    """A forked process checking its share of the chunks, sending rows back through a pipe.
    (A plain class: a dataclass compiles its methods at import, and every scan imports this.)"""

    __slots__ = ("pid", "pipe")

    def __init__(self, pid: int, pipe: BufferedReader) -> None:
        self.pid = pid
        self.pipe = pipe

    @classmethod
    def start(
        cls,
        chunks: list[Sequence[MetaFileRef]],
        check: Callable[[MetaFileRef], _Row],
        inherited: list[int],
    ) -> _Worker | None:
        # Imported here, before the fork, for both processes: a scan too small to fork never
        # needs it (1.6 ms of start-up).
        import pickle

        try:
            read_fd, write_fd = os.pipe()
            pid = os.fork()
        except OSError:
            return None  # no process to spare: this one checks those chunks
        if pid == 0:  # pragma: no cover - runs in the child
            code = 1
            try:
                os.close(read_fd)
                for fd in inherited:  # other workers' pipes: their reader alone holds them
                    os.close(fd)
                with os.fdopen(write_fd, "wb") as out:
                    for chunk in chunks:
                        pickle.dump([check(ref) for ref in chunk], out, pickle.HIGHEST_PROTOCOL)
                        out.flush()
                code = 0
            finally:
                os._exit(code)
        os.close(write_fd)
        return cls(pid, os.fdopen(read_fd, "rb"))

    def next_rows(self, count: int) -> list[_Row] | None:
        """The rows of this worker's next chunk, or None when it failed."""
        import pickle  # loaded by start, which made this worker

        try:
            rows = pickle.load(self.pipe)  # noqa: S301 - our own child's output
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError, OSError):
            return None
        if not isinstance(rows, list) or len(rows) != count:
            return None
        return rows

    def stop(self) -> None:
        """Close the pipe (a worker still writing gets EPIPE and exits) and reap it."""
        if self.pipe.closed:
            return
        self.pipe.close()
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)


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
