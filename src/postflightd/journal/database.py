"""The journal: what postflightd observed, in an embedded SQLite database.

It is the record that lets a metadata file be deleted without losing what the agent said:
the "postflighted" row carries the full file content and is durable (fsynced) before the
caller deletes the file. The journal is an aid, not a dependency: when the database cannot
be opened or written, postflight goes on and the journal says why it is off.

Several processes write it at once (the daemon, CLI runs, hooks): WAL mode lets readers and
one writer proceed together, and the busy timeout makes a second writer wait its turn.

The database file itself (schema, migrations, opening in WAL mode) is ``schema``. Why this
module stays whole at about 600 lines: it is one handle: ``Journal`` owns one connection, one
lock and one batch state, shared by its writes (``record``, ``batch``,
``prune``) and its queries (``history``, ``changes``, ``last_postflighted`` ...), and every
method falls back the same way when the journal is off. Splitting the class across modules
would take a mixin reaching into another module's private state; the row types it returns
are defined next to it.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Literal, Self, get_args

from platformdirs import user_state_path

from postflightd.inert import clip
from postflightd.journal.changes import TaskChange
from postflightd.journal.schema import SchemaTooNewError, connect, explain
from postflightd.logs import get_logger

if TYPE_CHECKING:
    from postflightd.journal.rows import Observation, PruneResult, RecordedChange

APP_NAME: Final = "postflightd"
FILE_NAME: Final = "journal.sqlite3"
BUSY_TIMEOUT_S: Final = 10.0
#: What a row records, its ``kind`` column.
JournalKind = Literal[
    "seen",
    "validated",
    "stuck",
    "interrupted",
    "postflighted",
    "deleted",
    # An outcome lost to a writer that ignored the lock, re-applied (``ref``: its
    # postflighted row); and one a deliberate edit replaced, reported once.
    "reapplied",
    "overwritten",
    # A file whose outcome is in state.json but not all written (TODO.md or errors.json could
    # not be): the file is kept and retried; ``findings`` holds why (PF606).
    "incomplete",
]
KINDS: Final[frozenset[str]] = frozenset(get_args(JournalKind))
#: Rows that must survive a power loss once ``record`` returns: the caller deletes the file next.
DURABLE_KINDS: Final = frozenset({"postflighted"})
#: Sightings of a file: a row of one of these kinds that repeats the file's last row of the same
#: kind (the same content, by its identity, and the same findings) is not recorded again.
SIGHTING_KINDS: Final = frozenset({"validated", "stuck", "interrupted", "incomplete"})
#: Rows deleted (or contents dropped) per pruning transaction, and the pause between two.
PRUNE_CHUNK: Final = 500
PRUNE_PAUSE_S: Final = 0.01

_COLUMNS: Final = (
    "id, ts, kind, root, file, task, session, status, findings, content, agent, leftover, "
    # A leftover's outcome is dated when its agent wrote it, not when it was applied: the
    # date its task entry got.
    "CASE WHEN leftover = 1 AND json_valid(entry_after) "
    "THEN json_extract(entry_after, '$.last_updated') END"
)

log = get_logger()


def default_journal_path() -> Path:
    """``<user state dir>/postflightd/journal.sqlite3`` (platformdirs)."""
    return user_state_path(APP_NAME) / FILE_NAME


def journal_path(config_path: str) -> Path:
    """The journal path from the ``[journal] path`` setting; ``""`` means the default."""
    if not config_path.strip():
        return default_journal_path()
    return Path(config_path).expanduser()


@dataclass(slots=True)
class Batch:
    """The outcome of ``Journal.batch``: whether its rows were committed to stable storage."""

    committed: bool = False


def content_text(raw: bytes) -> str:
    """The text a row keeps of a file's bytes: what ``last_postflighted(content=...)`` matches."""
    return raw.decode("utf-8", errors="replace")


