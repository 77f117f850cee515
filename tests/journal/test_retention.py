"""Journal retention: old rows and old contents pruned in chunks; ``history`` says so."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from postflightd.cli import main
from postflightd.journal.database import Journal, default_journal_path

SESSION = "sess_1736700000_abc123"
NOW = datetime(2026, 6, 1, tzinfo=UTC)


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[Journal]:
    with Journal.open(tmp_path / "journal.sqlite3") as j:
        assert j.enabled, j.error
        yield j


def test_rows_older_than_keep_days_are_pruned_and_newer_kept(journal: Journal) -> None:
    for days in (200, 120, 91, 89, 10, 0):
        journal.record("seen", root="/r", file=f"{days}d", ts=NOW - timedelta(days=days))
    assert journal.pruned_before() is None, "nothing pruned yet"
    result = journal.prune(keep_days=90, max_content_bytes=10**9, now=NOW, chunk=2)
    assert result.rows == 3
    assert [r.file for r in journal.history()] == ["89d", "10d", "0d"]
    pruned = journal.pruned_before()
    assert pruned is not None and pruned.startswith((NOW - timedelta(days=89)).strftime("%Y-%m-%d"))


def test_contents_beyond_the_budget_are_dropped_oldest_first(journal: Journal) -> None:
    for i in range(10):
        journal.record("postflighted", root="/r", file=f"f{i}", task=i, content="x" * 1000, ts=NOW)
    journal.record("validated", root="/r", file="v", task=99, findings=[], ts=NOW)
    result = journal.prune(keep_days=90, max_content_bytes=3500, now=NOW, chunk=3)
    assert result.rows == 0
    assert result.contents == 7
    rows = [r for r in journal.history() if r.kind == "postflighted"]
    assert [r.content is not None for r in rows] == [False] * 7 + [True] * 3
    assert len(rows) == 10, "the rows stay: what was applied, and when"


def test_prune_of_an_empty_or_disabled_journal_does_nothing(tmp_path: Path) -> None:
    with Journal.open(tmp_path / "empty.sqlite3") as j:
        assert j.prune(keep_days=1, max_content_bytes=0).rows == 0
        assert j.pruned_before() is None
    disabled = Journal.disabled(None, "test")
    assert disabled.prune(keep_days=1, max_content_bytes=0).rows == 0
    assert disabled.pruned_before() is None


def test_everything_pruned_still_says_pruned(journal: Journal) -> None:
    journal.record("seen", root="/r", file="old", ts=NOW - timedelta(days=400))
    journal.prune(keep_days=90, max_content_bytes=10**9, now=NOW)
    assert journal.history() == []
    assert journal.pruned_before() is not None


def test_pruning_never_holds_a_writer_for_long(tmp_path: Path) -> None:
    """Chunked transactions: another connection's commits go through while pruning runs.

    Each of the writer's commits is bracketed by two counts of the rows still to prune. A
    commit with part of the rows deleted before it and part still there after it went through
    in the middle of the pruning; held for the whole deletion, a writer would only ever
    commit before it (all 20,000 left) or after it (none left).
    """
    path = tmp_path / "j.sqlite3"
    total = 20_000
    with Journal.open(path) as filler, filler.batch(durable=False):
        for i in range(total):
            filler.record("seen", root="/r", file=str(i), ts=NOW - timedelta(days=365))
    pruner = Journal.open(path)
    writer = Journal.open(path, busy_timeout_s=30)
    reader = sqlite3.connect(path)
    brackets: list[tuple[int, int]] = []
    done = threading.Event()

    def left() -> int:
        (n,) = reader.execute("SELECT count(*) FROM observations WHERE kind = 'seen'").fetchone()
        return int(n)

    def prune() -> None:
        try:
            pruner.prune(keep_days=90, max_content_bytes=10**9, now=NOW, chunk=500)
        finally:
            done.set()

    thread = threading.Thread(target=prune)
    thread.start()
    try:
        while not done.is_set():
            before = left()
            assert writer.record("postflighted", root="/r", file="new", content="{}")
            brackets.append((before, left()))
            time.sleep(0.005)  # agents finishing, not a tight loop (that would starve SQLite's
            # busy handler of the pruner: it retries, it does not queue)
    finally:
        thread.join(60)
        pruner.close()
        reader.close()
    midway = [(b, a) for b, a in brackets if total > b and a > 0]
    assert len(midway) >= 2, f"no commits in the middle of the pruning: {brackets}"
    assert [r.file for r in writer.history(limit=10_000) if r.kind == "seen"] == []
    writer.close()


def _user_config(text: str) -> None:
    from postflightd.config import user_config_path

    path = user_config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_history_says_when_it_shows_a_pruned_range(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _user_config("[journal]\nkeep_days = 30\n")
    with Journal.open(default_journal_path()) as j:
        old = NOW - timedelta(days=40)
        j.record("postflighted", root="/r", file="old", task=1, content="{}", ts=old)
        j.record("postflighted", root="/r", file="a", task=2, content="x" * 100, ts=NOW)
        j.record("postflighted", root="/r", file="b", task=2, content="x" * 100, ts=NOW)
        j.record("seen", root="/r", file="c", task=3, ts=NOW)
        result = j.prune(keep_days=30, max_content_bytes=150, now=NOW)
        assert (result.rows, result.contents) == (1, 1)
    assert main(["history", "--events"]) == 0
    out = capsys.readouterr().out
    assert "were pruned ([journal] keep_days = 30)" in out
    assert "(content pruned)" in out
    # Fewer rows asked for than exist: the range shown is not the pruned edge.
    assert main(["history", "--events", "--limit", "1"]) == 0
    assert "pruned" not in capsys.readouterr().out
    # The same for runs: all of them shown says so, the latest of them alone does not.
    assert main(["history"]) == 0
    assert "were pruned ([journal] keep_days = 30)" in capsys.readouterr().out
    assert main(["history", "--limit", "1"]) == 0
    assert "pruned" not in capsys.readouterr().out
    assert main(["history", "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert isinstance(json.loads(captured.out), list), "the JSON shape is unchanged"
    assert "were pruned" in captured.err


def test_journal_config_keys_are_checked() -> None:
    from postflightd.config import parse_config
    from postflightd.errors import ConfigError

    config = parse_config({"journal": {"keep_days": 7, "max_content_mb": 0.5}}, "t")
    assert (config.journal.keep_days, config.journal.max_content_mb) == (7, 0.5)
    for bad in ({"keep_days": 0}, {"keep_days": "90"}, {"max_content_mb": -1}, {"keep": 1}):
        with pytest.raises(ConfigError, match="journal"):
            parse_config({"journal": bad}, "t")
