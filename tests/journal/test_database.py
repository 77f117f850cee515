"""journal: the SQLite record of observations; an aid that never breaks postflight."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from postflightd.journal.database import (
    Journal,
    default_journal_path,
    journal_path,
)
from postflightd.journal.schema import SCHEMA_VERSION

SESSION = "sess_1736700000_abc123"
OTHER = "sess_1736700001_def456"


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[Journal]:
    with Journal.open(tmp_path / "journal.sqlite3") as j:
        assert j.enabled, j.error
        yield j


def query(path: Path, sql: str) -> list[tuple[object, ...]]:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return conn.execute(sql).fetchall()


def test_round_trip(journal: Journal) -> None:
    """Every field recorded comes back, in order, findings as a list of dicts."""
    findings = [{"code": "PF303", "severity": "error", "location": "completion_data"}]
    ts = datetime(2026, 1, 8, 14, 30, 0, 123456, tzinfo=UTC)
    assert journal.record("seen", root="/r", file="specs/259_x/.return-meta.json", task=259)
    assert journal.record(
        "validated",
        root="/r",
        file="specs/259_x/.return-meta.json",
        task=259,
        session=SESSION,
        status="implemented",
        findings=findings,
        ts=ts,
    )
    content = '{"status": "implemented", "note": "ünïcode"}\n'
    assert journal.record(
        "postflighted", root="/r", file="f", task=259, session=SESSION, content=content
    )
    rows = journal.history()
    assert [r.kind for r in rows] == ["seen", "validated", "postflighted"]
    seen, validated, done = rows
    assert seen.task == 259
    assert seen.session is None
    assert seen.findings is None
    assert journal.record("validated", root="/r", file="clean", findings=[])
    assert journal.history()[-1].findings == []
    assert validated.ts == "2026-01-08T14:30:00.123456Z"
    assert validated.status == "implemented"
    assert validated.findings == findings
    assert validated.root == "/r"
    assert validated.file == "specs/259_x/.return-meta.json"
    assert done.content == content
    assert seen.id < validated.id < done.id


def test_timestamps_are_utc(journal: Journal) -> None:
    """A timestamp in another zone is stored as UTC with a Z."""
    from datetime import timedelta, timezone

    ts = datetime(2026, 1, 8, 16, 30, tzinfo=timezone(timedelta(hours=2)))
    journal.record("seen", root="/r", file="f", ts=ts)
    assert journal.history()[0].ts == "2026-01-08T14:30:00.000000Z"


def test_database_is_wal_versioned_and_indexed(journal: Journal) -> None:
    """WAL mode, user_version set, indexes on task and session, file private to the user."""
    assert journal.path is not None
    assert query(journal.path, "PRAGMA journal_mode") == [("wal",)]
    assert query(journal.path, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
    indexes = {
        row[0] for row in query(journal.path, "SELECT name FROM sqlite_master WHERE type='index'")
    }
    assert {"observations_task", "observations_session"} <= indexes
    assert stat.S_IMODE(journal.path.stat().st_mode) == 0o600


def test_history_filters_by_task_and_session(journal: Journal) -> None:
    """history(task=, session=) returns only matching rows; both filters combine."""
    journal.record("seen", root="/r", file="a", task=1, session=SESSION)
    journal.record("seen", root="/r", file="b", task=2, session=SESSION)
    journal.record("seen", root="/r", file="c", task=1, session=OTHER)
    journal.record("deleted", root="/r", file="a", task=1, session=SESSION)
    assert [r.file for r in journal.history(task=1)] == ["a", "c", "a"]
    assert [r.file for r in journal.history(session=SESSION)] == ["a", "b", "a"]
    assert [r.kind for r in journal.history(task=1, session=SESSION)] == ["seen", "deleted"]
    assert journal.history(task=3) == []


def test_history_limit_keeps_the_newest_last(journal: Journal) -> None:
    """With a limit, the newest rows are returned, oldest of them first."""
    for i in range(10):
        journal.record("seen", root="/r", file=str(i))
    assert [r.file for r in journal.history(limit=3)] == ["7", "8", "9"]


def test_rows_persist_across_open(tmp_path: Path) -> None:
    """A second open sees what the first recorded (and does not re-run the migration)."""
    path = tmp_path / "j.sqlite3"
    with Journal.open(path) as first:
        first.record("postflighted", root="/r", file="f", content="{}")
    with Journal.open(path) as second:
        assert second.enabled
        assert [r.content for r in second.history()] == ["{}"]


def test_unknown_kind_is_a_programming_error(journal: Journal) -> None:
    """A kind outside the documented set is rejected loudly."""
    with pytest.raises(ValueError, match="unknown journal kind"):
        journal.record("exploded", root="/r", file="f")


def test_batch_commits_together_and_rolls_back_together(journal: Journal) -> None:
    """Records in a batch land together; an exception in the batch discards them all."""
    with journal.batch() as batch:
        for i in range(5):
            assert journal.record("postflighted", root="/r", file=str(i), content="{}")
        assert not batch.committed
    assert batch.committed
    assert len(journal.history()) == 5
    with pytest.raises(RuntimeError), journal.batch() as failed:
        journal.record("seen", root="/r", file="lost")
        raise RuntimeError("boom")
    assert not failed.committed
    assert len(journal.history()) == 5
    assert journal.record("seen", root="/r", file="after")
    assert journal.history()[-1].file == "after"


def test_a_non_durable_batch_commits_its_rows(journal: Journal) -> None:
    """durable=False: the rows land in one commit, in the WAL journal."""
    with journal.batch(durable=False) as batch:
        for i in range(3):
            journal.record("validated", root="/r", file=str(i), findings=[])
    assert batch.committed
    assert [o.file for o in journal.history()] == ["0", "1", "2"]
    assert journal.path is not None
    con = sqlite3.connect(journal.path)
    try:
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        con.close()


def test_batches_do_not_nest(journal: Journal) -> None:
    """A nested batch is a programming error, and the outer batch still commits."""
    with journal.batch() as outer:
        journal.record("seen", root="/r", file="kept")
        with pytest.raises(RuntimeError, match="do not nest"), journal.batch():
            pass
    assert outer.committed
    assert [r.file for r in journal.history()] == ["kept"]


def test_batch_on_a_busy_journal_fails_softly(tmp_path: Path) -> None:
    """Another process holding the write lock past the busy timeout: no exception, no commit."""
    path = tmp_path / "journal.sqlite3"
    with (
        Journal.open(path, busy_timeout_s=0.05) as j,
        contextlib.closing(sqlite3.connect(path)) as other,
    ):
        other.execute("BEGIN IMMEDIATE")
        with capture_logs() as logs, j.batch() as batch:
            assert not j.record("seen", root="/r", file="f")
        other.execute("ROLLBACK")
        assert not batch.committed
        assert any("locked" in str(e.get("error")) for e in logs)
        assert j.record("seen", root="/r", file="after")
        assert [r.file for r in j.history()] == ["after"]


def test_record_on_a_busy_journal_returns_false(tmp_path: Path) -> None:
    """A write that cannot get the lock in time returns False and logs; the next one works."""
    path = tmp_path / "journal.sqlite3"
    with (
        Journal.open(path, busy_timeout_s=0.05) as j,
        contextlib.closing(sqlite3.connect(path)) as other,
    ):
        other.execute("BEGIN IMMEDIATE")
        with capture_logs() as logs:
            assert not j.record("postflighted", root="/r", file="f", content="{}")
        other.execute("ROLLBACK")
        assert any(e["event"] == "journal write failed" for e in logs)
        assert j.record("postflighted", root="/r", file="f", content="{}")


# --- paths ------------------------------------------------------------------------------------


def test_default_path_is_in_the_user_state_dir() -> None:
    """The default lives in XDG_STATE_HOME/postflightd (pointed at a temp dir by conftest)."""
    expected = Path(os.environ["XDG_STATE_HOME"]) / "postflightd" / "journal.sqlite3"
    assert default_journal_path() == expected
    assert journal_path("") == expected
    with Journal.open(None) as j:
        assert j.enabled, j.error
        assert j.path == expected
    assert expected.is_file()


def test_configured_path_expands_home(tmp_path: Path) -> None:
    """[journal] path = "~/x.sqlite3" is under the home directory."""
    assert journal_path("~/x.sqlite3") == Path(os.environ["HOME"]) / "x.sqlite3"
    assert journal_path(str(tmp_path / "j")) == tmp_path / "j"


# --- a journal that cannot be used ------------------------------------------------------------


def assert_disabled(j: Journal, *fragments: str) -> None:
    assert not j.enabled
    assert j.error is not None
    for fragment in fragments:
        assert fragment in j.error
    assert j.record("seen", root="/r", file="f") is False
    assert j.history() == []


def test_path_under_a_regular_file_disables_the_journal(tmp_path: Path) -> None:
    """A parent that is a file: disabled with a reason and a warning, never an exception."""
    blocker = tmp_path / "state"
    blocker.write_text("a file")
    path = blocker / "journal.sqlite3"
    with capture_logs() as logs, Journal.open(path) as j:
        assert_disabled(j, str(path))
    assert any(e["event"].startswith("journal disabled") for e in logs)
    assert any(e["log_level"] == "warning" and e.get("path") == str(path) for e in logs)


def test_directory_in_place_of_the_database_disables_the_journal(tmp_path: Path) -> None:
    """A directory where the database should be: disabled, saying what to check."""
    path = tmp_path / "journal.sqlite3"
    path.mkdir()
    with Journal.open(path) as j:
        assert_disabled(j, str(path), "not a directory")


def test_corrupt_database_disables_the_journal(tmp_path: Path) -> None:
    """Random bytes in the database file: disabled with a clear error, the file untouched."""
    path = tmp_path / "journal.sqlite3"
    garbage = b"garbage!" + os.urandom(8192)
    path.write_bytes(garbage)
    with Journal.open(path) as j:
        assert_disabled(j, "corrupt", "move it away")
    assert path.read_bytes() == garbage


def test_newer_schema_disables_the_journal(tmp_path: Path) -> None:
    """A journal written by a newer postflightd is left alone."""
    path = tmp_path / "journal.sqlite3"
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with Journal.open(path) as j:
        assert_disabled(j, "newer postflightd")


# --- concurrency ------------------------------------------------------------------------------

WRITER = """
import sys
from pathlib import Path
from postflightd.journal.database import Journal
path, name, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
with Journal.open(path) as j:
    assert j.enabled, j.error
    for i in range(count):
        kind = "postflighted" if i % 10 == 0 else "seen"
        assert j.record(kind, root="/r", file=f"{name}-{i}", session=name, content="{}")