def format_ts(ts: datetime) -> str:
    """UTC, ISO 8601 with microseconds and a ``Z``: sorts as text, reads as time."""
    return ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Journal:
    """A handle on the journal database; disabled (never raising) when it cannot be used."""

    def __init__(
        self, conn: sqlite3.Connection | None, path: Path | None, error: str | None
    ) -> None:
        self._conn = conn
        self.path = path
        self.error = error
        # One connection (check_same_thread=False) that threads may share; the lock takes them
        # in turn, a batch holding it from its first row to its commit. The daemon records
        # from each root's worker thread (its pruner thread opens a Journal of its own).
        self._lock = threading.RLock()
        self._batch_depth = 0
        self._batch_failed = False

    @property
    def enabled(self) -> bool:
        return self._conn is not None

    @classmethod
    def disabled(cls, path: Path | None, error: str) -> Journal:
        log.warning("journal disabled; postflight goes on without it", path=str(path), error=error)
        return cls(None, path, error)

    @classmethod
    def open(cls, path: Path | None, *, busy_timeout_s: float = BUSY_TIMEOUT_S) -> Journal:
        """Open (creating if needed) the journal at ``path`` (None: the default); never raises.

        ``busy_timeout_s``: how long a write waits for another process's write to finish.
        """
        try:
            resolved = path if path is not None else default_journal_path()
        except Exception as exc:  # noqa: BLE001 - platformdirs on an odd system: no journal
            return cls.disabled(path, f"no user state directory: {exc}")
        try:
            conn = connect(resolved, busy_timeout_s)
        except SchemaTooNewError as exc:
            return cls.disabled(resolved, str(exc))
        except sqlite3.Error as exc:
            return cls.disabled(resolved, f"{resolved}: {explain(exc)}")
        except OSError as exc:
            return cls.disabled(resolved, f"{resolved}: {exc.strerror or exc}")
        except ValueError as exc:  # a path with a NUL byte, from a configuration file
            return cls.disabled(resolved, f"{resolved!r}: {exc}")
        return cls(conn, resolved, None)

    def record(
        self,
        kind: JournalKind,
        *,
        root: str,
        file: str,
        task: int | None = None,
        session: str | None = None,
        status: str | None = None,
        findings: Sequence[Mapping[str, str]] | None = None,
        content: str | None = None,
        ts: datetime | None = None,
        change: TaskChange | None = None,
        ref: int | None = None,
        agent: str | None = None,
        identity: str | None = None,
        leftover: bool = False,
    ) -> bool:
        """Append one observation; False when the journal is off or the write failed.

        ``change``: what a postflight (or a re-application) did to the task; ``ref``: the
        ``postflighted`` row a ``reapplied``/``overwritten`` row is about; ``agent``: the
        file's ``metadata.agent_type``, when it has one; ``identity``: the file's identity
        when it was read (``identity_text``); ``leftover``: the file is a leftover (PF607),
        whose run has no known duration.

        A sighting (``SIGHTING_KINDS``) with an identity that says what the file's last row of
        that kind said (same content, session, status and findings) is the same observation
        made again: nothing is added, and True is returned (the journal holds it). So a daemon
        started again, a retried postflight or another stop of the hook over an unchanged
        file records nothing new, and what reads the journal (the dashboard's feed,
        ``/metrics``, ``history``, ``report``) sees it once.

        A ``postflighted`` row is on stable storage when this returns True (outside a
        ``batch``; inside one, when the batch ends), so the caller may delete the file.
        """
        if kind not in KINDS:
            raise ValueError(f"unknown journal kind {kind!r}; one of {sorted(KINDS)}")
        # The values a file states are stored bounded: a file rewritten many times (an
        # in-progress run) adds a row each time, and its fields may be any length.
        row = (
            format_ts(ts or datetime.now(UTC)),
            kind,
            root,
            file,
            task,
            _bounded(session),
            _bounded(status),
            (
                json.dumps([_bounded_finding(f) for f in findings], ensure_ascii=False)
                if findings is not None
                else None
            ),
            content,
            *_change_columns(change),
            ref,
            _bounded(agent),
            identity,
            1 if leftover else None,
        )
        with self._lock:
            conn = self._conn
            if conn is None or self._batch_failed:
                return False
            try:
                with self._transaction(conn, durable=kind in DURABLE_KINDS):
                    if identity is None or kind not in SIGHTING_KINDS or not _repeats(conn, row):
                        conn.execute(
                            "INSERT INTO observations (ts, kind, root, file, task, session, "
                            "status, findings, content, entry_before, entry_after, todo_edits, "
                            "ref, agent, identity, leftover) "
                            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                            row,
                        )
            except sqlite3.Error as exc:
                log.warning(
                    "journal write failed",
                    path=str(self.path),
                    error=explain(exc),
                    kind=kind,
                    root=root,
                    file=file,
                    task=task,
                    session=session,
                )
                return False
        return True

    @contextmanager
    def batch(self, *, durable: bool = True) -> Iterator[Batch]:
        """Group the ``record`` calls inside into one durable transaction (one fsync in all).

        Inside the block ``record`` returns True for a row queued; the rows are on stable
        storage only once the block has ended with ``batch.committed`` true, so a caller
        deletes the files it recorded only then. Never raises for a journal problem: a
        failure is logged and leaves ``committed`` false. Batches do not nest.
        ``durable=False`` (rows whose loss on power failure is harmless: "validated",
        "deleted") commits in WAL mode without waiting for the disk.
        """
        result = Batch()
        with self._lock:
            conn = self._conn
            if conn is None:
                yield result
                return
            if self._batch_depth > 0 or self._batch_failed:
                raise RuntimeError("journal batches do not nest")
            try:
                if durable:
                    conn.execute("PRAGMA synchronous = FULL")
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                self._warn("journal write failed", exc)
                self._batch_failed = True
                try:
                    yield result
                finally:
                    self._batch_failed = False
                    self._restore_synchronous(conn)
                return
            self._batch_depth = 1
            try:
                yield result
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                raise
            else:
                try:
                    conn.execute("COMMIT")
                    result.committed = True
                except sqlite3.Error as exc:
                    self._warn("journal write failed", exc)
                    if conn.in_transaction:
                        with contextlib.suppress(sqlite3.Error):
                            conn.execute("ROLLBACK")
            finally:
                self._batch_depth = 0
                self._restore_synchronous(conn)

    def _restore_synchronous(self, conn: sqlite3.Connection) -> None:
        try:
            conn.execute("PRAGMA synchronous = NORMAL")
        except sqlite3.Error as exc:
            self._warn("journal settings could not be restored", exc)

    def _warn(self, event: str, exc: sqlite3.Error) -> None:
        log.warning(event, path=str(self.path), error=explain(exc))

    @contextmanager
    def _transaction(self, conn: sqlite3.Connection, *, durable: bool) -> Iterator[None]:
        if self._batch_depth > 0:
            # Inside a batch: the batch commits, durably, as a whole.
            yield
            return
        # WAL with synchronous=NORMAL does not fsync at commit: a power loss may lose the
        # last transactions. FULL fsyncs the WAL at commit. SQLite refuses to change it inside
        # a transaction, so it is raised before BEGIN for this one transaction only.
        if durable:
            conn.execute("PRAGMA synchronous = FULL")
        try:
            # IMMEDIATE: take the write lock up front, so a busy database waits on the busy
            # timeout here instead of failing later on a lock upgrade.
            conn.execute("BEGIN IMMEDIATE")
            self._batch_depth = 1
            try:
                yield
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            finally:
                self._batch_depth = 0
        finally:
            if durable:
                conn.execute("PRAGMA synchronous = NORMAL")

    def history(
        self,
        *,
        task: int | None = None,
        session: str | None = None,
        limit: int = 200,
        root: str | None = None,
        since: datetime | None = None,
    ) -> list[Observation]:
        """The latest ``limit`` observations matching the filters given, newest last."""
        clauses: list[str] = []
        params: list[object] = []
        if task is not None:
            clauses.append("task = ?")
            params.append(task)
        if session is not None:
            clauses.append("session = ?")
            params.append(session)
        if root is not None:
            clauses.append("root = ?")
            params.append(root)
        if since is not None:
            # format_ts's fixed-width UTC text sorts as time.
            clauses.append("ts >= ?")
            params.append(format_ts(since))
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        query = f"SELECT {_COLUMNS} FROM observations {where} ORDER BY id DESC LIMIT ?"  # noqa: S608 - only fixed clauses are interpolated; values are bound
        with self._lock:
            conn = self._conn
            if conn is None:
                return []
            try:
                rows = conn.execute(query, (*params, max(limit, 0))).fetchall()
            except sqlite3.Error as exc:
                log.warning("journal read failed", path=str(self.path), error=explain(exc))
                return []
        return [_observation(row) for row in reversed(rows)]

    def changes(
        self, *, roots: Sequence[str], since: str, after_id: int = 0
    ) -> list[RecordedChange]:
        """The ``postflighted`` rows of ``roots`` with a recorded change, oldest first.

        ``since``: a ``format_ts`` timestamp (rows at or after it); ``after_id``: only rows
        with a greater id (a caller that keeps what it read asks only for what is new).
        """
        return list(self.iter_changes(roots=roots, since=since, after_id=after_id))

    def iter_changes(
        self, *, roots: Sequence[str], since: str, after_id: int = 0
    ) -> Iterator[RecordedChange]:
        """``changes``, each row decoded when the caller gets to it.

        For a caller that keeps a part of each (the daemon's healer): after a burst of 1,000
        postflights, the whole list of decoded rows was a 36 MB peak that left the daemon's
        heap fragmented (idle RSS); the rows' text is ~3 MB.
        """
        if not roots:
            return
        marks = ", ".join("?" for _ in roots)
        # Asking only for new rows (the daemon, after every state.json write), the id range
        # is the narrow one: "+kind" keeps SQLite off the (kind, ts) index, which would visit
        # every row of the window. Asking for a whole window, that index is the narrow one.
        kind = "+kind" if after_id > 0 else "kind"
        query = (
            "SELECT id, ts, root, file, task, session, status, entry_before, entry_after, "  # noqa: S608 - only fixed terms and placeholders are interpolated; values are bound
            f"todo_edits FROM observations WHERE {kind} = 'postflighted' AND ts >= ? AND id > ? "
            f"AND entry_after IS NOT NULL AND task IS NOT NULL AND root IN ({marks}) ORDER BY id"
        )
        from postflightd.journal.rows import RecordedChange  # its readers' (module docstring)

        rows = self._read(query, (since, after_id, *roots))
        for id_, ts, root, file, task, session, status, before, after, todo in rows:
            try:
                change = TaskChange(
                    json.loads(before) if isinstance(before, str) else None,
                    json.loads(after),
                    json.loads(todo) if isinstance(todo, str) else [],
                )
            except (TypeError, ValueError):
                # A row edited by hand: it cannot be checked, so it is not (and says so).
                log.warning("journal row unreadable", path=str(self.path), id=id_)
                continue
            yield RecordedChange(
                int(id_),
                str(ts),
                str(root),
                str(file),
                int(task),
                session if isinstance(session, str) else None,
                status if isinstance(status, str) else None,
                change,
            )

    def count_kinds(self, *, root: str, kinds: Sequence[JournalKind], since: str) -> dict[str, int]:
        """How many rows of each of ``kinds`` ``root`` has at or after ``since``."""
        counts: dict[str, int] = dict.fromkeys(kinds, 0)
        if not kinds:
            return counts
        marks = ", ".join("?" for _ in kinds)
        query = (
            f"SELECT kind, count(*) FROM observations WHERE kind IN ({marks}) AND ts >= ? "  # noqa: S608 - only placeholders are interpolated; values are bound
            "AND root = ? GROUP BY kind"
        )
        for kind, count in self._read(query, (*kinds, since, root)):
            counts[str(kind)] = int(count)
        return counts

    def refs(self, *, kind: JournalKind, root: str, since: str) -> set[int]:
        """The ``ref`` of every ``kind`` row of ``root`` at or after ``since``."""
        query = (
            "SELECT ref FROM observations WHERE kind = ? AND ts >= ? AND root = ? "
            "AND ref IS NOT NULL"
        )
        return {int(ref) for (ref,) in self._read(query, (kind, since, root))}

    def _read(self, query: str, params: tuple[object, ...]) -> list[tuple[Any, ...]]:
        with self._lock:
            conn = self._conn
            if conn is None:
                return []
            try:
                return conn.execute(query, params).fetchall()
            except sqlite3.Error as exc:
                log.warning("journal read failed", path=str(self.path), error=explain(exc))
                return []

    def last_postflighted(
        self, *, root: str, file: str, task: int | None, content: str | None = None
    ) -> Observation | None:
        """The latest ``postflighted`` row of ``file`` under ``root`` (None: none, or no journal).

        With ``content``, only a row that recorded exactly that content counts.
        """
        rows = self._postflighted(_COLUMNS, root, file, task, content)
        return _observation(rows[0]) if rows else None

    def was_postflighted(self, *, root: str, file: str, task: int | None, content: str) -> bool:
        """Whether a ``postflighted`` row of ``file`` under ``root`` recorded exactly
        ``content`` (False: none, or no journal). The row is not read back: a stop asks this of
        each file it applies or settles, and an ``Observation`` would make the readers' records
        (``journal.rows``) for a yes or a no."""
        return bool(self._postflighted("1", root, file, task, content))

    def _postflighted(
        self, columns: str, root: str, file: str, task: int | None, content: str | None
    ) -> list[tuple[Any, ...]]:
        query = (
            f"SELECT {columns} FROM observations WHERE kind = 'postflighted' "  # noqa: S608 - fixed text; values are bound
            "AND task IS ? AND root = ? AND file = ?"
        )
        params: tuple[object, ...] = (task, root, file)
        if content is not None:
            query += " AND content = ?"
            params = (*params, content)
        try:
            return self._read(query + " ORDER BY id DESC LIMIT 1", params)
        except (UnicodeEncodeError, OverflowError):
            return []  # a value no row can hold was never recorded

    def last_id(self) -> int | None:
        """The id of the newest row (0: none yet; None: no journal): a mark to compare later
        rows with (``seen_before``)."""
        if self._conn is None:
            return None
        rows = self._read("SELECT coalesce(max(id), 0) FROM observations", ())
        return int(rows[0][0]) if rows else None

    def seen_before(
        self, mark: int, *, root: str, file: str, task: int | None, identity: str
    ) -> bool:
        """True when ``file``'s newest ``validated`` row is older than ``mark`` (``last_id``)
        and holds ``identity``: the file was seen then as it is now, with the same findings
        (a sighting that repeats the last one adds no row, ``record``)."""
        try:
            rows = self._read(
                # The task index, newest first ("+kind": not the (kind, ts) index).
                "SELECT id, identity FROM observations WHERE task IS ? AND root = ? "
                "AND file = ? AND +kind = 'validated' ORDER BY id DESC LIMIT 1",
                (task, root, file),
            )
        except (UnicodeEncodeError, OverflowError):
            return False  # a value no row can hold was never recorded
        return bool(rows) and rows[0][0] <= mark and rows[0][1] == identity

    def prune(
        self,
        *,
        keep_days: float,
        max_content_bytes: int,
        now: datetime | None = None,
        chunk: int = PRUNE_CHUNK,
        stop: threading.Event | None = None,
    ) -> PruneResult:
        """Delete rows older than ``keep_days``; drop the oldest file contents past the budget.

        Meant for a background thread with its own ``Journal``: each chunk is one short
        transaction, so a postflight's commit waits at most for one chunk (a few ms) on the
        busy timeout, never for the whole pruning. ``stop`` ends it between chunks.
        A dropped content leaves its ``postflighted`` row (what was applied, when) with
        ``content`` NULL, which ``history`` shows as pruned.
        """
        from postflightd.journal.rows import PruneResult  # its readers' (module docstring)

        result = PruneResult()
        conn = self._conn
        if conn is None:
            return result
        cutoff = format_ts((now or datetime.now(UTC)) - timedelta(days=keep_days))
        try:
            # The one piece of DDL: an index, so that finding old rows is not a table scan.
            with self._lock:
                conn.execute("CREATE INDEX IF NOT EXISTS observations_ts ON observations (ts)")
            while not (stop is not None and stop.is_set()):
                with self._lock, self._transaction(conn, durable=False):
                    n = conn.execute(
                        "DELETE FROM observations WHERE id IN (SELECT id FROM observations "
                        "WHERE ts < ? ORDER BY ts LIMIT ?)",
                        (cutoff, chunk),
                    ).rowcount
                result.rows += n
                if n < chunk:
                    break
                time.sleep(PRUNE_PAUSE_S)
            with self._lock:
                total = conn.execute(
                    "SELECT coalesce(sum(length(content)), 0) FROM observations "
                    "WHERE content IS NOT NULL"
                ).fetchone()[0]
            excess = int(total) - max_content_bytes
            while excess > 0 and not (stop is not None and stop.is_set()):
                with self._lock:
                    rows = conn.execute(
                        "SELECT id, length(content) FROM observations WHERE content IS NOT NULL "
                        "ORDER BY id LIMIT ?",
                        (chunk,),
                    ).fetchall()
                if not rows:
                    break
                ids: list[int] = []
                for row_id, size in rows:
                    ids.append(int(row_id))
                    excess -= int(size or 0)
                    if excess <= 0:
                        break
                marks = ",".join("?" * len(ids))
                with self._lock, self._transaction(conn, durable=False):
                    conn.execute(
                        f"UPDATE observations SET content = NULL WHERE id IN ({marks})",  # noqa: S608 - placeholders only
                        ids,
                    )
                result.contents += len(ids)
                time.sleep(PRUNE_PAUSE_S)
        except sqlite3.Error as exc:
            self._warn("journal pruning failed", exc)
            result.error = explain(exc)
        return result

    def pruned_before(self) -> str | None:
        """The time of the oldest row kept, when older rows were pruned; else None."""
        with self._lock:
            conn = self._conn
            if conn is None:
                return None
            try:
                seq = conn.execute(
                    "SELECT seq FROM sqlite_sequence WHERE name = 'observations'"
                ).fetchone()
                first = conn.execute(
                    "SELECT id, ts FROM observations ORDER BY id LIMIT 1"
                ).fetchone()
            except sqlite3.Error:
                return None
        if seq is None or not seq[0]:
            return None  # nothing was ever written
        if first is None:
            return format_ts(datetime.now(UTC))  # everything was pruned
        # AUTOINCREMENT never reuses an id, and only pruning deletes rows: a gap at the
        # start is what was pruned.
        return str(first[1]) if int(first[0]) > 1 else None

    def release_memory(self) -> None:
        """Free the connection's page cache (an idle daemon's; it refills from the file)."""
        with self._lock:
            if self._conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    self._conn.execute("PRAGMA shrink_memory")

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def identity_text(dev: int, ino: int, size: int, mtime_ns: int) -> str:
    """A file's identity as the ``identity`` column holds it."""
    return f"{dev}:{ino}:{size}:{mtime_ns}"


