"""The journal (SPEC 5): what postflightd observed, in an embedded SQLite database.

It is the record that lets a metadata file be deleted without losing what the agent said:
the "postflighted" row carries the full file content and is durable (fsynced) before the
caller deletes the file. The journal is an aid, not a dependency: when the database cannot
be opened or written, postflight goes on and the journal says why it is off.

Several processes write it at once (the daemon, CLI runs, hooks): WAL mode lets readers and
one writer proceed together, and the busy timeout makes a second writer wait its turn.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Self

import structlog

APP_NAME: Final = "postflightd"
FILE_NAME: Final = "journal.sqlite3"
SCHEMA_VERSION: Final = 1
BUSY_TIMEOUT_S: Final = 10.0
KINDS: Final = frozenset({"seen", "validated", "stuck", "interrupted", "postflighted", "deleted"})
#: Rows that must survive a power loss once ``record`` returns: the caller deletes the file next.
DURABLE_KINDS: Final = frozenset({"postflighted"})

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS observations (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    ts       TEXT    NOT NULL,
    kind     TEXT    NOT NULL,
    root     TEXT    NOT NULL,
    file     TEXT    NOT NULL,
    task     INTEGER,
    session  TEXT,
    status   TEXT,
    findings TEXT,
    content  TEXT
);
CREATE INDEX IF NOT EXISTS observations_task ON observations (task, id);
CREATE INDEX IF NOT EXISTS observations_session ON observations (session, id);
"""

_COLUMNS: Final = "id, ts, kind, root, file, task, session, status, findings, content"

log = structlog.get_logger()


def default_journal_path() -> Path:
    """``<user state dir>/postflightd/journal.sqlite3`` (platformdirs)."""
    from platformdirs import user_state_path

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


@dataclass(frozen=True, slots=True)
class Observation:
    """One journal row."""

    id: int
    ts: str
    kind: str
    root: str
    file: str
    task: int | None
    session: str | None
    status: str | None
    findings: list[dict[str, str]] | None
    content: str | None


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
        # The daemon records from its worker and supervisor threads over one connection.
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
            conn = _connect(resolved, busy_timeout_s)
        except _SchemaTooNewError as exc:
            return cls.disabled(resolved, str(exc))
        except sqlite3.Error as exc:
            return cls.disabled(resolved, f"{resolved}: {_explain(exc)}")
        except OSError as exc:
            return cls.disabled(resolved, f"{resolved}: {exc.strerror or exc}")
        except ValueError as exc:  # a path with a NUL byte, from a configuration file
            return cls.disabled(resolved, f"{resolved!r}: {exc}")
        return cls(conn, resolved, None)

    def record(
        self,
        kind: str,
        *,
        root: str,
        file: str,
        task: int | None = None,
        session: str | None = None,
        status: str | None = None,
        findings: Sequence[Mapping[str, str]] | None = None,
        content: str | None = None,
        ts: datetime | None = None,
    ) -> bool:
        """Append one observation; False when the journal is off or the write failed.

        A ``postflighted`` row is on stable storage when this returns True (outside a
        ``batch``; inside one, when the batch ends), so the caller may delete the file.
        """
        if kind not in KINDS:
            raise ValueError(f"unknown journal kind {kind!r}; one of {sorted(KINDS)}")
        row = (
            format_ts(ts or datetime.now(UTC)),
            kind,
            root,
            file,
            task,
            session,
            status,
            (
                json.dumps([dict(f) for f in findings], ensure_ascii=False)
                if findings is not None
                else None
            ),
            content,
        )
        with self._lock:
            conn = self._conn
            if conn is None or self._batch_failed:
                return False
            try:
                with self._transaction(durable=kind in DURABLE_KINDS):
                    conn.execute(
                        "INSERT INTO observations (ts, kind, root, file, task, session, status, "
                        "findings, content) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        row,
                    )
            except sqlite3.Error as exc:
                log.warning(
                    "journal write failed",
                    path=str(self.path),
                    error=_explain(exc),
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
        log.warning(event, path=str(self.path), error=_explain(exc))

    @contextmanager
    def _transaction(self, *, durable: bool) -> Iterator[None]:
        conn = self._conn
        assert conn is not None
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
        self, *, task: int | None = None, session: str | None = None, limit: int = 200
    ) -> list[Observation]:
        """The latest ``limit`` observations matching task and session, newest last."""
        clauses: list[str] = []
        params: list[object] = []
        if task is not None:
            clauses.append("task = ?")
            params.append(task)
        if session is not None:
            clauses.append("session = ?")
            params.append(session)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        query = f"SELECT {_COLUMNS} FROM observations {where} ORDER BY id DESC LIMIT ?"  # noqa: S608 - only fixed clauses are interpolated; values are bound
        with self._lock:
            conn = self._conn
            if conn is None:
                return []
            try:
                rows = conn.execute(query, (*params, max(limit, 0))).fetchall()
            except sqlite3.Error as exc:
                log.warning("journal read failed", path=str(self.path), error=_explain(exc))
                return []
        return [_observation(row) for row in reversed(rows)]

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


