"""``postflightd report``: hostile journal values, malformed journals and arguments, pure parts."""

from __future__ import annotations

import json
import re
import stat
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path

import pytest

from helpers.documents import task_entry
from helpers.project import project, write_artifact, write_meta
from postflightd.cli import main
from postflightd.commands.arguments import parse_interval, parse_since_arg
from postflightd.journal.database import Journal, default_journal_path
from postflightd.stats.figures import advise, build_report, median, nice_ceil, percentile
from postflightd.stats.runs import Facts, JournalRow, duration_of, facts_of, fold

SID = "sess_1736700000_abc123"
HOSTILE_AGENT = "<script>alert(1)</script>\x1b[2J\u202eagent"


def hostile_project(root: Path) -> Path:
    """One applied run whose agent type and unknown field name are markup and escapes."""
    project(root, [task_entry(7, "x", session_id=SID)])
    rel = "specs/7_x/reports/r.md"
    write_artifact(root, rel)
    doc = {
        "status": "researched",
        "artifacts": [{"type": "report", "path": rel, "summary": "s"}],
        "metadata": {
            "session_id": SID,
            "agent_type": HOSTILE_AGENT,
            "duration_seconds": 30,
            "delegation_depth": 1,
            "delegation_path": ["orchestrator", "research", HOSTILE_AGENT],
        },
        '<img src=x onerror="alert(2)">\x07': 1,
    }
    assert main(["process", str(write_meta(root, "7_x", doc))]) == 0
    return root


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_journal_values_are_escaped_in_html(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = hostile_project(tmp_path / "p")
    capsys.readouterr()
    assert main(["report", "--format", "html", str(root)]) == 0
    page = capsys.readouterr().out
    parsed = _Tags()
    parsed.feed(page)
    assert "script" not in parsed.tags
    assert "img" not in parsed.tags
    text = "".join(parsed.text)
    assert "<script>alert(1)</script>\\x1b[2J" in text  # shown as text, escape made visible
    assert '<img src=x onerror="alert(2)">\\x07' in text
    assert "\x1b" not in page
    assert "\x07" not in page


def test_journal_values_are_inert_in_text_and_valid_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = hostile_project(tmp_path / "p")
    capsys.readouterr()
    assert main(["report", str(root)]) == 0
    text = capsys.readouterr().out
    assert "\x1b" not in text
    assert "\x07" not in text
    assert "<script>alert(1)</script>\\x1b[2J" in text
    assert main(["report", "--format", "json", str(root)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["agents"][0]["name"] == HOSTILE_AGENT  # JSON keeps the value, escaped by JSON


def _journal() -> Journal:
    journal = Journal.open(None)
    assert journal.enabled
    return journal


def test_a_journal_with_garbage_rows_still_reports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rows another version or a broken write left: content not JSON, findings not a list."""
    root = str(tmp_path)
    with _journal() as journal:
        journal.record(
            "validated",
            root=root,
            file="a",
            session="s1",
            status="done",
            findings=[{"code": "PF202", "message": "no hint here"}],
        )
        journal.record(
            "postflighted", root=root, file="b", session="s2", status="planned", content="{not json"
        )
        journal.record(
            "postflighted",
            root=root,
            file="c",
            session="s3",
            status="researched",
            content='["a list"]',
        )
        journal.record(
            "postflighted",
            root=root,
            file="d",
            session="s4",
            status="implemented",
            content=json.dumps(
                {
                    "started_at": "yesterday",
                    "metadata": {"agent_type": 5, "duration_seconds": -3, "delegation_path": 7},
                }
            ),
        )
        journal.record("postflighted", root=root, file="e", session=None, status="weird")
        journal.record("stuck", root=root, file="f", task=None)
    conn_path = default_journal_path()
    import sqlite3

    conn = sqlite3.connect(conn_path)
    # A findings column that is not JSON at all, as a foreign tool could leave it.
    conn.execute("UPDATE observations SET findings = '[{\"code\": 5}, 3' WHERE file = 'a'")
    # Bytes that are not UTF-8 where text belongs.
    conn.execute("UPDATE observations SET status = CAST(x'c328' AS TEXT) WHERE file = 'e'")
    conn.commit()
    conn.close()
    assert main(["report", "--format", "json", root]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["runs"] == 6
    assert report["outcomes"]["invalid"] == 2  # "done" never applied; "weird" is no status
    assert report["outcomes"]["stuck"] == 1
    assert report["operations"][-1]["name"] == "unknown"
    assert report["findings"]["near_miss_statuses"] == [
        {"status": "done", "meant": "unclear", "runs": 1}
    ]
    for fmt in ("text", "html"):
        assert main(["report", "--format", fmt, root]) == 0


def test_no_journal_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report"]) == 2
    err = capsys.readouterr().err
    assert "no journal at" in err
    assert "Traceback" not in err
    assert not default_journal_path().exists()  # a report never creates the journal


def test_a_corrupt_journal_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    path = default_journal_path()
    path.parent.mkdir(parents=True)
    path.write_bytes(b"this is not a database" * 100)
    assert main(["report"]) == 2
    err = capsys.readouterr().err
    assert "the journal cannot be read" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("since", ["yesterday", "30x", "-5d", "2026-13-45"])
def test_a_bad_since_is_a_usage_error(since: str, capsys: pytest.CaptureFixture[str]) -> None:
    _journal().close()
    assert main(["report", f"--since={since}"]) == 2
    assert "--since" in capsys.readouterr().err


def test_output_into_a_directory_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _journal().close()
    assert main(["report", "-o", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err
    assert main(["report", "-o", str(tmp_path / "missing" / "r.txt")]) == 2
    assert "cannot write there" in capsys.readouterr().err


def test_output_replaces_a_file_whole_and_refuses_a_link(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """-o FILE is the fs layer's atomic write: an existing file is replaced and keeps its
    permission bits, no temporary file is left; a link at FILE is refused, never followed."""
    _journal().close()
    out = tmp_path / "r.txt"
    out.write_text("old\n", encoding="utf-8")
    out.chmod(0o600)
    assert main(["report", "-o", str(out)]) == 0
    assert out.read_text("utf-8") == ""  # no runs: said on stderr, the file replaced all the same
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.txt"]
    link = tmp_path / "link.txt"
    link.symlink_to(out)
    capsys.readouterr()
    assert main(["report", "-o", str(link)]) == 2
    assert "not a regular file" in capsys.readouterr().err
    assert link.is_symlink()
    assert out.read_text("utf-8") == ""  # the target of the refused link is left as it was


def test_a_root_with_a_bad_config_gets_default_timeouts_and_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = hostile_project(tmp_path / "p")
    (root / ".postflightd.toml").write_text("[timeouts]\nresearch = 'soon'\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["report", "--format", "json", str(root)]) == 0
    captured = capsys.readouterr()
    assert "default timeouts are used" in captured.err
    assert json.loads(captured.out)["timeouts"][0]["timeout_s"] == 3600


def test_report_in_a_subprocess(tmp_path: Path) -> None:
    """The console script as a user runs it: html to a file, text to a pipe."""
    root = hostile_project(tmp_path / "p")
    out = tmp_path / "r.html"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "postflightd",
            "report",
            str(root),
            "--format",
            "html",
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert out.read_text("utf-8").startswith("<!DOCTYPE html>")
    done = subprocess.run(
        [sys.executable, "-m", "postflightd", "report", "--since", "all"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("postflightd report: 1 run, ")


# --- the pure parts ---------------------------------------------------------------------------


def test_median_and_nearest_rank_percentile() -> None:
    assert median([]) is None
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 2.0, 3.0]) == 2.5
    assert percentile([], 95) is None
    assert percentile([float(v) for v in range(1, 101)], 95) == 95.0
    assert percentile([5.0, 1.0], 95) == 5.0
    assert percentile([7.0], 50) == 7.0


@pytest.mark.parametrize(
    ("timeout", "durations", "successes", "verdict", "suggested"),
    [
        (600, [300.0, 500, 700, 900, 1100], [1100.0], "raise", 1680.0),
        (7200, [600.0, 900, 1200, 1500, 1000], [1500.0], "lower", 3000.0),
        (1800, [400.0, 500, 600, 700, 800], [800.0], "ok", None),
        (60, [100.0, 200], [200.0], "too_few_runs", None),
        # More than 3x the longest success, but the p95 (long failures) forbids going lower.
        (3600, [3000.0, 3100, 3200, 3300, 3400], [600.0], "ok", None),
    ],
)
def test_timeout_advice(
    timeout: float,
    durations: list[float],
    successes: list[float],
    verdict: str,
    suggested: float | None,
) -> None:
    advice = advise("/r", "research", timeout, durations, successes)
    assert (advice.verdict, advice.suggested_s) == (verdict, suggested)
    if suggested is not None:
        assert f"[timeouts] research = {int(suggested)}" in advice.advice


def test_nice_ceil_rounds_up_to_values_people_write() -> None:
    assert nice_ceil(61) == 120
    assert nice_ceil(1790) == 1800
    assert nice_ceil(1801) == 2100
    assert nice_ceil(7300) == 8100
    assert nice_ceil(0) == 60


def row(
    ts: str,
    kind: str,
    session: str | None,
    status: str | None,
    findings: str | None = None,
    facts: Facts = (None, None, None, None),
) -> JournalRow:
    return JournalRow(
        ts, kind, "/r", "specs/1_x/.return-meta.json", 1, session, status, findings, *facts
    )


def test_a_session_reused_for_the_next_step_is_a_new_run() -> None:
    research = facts_of(json.dumps({"metadata": {"agent_type": "a-research-agent"}}))
    plan = facts_of(json.dumps({"metadata": {"agent_type": "a-plan-agent"}}))
    folded = fold(
        [
            row("2026-01-01T10:00:00Z", "validated", "s", "in_progress"),
            row("2026-01-01T10:10:00Z", "validated", "s", "researched"),
            row("2026-01-01T10:10:00Z", "postflighted", "s", "researched", facts=research),
            row("2026-01-01T11:00:00Z", "validated", "s", "in_progress"),
            row("2026-01-01T11:30:00Z", "validated", "s", "planned"),
            row("2026-01-01T11:30:01Z", "postflighted", "s", "planned", facts=plan),
        ]
    )
    (_, first), (_, second) = folded.runs
    assert (first.outcome_status, second.outcome_status) == ("researched", "planned")
    # No started_at in the final files: the first in_progress sighting is the start.
    assert (duration_of(first), duration_of(second)) == (600.0, 1800.0)
    report = build_report(folded, {"/r": {"default": 3600.0}}, now=datetime.now(UTC), since=None)
    assert [g.name for g in report.operations] == ["research", "planning"]


def test_duration_falls_back_to_duration_seconds() -> None:
    facts = facts_of(json.dumps({"metadata": {"duration_seconds": 42}}))
    folded = fold([row("2026-01-01T10:10:00Z", "postflighted", "s", "failed", facts=facts)])
    ((_, run),) = folded.runs
    assert duration_of(run) == 42.0


def test_days_without_runs_are_zero_bars() -> None:
    folded = fold(
        [
            row("2026-01-01T10:00:00Z", "validated", "a", "done"),
            row("2026-01-04T10:00:00Z", "validated", "b", "done"),
        ]
    )
    report = build_report(folded, {}, now=datetime.now(UTC), since=None)
    assert [(d, n) for d, n, _ in report.days] == [
        ("2026-01-01", 1),
        ("2026-01-02", 0),
        ("2026-01-03", 0),
        ("2026-01-04", 1),
    ]


def test_parse_since_and_interval() -> None:
    now = datetime(2026, 3, 1, tzinfo=UTC)
    assert parse_since_arg("30d", now) == now - timedelta(days=30)
    assert parse_since_arg("90m", now) == now - timedelta(minutes=90)
    assert parse_since_arg("all", now) is None
    assert parse_since_arg("2026-02-01T00:00:00+00:00", now) == datetime(2026, 2, 1, tzinfo=UTC)
    with pytest.raises(Exception, match="--since"):
        parse_since_arg("soon", now)
    assert parse_interval("1s") == 1.0
    assert parse_interval("500ms") == 0.5
    assert parse_interval("2") == 2.0
    for bad in ("0", "fast", "-1s", "nan", "10ms"):
        with pytest.raises(Exception, match="--interval"):
            parse_interval(bad)


def test_status_watch_rejects_a_bad_interval(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project(tmp_path, [])
    assert main(["status", "--watch", "--interval", "soon", str(tmp_path)]) == 2
    assert "--interval" in capsys.readouterr().err


def test_html_is_well_formed_with_no_runs(capsys: pytest.CaptureFixture[str]) -> None:
    _journal().close()
    assert main(["report", "--format", "html"]) == 0
    captured = capsys.readouterr()
    assert "No runs." in captured.out
    assert re.search(r"</html>\s*$", captured.out)


def test_repeated_progress_rows_keep_the_first_sighting_and_new_findings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The SQL that drops repeated progress rows keeps what the figures need."""
    root = str(tmp_path)
    t0 = datetime(2026, 1, 5, 10, 0, tzinfo=UTC)
    common: dict[str, object] = {"root": root, "file": "specs/1_x/.return-meta.json", "task": 1}
    warn = [{"code": "PF302", "severity": "warning", "location": "", "message": "no progress"}]
    content = json.dumps({"metadata": {"agent_type": "a-research-agent"}})
    with _journal() as journal:
        for minute, findings in ((0, []), (5, []), (10, warn), (15, warn), (20, [])):
            journal.record(
                "validated",
                session=SID,
                status="in_progress",
                findings=findings,
                ts=t0 + timedelta(minutes=minute),
                **common,
            )
        journal.record(
            "validated",
            session=SID,
            status="researched",
            findings=[],
            ts=t0 + timedelta(minutes=30),
            **common,
        )
        journal.record(
            "postflighted",
            session=SID,
            status="researched",
            content=content,
            ts=t0 + timedelta(minutes=30),
            **common,
        )
    assert main(["report", "--format", "json", "--since", "all", root]) == 0
    report = json.loads(capsys.readouterr().out)
    (research,) = report["operations"]
    assert research["median_s"] == 1800.0  # from the first in_progress sighting
    assert report["findings"]["codes"][0]["code"] == "PF302"
    assert main(["report", "--format", "json", "--since", "2026-01-05T10:04:00+00:00", root]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["operations"][0]["median_s"] == 1500.0  # the first sighting in the period


def test_since_filters_by_time_when_ids_are_not_in_time_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The --since window starts at the first row in it, whatever order the rows were written
    in (an imported or back-dated journal): a later id with an older time stays out."""
    root = str(tmp_path)
    with _journal() as journal:
        for day, task in ((10, 1), (1, 2), (12, 3), (2, 4)):
            common: dict[str, object] = {
                "root": root,
                "file": f"specs/{task}_x/.return-meta.json",
                "task": task,
                "session": f"sess_1736700000_{task:06d}",
            }
            ts = datetime(2026, 1, day, 10, 0, tzinfo=UTC)
            journal.record("validated", status="in_progress", findings=[], ts=ts, **common)
            journal.record("validated", status="failed", findings=[], ts=ts, **common)
            journal.record("postflighted", status="failed", content="{}", ts=ts, **common)
    counts: dict[str, int] = {}
    for since in ("all", "2026-01-05T00:00:00+00:00", "2026-01-11T00:00:00+00:00", "2026-02-01"):
        assert main(["report", "--format", "json", "--since", since, root]) == 0
        counts[since] = json.loads(capsys.readouterr().out)["runs"]
    assert counts == {
        "all": 4,
        "2026-01-05T00:00:00+00:00": 2,
        "2026-01-11T00:00:00+00:00": 1,
        "2026-02-01": 0,
    }


def test_how_stuck_runs_ended() -> None:
    """Finished late, replaced by another session, or not yet: each said as it happened."""
    impl = facts_of(json.dumps({"metadata": {"agent_type": "x-implementation-agent"}}))

    def on(file: str, *rows: JournalRow) -> list[JournalRow]:
        return [r._replace(file=file) for r in rows]

    rows = [
        *on("a", row("2026-01-01T10:00:00Z", "validated", "s1", "in_progress")),
        *on("b", row("2026-01-01T10:00:01Z", "validated", "s2", "in_progress")),
        *on("c", row("2026-01-01T10:00:02Z", "validated", "s3", "in_progress")),
        *on("a", row("2026-01-01T13:00:00Z", "stuck", "s1", "in_progress")),
        *on("b", row("2026-01-01T13:00:01Z", "stuck", "s2", "in_progress")),
        *on("c", row("2026-01-01T13:00:02Z", "stuck", "s3", "in_progress")),
        *on(
            "a",
            row("2026-01-01T14:00:00Z", "validated", "s1", "implemented"),
            row("2026-01-01T14:00:00Z", "postflighted", "s1", "implemented", facts=impl),
        ),
        *on("b", row("2026-01-01T15:00:00Z", "validated", "s9", "in_progress")),
    ]
    report = build_report(fold(rows), {}, now=datetime.now(UTC), since=None)
    ended = {i.file: i.ended for i in report.incidents}
    assert ended == {
        "a": "finished late: implemented",
        "b": "replaced by session s9 (running)",
        "c": "not yet: still in_progress (file kept)",
    }
    assert report.outcomes["implemented"] == 1
    assert report.outcomes["stuck"] == 2
    agents = {i.file: i.agent for i in report.incidents}
    assert agents["a"] == "x-implementation-agent"  # the session was applied in the end