def _repeats(conn: sqlite3.Connection, row: tuple[Any, ...]) -> bool:
    """True when ``row`` (a sighting about to be inserted) says what its file's last row of the
    same kind said: the same content (identity), session, status and findings."""
    _ts, kind, root, file, task, session, status, findings, *_rest, identity, _leftover = row
    # The task index, newest first: "+kind" keeps SQLite off the (kind, ts) index, which would
    # visit every row of that kind.
    last = conn.execute(
        "SELECT identity IS ? AND session IS ? AND status IS ? AND findings IS ? "
        "FROM observations WHERE task IS ? AND root = ? AND file = ? AND +kind = ? "
        "ORDER BY id DESC LIMIT 1",
        (identity, session, status, findings, task, root, file, kind),
    ).fetchone()
    return last is not None and bool(last[0])


def _bounded(value: str | None) -> str | None:
    return None if value is None else clip(value)


#: A finding's message quotes values already cut short (``inert.clip``); this bounds the rest.
MAX_MESSAGE_CHARS: Final = 2000


def _bounded_finding(finding: Mapping[str, str]) -> dict[str, str]:
    return {
        k: clip(v) if k == "location" else clip(v, MAX_MESSAGE_CHARS) for k, v in finding.items()
    }


def _change_columns(change: TaskChange | None) -> tuple[str | None, str | None, str | None]:
    if change is None:
        return (None, None, None)

    def dump(value: Any) -> str:
        # Exactly the values read from state.json (non-ASCII kept), so a comparison with the
        # entry found later is exact.
        return json.dumps(value, ensure_ascii=False)

    return (dump(change.before), dump(change.after), dump([dict(t) for t in change.todo]))


def _observation(row: tuple[Any, ...]) -> Observation:
    from postflightd.journal.rows import Observation  # its readers' (module docstring)

    (
        id_,
        ts,
        kind,
        root,
        file,
        task,
        session,
        status,
        findings,
        content,
        agent,
        leftover,
        dated,
    ) = row
    return Observation(
        id=int(id_),
        ts=str(ts),
        kind=str(kind),
        root=str(root),
        file=str(file),
        task=task if isinstance(task, int) else None,
        session=session if isinstance(session, str) else None,
        status=status if isinstance(status, str) else None,
        findings=json.loads(findings) if isinstance(findings, str) else None,
        content=content if isinstance(content, str) else None,
        agent=agent if isinstance(agent, str) else None,
        leftover=leftover == 1,
        outcome_ts=dated if isinstance(dated, str) else None,
    )