class _SchemaTooNewError(Exception):
    """The database was written by a newer postflightd: the journal is disabled."""


def _connect(path: Path, busy_timeout_s: float) -> sqlite3.Connection:
    # The journal holds whatever agents wrote: private to the user, like the state directory.
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not path.exists():
        # Created here first so that it is 0o600 (sqlite would use 0o644); the -wal and -shm
        # files copy the database file's mode.
        os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600))
    conn = sqlite3.connect(
        path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
    )
    try:
        # The first statement reads the header: a corrupt file fails here, not on first use.
        mode = _enter_wal(conn, busy_timeout_s)
        if str(mode).lower() != "wal":
            # Some filesystems (network ones) cannot share WAL memory; the journal still works.
            log.warning("journal is not in WAL mode", path=str(path), journal_mode=mode)
        conn.execute("PRAGMA synchronous = NORMAL")
        _migrate(conn, path)
    except BaseException:
        conn.close()
        raise
    return conn


def _enter_wal(conn: sqlite3.Connection, busy_timeout_s: float) -> object:
    """``PRAGMA journal_mode = WAL``, retried while another connection holds the database.

    SQLite answers SQLITE_BUSY at once, without calling the busy handler, when two connections
    switch a fresh database to WAL at the same instant (the switch needs an exclusive lock and
    waiting could deadlock), so the busy timeout alone does not cover it.
    """
    deadline = time.monotonic() + busy_timeout_s
    delay = 0.002
    while True:
        try:
            return conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(delay * (0.5 + random.random()))  # noqa: S311 - timing jitter, not crypto
        delay = min(delay * 2, 0.1)


def _migrate(conn: sqlite3.Connection, path: Path) -> None:
    # IMMEDIATE: two processes creating a fresh journal at once must not both migrate.
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        _check_version(version, path)
        if version < SCHEMA_VERSION:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _check_version(version: int, path: Path) -> None:
    if version > SCHEMA_VERSION:
        raise _SchemaTooNewError(
            f"{path}: journal schema version {version} was written by a newer postflightd "
            f"(this one knows version {SCHEMA_VERSION}); upgrade, or set [journal] path"
        )


def _explain(exc: sqlite3.Error) -> str:
    text = str(exc)
    if "not a database" in text or "malformed" in text:
        return (
            f"{text}: the journal file is corrupt; move it away (postflightd creates a new "
            "one) or set [journal] path"
        )
    if "unable to open" in text:
        return f"{text}: check that the path is a writable file, not a directory"
    if "locked" in text:
        return f"{text}: another process held the journal's write lock past the busy timeout"
    return text


def _observation(row: tuple[Any, ...]) -> Observation:
    (id_, ts, kind, root, file, task, session, status, findings, content) = row
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
    )
