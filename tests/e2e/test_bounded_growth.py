"""A huge value in an in-progress file costs the journal and the log a bounded amount per
rewrite: the real daemon, an agent rewriting its file with an 880 KB agent_type."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from helpers.daemon_process import daemons, in_progress_doc
from helpers.project import project, write_meta
from postflightd.journal.database import default_journal_path

pytestmark = pytest.mark.slow

REWRITES = 10
#: Two values of this length: an 880 KB file, under the 1 MiB default max_file_bytes.
HUGE = 430 * 1024
#: What a rewrite may add to the journal and to the log: a row and a few lines of bounded
#: values (a database page or two), against the megabytes the values themselves hold.
PER_REWRITE_BUDGET = 16 * 1024


def _journal_bytes(path: Path) -> int:
    """The database's size with its write-ahead log folded in."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    finally:
        conn.close()
    return int(pages) * int(size)


def _row_bytes(path: Path) -> int:
    """The bytes the rows themselves hold (page-free), the content column aside."""
    conn = sqlite3.connect(path)
    try:
        row = conn.execute(
            "SELECT coalesce(sum(length(CAST(session AS BLOB)) + length(CAST(status AS BLOB))"
            " + coalesce(length(CAST(findings AS BLOB)), 0)"
            " + coalesce(length(CAST(agent AS BLOB)), 0)), 0) FROM observations"
        ).fetchone()
    finally:
        conn.close()
    return int(row[0])


def test_rewrites_of_a_file_with_an_880_kb_agent_type_grow_journal_and_log_a_little(
    tmp_path: Path,
) -> None:
    root = project(tmp_path / "proj", 1)
    journal = default_journal_path()  # under the test's own XDG_STATE_HOME
    huge = "a" * HUGE

    def doc(i: int) -> dict[str, object]:
        d = in_progress_doc(1, stage=f"stage {i}")
        meta = d["metadata"]
        assert isinstance(meta, dict)
        # PF404 quotes agent_type and the last delegation_path entry: both huge.
        meta["agent_type"] = huge
        meta["delegation_path"] = ["orchestrator", "research", huge + "b"]
        return d

    for logs in ("logs", "logs2"):
        (tmp_path / logs).mkdir()
    with daemons(tmp_path / "logs") as start:
        daemon = start(root)
        write_meta(root, "1_task1", doc(0))
        daemon.wait_event("run_started")
        daemon.stop()
    assert 2 * HUGE < (root / "specs" / "1_task1" / ".return-meta.json").stat().st_size < 1 << 20
    journal_before = _journal_bytes(journal)
    rows_before = _row_bytes(journal)
    log_before = sum(p.stat().st_size for p in (tmp_path / "logs").iterdir())

    with daemons(tmp_path / "logs2") as start:
        daemon = start(root)
        for i in range(1, REWRITES + 1):
            write_meta(root, "1_task1", doc(i))
            daemon.wait_event("run_progress", count=i)
        assert daemon.stop() == 0
        log_after = daemon.log_path.stat().st_size

    journal_growth = _journal_bytes(journal) - journal_before
    row_growth = _row_bytes(journal) - rows_before
    assert row_growth > 0  # the rewrites were journalled
    assert rows_before < PER_REWRITE_BUDGET
    assert row_growth < REWRITES * PER_REWRITE_BUDGET / 4, row_growth
    assert journal_growth < REWRITES * PER_REWRITE_BUDGET, journal_growth
    assert log_before + log_after < (REWRITES + 2) * PER_REWRITE_BUDGET, log_after