"""


def test_two_processes_writing_at_once_lose_no_rows(tmp_path: Path) -> None:
    """Two processes recording concurrently into a fresh journal: every row is there."""
    path = tmp_path / "journal.sqlite3"
    count = 300
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(WRITER), str(path), name, str(count)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    with Journal.open(path) as j:
        for name in ("a", "b"):
            files = [r.file for r in j.history(session=name, limit=10_000)]
            assert files == [f"{name}-{i}" for i in range(count)]


def test_threads_share_one_journal(journal: Journal) -> None:
    """Threads may record through one Journal at once: its lock takes them in turn. (The
    daemon records from its one loop thread; its pruner thread opens its own Journal.)"""

    def work(n: int) -> None:
        for i in range(50):
            assert journal.record("seen", root="/r", file=f"{n}-{i}", task=n)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(journal.history(limit=1000)) == 200


def test_unusable_path_string_disables_the_journal(tmp_path: Path) -> None:
    """A configured path with a NUL byte is a reason, not a traceback."""
    with Journal.open(tmp_path / "bad\0name") as j:
        assert_disabled(j, "null")


def test_a_sighting_repeated_with_the_same_content_and_findings_is_recorded_once(
    journal: Journal,
) -> None:
    """What a daemon started again, a retried postflight or another stop of the hook see of an
    unchanged file is one row; new content, new findings or another kind is a new row."""
    file = "specs/259_x/.return-meta.json"
    bad = [{"code": "PF203", "severity": "error", "location": "status", "message": "m"}]
    fixed = [{"code": "PF600", "severity": "error", "location": "", "message": "n"}]

    def sighting(kind: str, identity: str, findings: list[dict[str, str]] | None) -> bool:
        return journal.record(
            kind,  # type: ignore[arg-type]
            root="/r",
            file=file,
            task=259,
            session=SESSION,
            status="completed",
            findings=findings,
            identity=identity,
        )

    for _ in range(3):
        assert sighting("validated", "1:2:30:40", bad)
    assert sighting("validated", "1:2:30:40", fixed)  # the project changed: new findings
    assert sighting("validated", "1:2:30:40", bad)  # and back
    assert sighting("validated", "1:3:31:41", bad)  # rewritten
    for _ in range(2):
        assert sighting("incomplete", "1:3:31:41", fixed)
    rows = query(journal.path, "SELECT kind, identity, findings FROM observations ORDER BY id")
    assert [(kind, identity) for kind, identity, _ in rows] == [
        ("validated", "1:2:30:40"),
        ("validated", "1:2:30:40"),
        ("validated", "1:2:30:40"),
        ("validated", "1:3:31:41"),
        ("incomplete", "1:3:31:41"),
    ]
    # Rows without an identity (written by an older postflightd, or not read from a file) and
    # outcomes are always recorded.
    for _ in range(2):
        assert journal.record("validated", root="/r", file=file, task=259, findings=bad)
        assert journal.record("postflighted", root="/r", file=file, task=259, identity="1:3:31:41")
    assert len(query(journal.path, "SELECT id FROM observations")) == 9


def test_a_version_4_journal_is_migrated_and_its_rows_are_no_leftovers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """tests/fixtures/journal/v4.sqlite3 was written by the version 4 code: a research run
    validated and applied. Migrated, its rows are kept, none is a leftover (NULL), a new row
    can be one, and ``report`` reads both."""
    import shutil

    from postflightd.cli import main

    path = tmp_path / "journal.sqlite3"
    shutil.copyfile(Path(__file__).parents[1] / "fixtures" / "journal" / "v4.sqlite3", path)
    assert query(path, "PRAGMA user_version") == [(4,)]
    with Journal.open(path) as j:
        assert j.enabled, j.error
        old = j.history()
        assert [(r.kind, r.leftover) for r in old] == [
            ("validated", False),
            ("postflighted", False),
        ]
        assert j.record(
            "postflighted",
            root="/proj",
            file="specs/260_y/.return-meta.json",
            task=260,
            session=OTHER,
            status="planned",
            leftover=True,
        )
        assert j.history()[-1].leftover
    assert query(path, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
    assert query(path, "SELECT task, leftover FROM observations ORDER BY id") == [
        (259, None),
        (259, None),
        (260, 1),
    ]
    # Opening it again migrates nothing twice; a report reads the migrated journal.
    with Journal.open(path) as j:
        assert len(j.history()) == 3
    (tmp_path / "config.toml").write_text(f'[journal]\npath = "{path}"\n', encoding="utf-8")
    code = main(["report", "--since", "all", "--config", str(tmp_path / "config.toml")])
    assert code == 0, capsys.readouterr()
