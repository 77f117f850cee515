"""The report's I/O edge, behind ``commands/report.py``: the journal in, the text out.

It reads the journal through its own read-only connection (a report never creates, migrates or
locks the database the daemon writes), streams the rows into ``stats.runs.fold``, loads each
root's ``[timeouts]``, and writes the rendered report to stdout or ``-o FILE``.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from postflightd.config import Config, load_config
from postflightd.errors import ConfigError, UsageError
from postflightd.fs.atomic import write_file
from postflightd.fs.directory import StoreError
from postflightd.journal.database import JournalKind, journal_path
from postflightd.project.root import project_marker, why_not_a_directory
from postflightd.stats.figures import Report, Tally, build_report, tally
from postflightd.stats.runs import Runs, fold

# The facts the report needs from a postflighted row's content, extracted by SQLite's JSON
# functions (C, no Python object per document; SQLite caches the parse across the calls of a
# row): parsing 100,000 documents in Python would cost most of the 2 s a 100,000-run report
# may take.
# json_valid first, as json_extract raises on bad JSON; each fact only when of the right type.
_FACT_PATHS = (
    ("$.metadata.agent_type", "= 'text'"),
    ("$.metadata.delegation_path[1]", "= 'text'"),
    ("$.started_at", "= 'text'"),
    ("$.metadata.duration_seconds", "IN ('integer', 'real')"),
)
_FACTS: Final = [
    f"CASE WHEN kind = 'postflighted' AND json_valid(content) "
    f"AND json_type(content, '{path}') {test} THEN json_extract(content, '{path}') END"
    for path, test in _FACT_PATHS
]
_FACTS_SQL: Final = ", ".join(_FACTS)
# Journal version 3 also keeps the agent type on the rows without content, so a run that was
# never applied still has its agent. A version 2 journal is read as it is (a report never
# migrates it) and has no such column.
_FACTS_V3_SQL: Final = ", ".join(
    [f"coalesce(CASE WHEN typeof(agent) = 'text' THEN agent END, {_FACTS[0]})", *_FACTS[1:]]
)
# "[]" (a clean validation, most rows) comes back as NULL: nothing for Python to parse.
# Every column is of the type the report expects whatever another tool wrote there.
_COLUMNS_SQL = (
    "CAST(ts AS TEXT), CAST(kind AS TEXT), CAST(root AS TEXT), CAST(file AS TEXT), "
    "CASE WHEN typeof(task) = 'integer' THEN task END, "
    "CASE WHEN typeof(session) = 'text' THEN session END, "
    "CASE WHEN typeof(status) = 'text' THEN status END, "
    "CASE WHEN kind = 'validated' AND typeof(findings) = 'text' AND findings <> '[]' "
    "THEN findings END"
)
# A progress update repeats what the run's previous row said (validated, in_progress, the
# same findings): the daemon journals every rewrite of the file. One probe of the session
# index per such row drops it in SQLite, before it costs a Python tuple; fold would ignore it.
_REPEAT_SQL = (
    "NOT coalesce(kind = 'validated' AND status = 'in_progress' AND (SELECT "
    "p.kind = 'validated' AND p.status = 'in_progress' AND p.root = o.root "
    "AND p.file = o.file AND p.findings IS o.findings FROM observations AS p "
    "WHERE p.session = o.session AND p.id < o.id{since} ORDER BY p.id DESC LIMIT 1), 0)"
)
# Journal version 5 marks a leftover's rows (PF607): its run has no known duration. An older
# journal, read as it is, has none.
_LEFTOVER_SQL: Final = "CASE WHEN leftover = 1 THEN 1 END"
_KINDS: Final[tuple[JournalKind, ...]] = ("validated", "postflighted", "stuck", "interrupted")


def open_read_only(
    path: Path, *, timeout_s: float = 10.0, check_same_thread: bool = True
) -> sqlite3.Connection:
    """A read-only connection; a clear error when there is no usable journal there."""
    if not path.is_file():
        raise UsageError(
            f"no journal at {path}: nothing has been post-flighted yet (or set [journal] path)"
        )
    try:
        conn = sqlite3.connect(
            f"{path.resolve().as_uri()}?mode=ro",
            uri=True,
            timeout=timeout_s,
            check_same_thread=check_same_thread,
        )
    except sqlite3.Error as exc:
        raise UsageError(f"the journal cannot be opened: {path}: {exc}") from None
    return conn


class _NotUtf8Error(Exception):
    """A text column holds bytes that are not UTF-8 (another tool wrote the journal)."""


def stream_rows(
    conn: sqlite3.Connection,
    roots: Sequence[str],
    since: datetime | None,
    part: tuple[int, int] | None = None,
) -> Iterator[tuple[Any, ...]]:
    """The rows the report reads (``stats.runs.JournalRow`` fields), oldest first, in batches.

    ``part=(i, n)``: only the rows whose task number is i modulo n (a run's rows all share
    its task directory, so each run falls wholly in one part; no task number is part 0).
    """
    # The unary + keeps SQLite off the (kind, ts) and (ts) indexes: with them it looked up
    # ~440,000 rows one by one and then sorted them by id (0.3-0.5 s of CPU at 100,000 runs);
    # a scan in rowid order needs no sort. A --since window starts at the first id in it,
    # found in the (kind, ts) index alone, so a short window still reads only its own rows.
    columns = {str(row[1]) for row in conn.execute("PRAGMA table_info(observations)")}
    facts = _FACTS_V3_SQL if "agent" in columns else _FACTS_SQL
    # The last column, a leftover's outcome time, is history's: the report has no use for it.
    facts += f", {_LEFTOVER_SQL if 'leftover' in columns else 'NULL'}, NULL"
    kinds = ", ".join("?" * len(_KINDS))
    clauses = [f"+kind IN ({kinds})"]
    params: list[object] = list(_KINDS)
    if part is not None:
        clauses.append("(CASE WHEN typeof(task) = 'integer' THEN task ELSE 0 END) % ? = ?")
        params.extend((part[1], part[0]))
    since_text = since.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ") if since else None
    if since_text is not None:
        first = f"SELECT min(id) FROM observations WHERE kind IN ({kinds}) AND ts >= ?"  # noqa: S608 - placeholders only
        clauses.append(f"id >= ({first})")
        params.extend((*_KINDS, since_text))
        clauses.append("+ts >= ?")
        params.append(since_text)
    if roots:
        clauses.append(f"root IN ({', '.join('?' * len(roots))})")
        params.extend(roots)
    if since_text is not None:
        clauses.append(_REPEAT_SQL.replace("{since}", " AND p.ts >= ?"))
        params.append(since_text)
    else:
        clauses.append(_REPEAT_SQL.replace("{since}", ""))
    query = (
        f"SELECT {_COLUMNS_SQL}, {facts} FROM observations AS o "  # noqa: S608 - fixed SQL; values are bound
        f"WHERE {' AND '.join(clauses)} ORDER BY id"
    )
    try:
        cursor = conn.execute(query, params)
        cursor.arraysize = 2000
        while batch := cursor.fetchmany():
            yield from batch
    except sqlite3.OperationalError as exc:
        if "decode" in str(exc).lower():
            raise _NotUtf8Error(str(exc)) from None
        raise UsageError(f"the journal cannot be read: {exc}") from None
    except sqlite3.Error as exc:
        raise UsageError(f"the journal cannot be read: {exc}") from None


#: Below this many rows a second process costs more than it saves.
PARALLEL_MIN_ROWS = 40_000


def fold_journal(
    conn: sqlite3.Connection,
    roots: Sequence[str],
    since: datetime | None,
    part: tuple[int, int] | None = None,
) -> Runs:
    """Every run in scope; text that is not UTF-8 is read with replacement characters."""
    try:
        return fold(stream_rows(conn, roots, since, part))
    except _NotUtf8Error:
        # Rare (only a foreign writer leaves such bytes), so the strict and fast decoder is
        # tried first and the lenient one, a Python call per value, only then.
        conn.text_factory = lambda raw: raw.decode("utf-8", errors="replace")
        return fold(stream_rows(conn, roots, since, part))


def tally_journal(
    path: Path, conn: sqlite3.Connection, roots: Sequence[str], since: datetime | None
) -> Tally:
    """The tally of every run in scope; half of them in a worker process on 2+ CPUs.

    Turning rows into Python objects is what a 100,000-run report spends its time on (of the
    2 s it may take), and it splits cleanly by task number. The worker opens its own read-only
    connection (an SQLite connection must not cross a fork) and sends back its tally (counts
    and durations: small, quick to pickle, unlike the runs); any failure in it falls back to
    tallying its half here.
    """
    try:
        # The id range, not count(*): no scan of the table to decide.
        rows = conn.execute("SELECT max(id) - min(id) FROM observations").fetchone()[0] or 0
    except sqlite3.Error as exc:
        raise UsageError(f"the journal cannot be read: {exc}") from None
    if rows < PARALLEL_MIN_ROWS or (os.cpu_count() or 1) < 2:
        return tally(fold_journal(conn, roots, since))
    from postflightd.concurrency import Worker

    worker = Worker.start(lambda send: send(_tally_part(path, roots, since, (1, 2))))
    if worker is None:
        return tally(fold_journal(conn, roots, since))
    try:
        mine = tally(fold_journal(conn, roots, since, (0, 2)))
    finally:
        theirs = worker.receive()
        worker.stop()
    if not isinstance(theirs, Tally):  # the worker failed: its half is tallied here
        theirs = tally(fold_journal(conn, roots, since, (1, 2)))
    return mine.merge(theirs)


def _tally_part(  # pragma: no cover - runs in the worker
    path: Path, roots: Sequence[str], since: datetime | None, part: tuple[int, int]
) -> Tally:
    conn = open_read_only(path)
    try:
        return tally(fold_journal(conn, roots, since, part))
    finally:
        conn.close()


def _root_arg(raw: str) -> str:
    """A root as the journal names it: absolute and resolved (it need not exist any more)."""
    return str(Path(raw).expanduser().resolve())


def _known_root(raw: str, root: Path, conn: sqlite3.Connection, config_path: str | None) -> None:
    """A ROOT asked for is a project, or one the journal has runs of (a project since moved
    or removed); anything else is a usage error: a mistyped path must not report nothing."""
    if root.is_dir() and project_marker(root, lambda rs: load_config(config_path, rs)):
        return
    # Not indexed by root: a full scan, but only for a ROOT that is no project.
    query = "SELECT 1 FROM observations WHERE root = ? LIMIT 1"
    if conn.execute(query, (str(root),)).fetchone() is not None:
        return
    if not root.is_dir():
        raise UsageError(f"{raw}: {why_not_a_directory(root)}, and the journal has no runs of it")
    raise UsageError(
        f"{raw}: neither a project root (a directory holding the specs directory or "
        ".postflightd.toml) nor a root the journal has runs of"
    )


def make_report(
    roots: Sequence[str], since: datetime | None, config_path: str | None, now: datetime
) -> tuple[Report, list[str]]:
    """The report and notes for stderr (roots whose configuration could not be read)."""
    wanted = [_root_arg(r) for r in roots]
    # The journal's path comes from the user's configuration, as for `history`.
    config = load_config(config_path)
    path = journal_path(config.journal.path)
    conn = open_read_only(path)
    try:
        for raw, root in zip(roots, wanted, strict=True):
            _known_root(raw, Path(root), conn, config_path)
        counted = tally_journal(path, conn, wanted, since)
    finally:
        conn.close()
    notes: list[str] = []
    timeouts: dict[str, dict[str, float]] = {}
    for root in sorted(counted.roots | set(wanted)):
        root_path = Path(root)
        if not root_path.is_dir():
            problem = why_not_a_directory(root_path)
            notes.append(f"{root}: {problem} now; its runs are judged by the default timeouts")
        try:
            root_config = load_config(config_path, [root_path] if root_path.is_dir() else [])
        except ConfigError as exc:
            notes.append(f"{exc}; the default timeouts are used for {root}")
            timeouts[root] = asdict(Config().timeouts)
            continue
        timeouts[root] = asdict(root_config.timeouts)
    report = build_report(counted, timeouts, now=now, since=since)
    if wanted:
        report.roots = wanted
    return report, notes


def write_output(text: str, output: str | None) -> None:
    """stdout, or ``-o FILE`` replaced atomically (a reader never sees half a report)."""
    if output is None or output == "-":
        sys.stdout.write(text)
        return
    target = Path(output).expanduser()
    if target.is_dir():
        raise UsageError(f"-o {output}: is a directory; give a file name")
    try:
        write_file(target, text.encode("utf-8"))
    except OSError as exc:
        raise UsageError(f"-o {output}: cannot write there: {exc.strerror or exc}") from None
    except StoreError as exc:
        raise UsageError(f"-o {output}: cannot write there: {exc}") from None
