"""Each outcome once: what the dashboard's feed (``/api/outcomes``) and ``/metrics`` show of a
journal that daemons started again and retried postflights wrote to (Starlette's TestClient on
the real application, real ``postflightd watch`` processes, a real journal)."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers.daemon_process import DaemonFactory, daemons
from helpers.documents import partial_doc, researched_doc
from helpers.needs import require_extra
from helpers.project import project, write_meta
from helpers.waiting import wait_until

require_extra("web", "the dashboard runs on it")

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402

from postflightd.cli import main  # noqa: E402
from postflightd.commands.serve import build_app  # noqa: E402
from postflightd.journal.database import Journal, default_journal_path  # noqa: E402

pytestmark = pytest.mark.slow


#: Why the postflight stays incomplete while errors.json holds a number.
NUMBER = "errors.json is not usable (a number)"


PARTIAL = "postflightd_outcomes_total{agent=neovim-research-agent,status=partial}"


def invalid_doc(task_dir: str) -> dict[str, Any]:
    doc = researched_doc(task_dir)
    doc["status"] = "completed"
    return doc


@pytest.fixture
def start_daemon(tmp_path: Path) -> Iterator[DaemonFactory]:
    with daemons(tmp_path) as start:
        yield start


def client_for(root: Path) -> TestClient:
    app = build_app(roots=[str(root)], config_path=None, host="127.0.0.1", port=8427, token=None)
    return TestClient(app, base_url="http://127.0.0.1:8427", follow_redirects=False)


def metrics(client: TestClient) -> dict[str, float]:
    """The outcome and finding counters, by their labels."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(client.get("/metrics").text):
        for sample in family.samples:
            if sample.name in ("postflightd_outcomes_total", "postflightd_findings_total"):
                labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
                out[f"{sample.name}{{{labels}}}"] = sample.value
    return out


def feed(client: TestClient) -> list[tuple[Any, ...]]:
    """The outcomes the page opens with, once the poller has read every row journaled."""
    poller = client.app.app.state.poller  # type: ignore[attr-defined]
    with contextlib.closing(sqlite3.connect(default_journal_path())) as conn:
        last = conn.execute("SELECT max(id) FROM observations").fetchone()[0] or 0
    wait_until("the poller to read the journal", lambda: poller.state.journal_id >= last)
    return [
        (o["task"], o["outcome"], o["status"], o.get("cause"))
        for o in client.get("/api/outcomes").json()
    ]


def test_daemons_started_again_announce_and_count_nothing_twice(
    tmp_path: Path, start_daemon: DaemonFactory
) -> None:
    """An invalid file and a postflight kept incomplete (errors.json is neither a list of
    records nor readable as one) are seen by three daemons in turn: the feed and the counters
    hold each once."""
    root = project(tmp_path / "project", 2)
    write_meta(root, "1_task1", invalid_doc("1_task1"))
    write_meta(root, "2_task2", partial_doc("2_task2"))
    (root / "specs" / "errors.json").write_text("42\n", encoding="utf-8")
    with client_for(root) as client:
        first = start_daemon(root)
        first.wait_event("invalid")
        first.wait_event("incomplete")
        assert first.stop() == 0
        wait_until("the feed to show both files", lambda: len(feed(client)) >= 2)
        before_feed, before_metrics = feed(client), metrics(client)
        for _ in range(2):
            again = start_daemon(root)
            # Each start reads every file again (the invalid one, unchanged since the last
            # run, is summed up rather than logged) and retries the incomplete postflight.
            again.wait_event("unchanged_since_last_run")
            again.wait_event("incomplete")
            assert again.stop() == 0
        assert feed(client) == before_feed
        assert metrics(client) == before_metrics
        assert before_feed == [
            (1, "invalid", "completed", None),
            (2, "applied", "partial", None),
            (2, "incomplete", "partial", NUMBER),
        ]
        assert before_metrics[PARTIAL] == 1


def test_a_retried_incomplete_postflight_is_one_entry_until_its_cause_changes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = project(tmp_path / "project", 1)
    write_meta(root, "1_task1", partial_doc("1_task1"))
    errors = root / "specs" / "errors.json"
    errors.write_text("42\n", encoding="utf-8")
    with client_for(root) as client:
        for n in range(3):
            assert main(["scan", "--apply", str(root)]) != 0
            wait_until("the outcome and its cause in the feed", lambda: len(feed(client)) >= 2)
            assert metrics(client)[PARTIAL] == 1, f"after {n + 1} tries"
        assert feed(client) == [
            (1, "applied", "partial", None),
            (1, "incomplete", "partial", NUMBER),
        ]
        # Another cause: errors.json cut short.
        errors.write_text('[{"id": ', encoding="utf-8")
        for _ in range(2):
            assert main(["scan", "--apply", str(root)]) != 0
            wait_until("the new cause in the feed", lambda: len(feed(client)) >= 3)
        shown = feed(client)
        assert len(shown) == 3, shown
        assert shown[2][1] == "incomplete"
        assert shown[2][3] not in (None, NUMBER)
        # Fixed: the retry completes the postflight; the outcome was counted already.
        errors.write_text("[]\n", encoding="utf-8")
        assert main(["scan", "--apply", str(root)]) == 0
        assert not (root / "specs" / "1_task1" / ".return-meta.json").exists()
        assert feed(client) == shown
        assert metrics(client)[PARTIAL] == 1
    capsys.readouterr()


def test_a_row_committed_while_the_feed_reads_is_shown_at_its_next_look(tmp_path: Path) -> None:
    """A postflight journals its outcome, then (errors.json unusable) its incomplete row: when
    that second row was committed between the feed's read of the rows and its read of the last
    id, it was counted as read and never shown. The write is made at that very moment, from
    SQLite's own statement trace."""
    from postflightd.serve import feed as live_feed

    path = tmp_path / "journal.sqlite3"
    writer = Journal.open(path)
    root, file = str(tmp_path), "specs/1_task1/.return-meta.json"
    assert writer.record("postflighted", root=root, file=file, task=1, status="partial")
    reader = live_feed.connect(path)
    assert reader is not None
    committed: list[bool] = []

    def between(statement: str) -> None:
        if "max(id)" in statement and not committed:
            problem = {"code": "PF606", "severity": "error", "location": "", "message": "x"}
            committed.append(
                writer.record(
                    "incomplete", root=root, file=file, task=1, status="partial", findings=[problem]
                )
            )

    try:
        reader.set_trace_callback(between)
        last, events = live_feed.tail(reader, 0, [root])
        reader.set_trace_callback(None)
        assert committed == [True]
        _, more = live_feed.tail(reader, last, [root])
    finally:
        reader.close()
        writer.close()
    assert [e["outcome"] for e in events + more] == ["applied", "incomplete"]
