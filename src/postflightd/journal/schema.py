"""The journal's database file: its schema, the migrations between versions, and opening it.

A connection is opened here for ``journal.Journal`` (which records and queries rows): the file
is created private to the user, switched to WAL, and migrated step by step to
``SCHEMA_VERSION`` inside one immediate transaction. A database written by a newer postflightd
is refused, never downgraded.
"""

from __future__ import annotations

import os
import random
import sqlite3
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from postflightd.logs import get_logger

SCHEMA_VERSION: Final = 5

_SCHEMA_V1: Final = """
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

#: Version 2: what each postflight changed, so that an outcome a writer that ignored the lock
#: reverted can be told exactly from a deliberate edit (``verify``, the daemon's healer).
#: ``entry_before``/``entry_after``: the task's state.json entry as JSON; ``todo_edits``: the
#: TODO.md edits made for it (a JSON array); ``ref``: the row a reapplied/overwritten row is
#: about. Adding nullable columns leaves every version 1 row as it was.
_SCHEMA_V2: Final = """
ALTER TABLE observations ADD COLUMN entry_before TEXT;
ALTER TABLE observations ADD COLUMN entry_after TEXT;
ALTER TABLE observations ADD COLUMN todo_edits TEXT;
ALTER TABLE observations ADD COLUMN ref INTEGER;
CREATE INDEX IF NOT EXISTS observations_kind_ts ON observations (kind, ts);
"""

#: Version 3: ``agent``, the file's ``metadata.agent_type`` on every row that read one, so that
#: ``report`` can name the agent of a run that was never applied (invalid, stuck, interrupted):
#: only ``postflighted`` rows carry the content it is otherwise read from.
_SCHEMA_V3: Final = """
ALTER TABLE observations ADD COLUMN agent TEXT;
"""

#: Version 4: ``identity``, the file's identity when it was read (device, inode, size and
#: modification time, as ``fs.directory.FileIdentity``: what the project counts as the same
#: content), so that seeing the same content again with the same findings (a daemon started
#: again, a retried postflight, another stop of the hook) adds no row (``Journal.record``).
_SCHEMA_V4: Final = """
ALTER TABLE observations ADD COLUMN identity TEXT;
"""

#: Version 5: ``leftover``, 1 on the rows of a final file first seen longer after it was written
#: than its operation's timeout (PF607): when its run ended is not known, so ``report`` and
#: the dashboard leave the run out of their durations. NULL (every earlier row) is not one.
_SCHEMA_V5: Final = """
ALTER TABLE observations ADD COLUMN leftover INTEGER;
"""

#: version -> the statements that take a journal from the version before to it.
_MIGRATIONS: Final[Mapping[int, str]] = {
    1: _SCHEMA_V1,
    2: _SCHEMA_V2,
    3: _SCHEMA_V3,
    4: _SCHEMA_V4,
    5: _SCHEMA_V5,
}

log = get_logger()


class SchemaTooNewError(Exception):
    """The database was written by a newer postflightd: the journal is disabled."""


def _make_directories(directory: Path) -> None:
    """``mkdir -p``, each new directory's name made durable (its parent fsynced).

    SQLite fsyncs the journal's directory when it creates the ``-wal`` file, never the
    directories above it: on a power loss after the first postflight, a state directory
    created without that fsync could vanish with the journal in it, while state.json shows
    the outcome and its metadata file is gone (docs/safety.md, "Power loss").
    """
    missing: list[Path] = []
    while not directory.exists():
        missing.append(directory)
        directory = directory.parent
    for n, new in enumerate(reversed(missing), start=1):
        try:
            # The last one private to the user; those above it as mkdir -p makes them.
            new.mkdir(mode=0o700 if n == len(missing) else 0o777)
        except FileExistsError:
            continue
        _sync_directory(new.parent)


def _sync_directory(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # a filesystem that cannot fsync a directory (some network ones) orders names
    finally:
        os.close(fd)


def connect(path: Path, busy_timeout_s: float) -> sqlite3.Connection:
    """A connection to the journal at ``path``, created and migrated as needed; raises."""
    # The journal holds whatever agents wrote: private to the user, like the state directory.
    _make_directories(path.parent)
    if not path.exists():
        # Created here first so that it is 0o600 (sqlite would use 0o644); the -wal and -shm
        # files copy the database file's mode.
        os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600))
        _sync_directory(path.parent)
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
            # Step by step: a version 1 journal gets only the version 2 statements.
            for step in range(version + 1, SCHEMA_VERSION + 1):
                for statement in _MIGRATIONS[step].split(";"):
                    if statement.strip():
                        conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _check_version(version: int, path: Path) -> None:
    if version > SCHEMA_VERSION:
        raise SchemaTooNewError(
            f"{path}: journal schema version {version} was written by a newer postflightd "
            f"(this one knows version {SCHEMA_VERSION}); upgrade, or set [journal] path"
        )


def explain(exc: sqlite3.Error) -> str:
    """``exc`` as a message that says what the user can do about it."""
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
