"""``postflightd report``: figures checked one by one against a journal of real postflights.

The journal is built once for the module the way users build theirs: metadata files written
with chosen ``started_at`` values, then ``process`` (in-process ``main``), one file that never
gets valid, one that is fixed in the same session, an interrupted run, and a stuck run flagged
by a real ``watch`` daemon. Durations are then known to within the few seconds processing
takes, and every figure of the report has an expected value.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import sqlite3
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from helpers.daemon_process import terminate
from helpers.documents import task_entry
from helpers.project import project, write_artifact, write_meta
from helpers.waiting import wait_until
from postflightd.cli import main

#: Processing a file takes well under this: the slack allowed on a measured duration.
SLACK_S = 30.0
RESEARCH = [300, 480, 600, 720, 900, 1100]  # + the run fixed in its session (660 s)
FIXED_RESEARCH = 660
PLANNING = [400, 500, 600, 700, 800]
IMPLEMENTED = [600, 900, 1200, 1500]
PARTIAL = 1000
TIMEOUTS = "[timeouts]\nresearch = 600\nplanning = 1800\nimplementation = 7200\n"


def session(n: int) -> str:
    return f"sess_{1736700000 + n}_t{n:05d}"


def doc(
    n: int,
    status: str,
    op: str,
    agent: str,
    started: datetime | None,
    *,
    artifact: tuple[str, str] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "status": status,
        "artifacts": [],
        "metadata": {
            "session_id": session(n),
            "agent_type": agent,
            "delegation_depth": 1,
            "delegation_path": ["orchestrator", op, agent],
        },
    }
    if started is not None:
        out["started_at"] = started.strftime("%Y-%m-%dT%H:%M:%SZ")
    if artifact is not None:
        kind, rel = artifact
        out["artifacts"] = [{"type": kind, "path": rel, "summary": f"{op} output"}]
    if status == "implemented":
        out["completion_data"] = {"completion_summary": "Done, every phase."}
    if status in ("partial", "in_progress"):
        out["partial_progress"] = {"stage": "phase 2", "details": "half way"}
    if status == "partial":
        out["errors"] = [
            {
                "type": "timeout",
                "message": "ran out of time",
                "recoverable": True,
                "recommendation": "resume",
            }
        ]
    return out


@dataclass
class Built:
    """The journal of the module, and what was written into it."""

    state: Path
    root: Path
    other: Path
    pf204_message: str = ""
    stuck_session: str = ""
    interrupted_session: str = ""
    invalid_session: str = ""
    exit_codes: list[int] = field(default_factory=list)


def _process(path: Path) -> tuple[int, dict[str, Any]]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["process", str(path), "--format", "json"])
    return code, json.loads(out.getvalue())


def _journal_kinds(state: Path, kind: str) -> int:
    path = state / "postflightd" / "journal.sqlite3"
    if not path.exists():
        return 0
    conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    try:
        return int(
            conn.execute("SELECT count(*) FROM observations WHERE kind = ?", (kind,)).fetchone()[0]
        )
    finally:
        conn.close()


def _build(base: Path) -> Built:
    state = base / "state"
    numbers = list(range(1, 31))
    root = project(
        base / "proj", [task_entry(n, f"task{n}", session_id=session(n)) for n in numbers]
    )
    (root / ".postflightd.toml").write_text(TIMEOUTS, encoding="utf-8")
    other = project(base / "other", [task_entry(1, "task1", session_id=session(1))])
    built = Built(state=state, root=root, other=other)
    now = datetime.now(UTC)
    n = 0

    def final(
        status: str, op: str, agent: str, seconds: float, kind: str, folder: str, target: Path
    ) -> int:
        nonlocal n
        n += 1
        task_dir = f"{n}_task{n}"
        rel = f"specs/{task_dir}/{folder}/out.md"
        write_artifact(target, rel)
        started = datetime.now(UTC) - timedelta(seconds=seconds)
        path = write_meta(
            target, task_dir, doc(n, status, op, agent, started, artifact=(kind, rel))
        )
        code, out = _process(path)
        built.exit_codes.append(code)
        if kind == "research" and not built.pf204_message:
            built.pf204_message = next(
                f["message"] for f in out["findings"] if f["code"] == "PF204"
            )
        return code

    research = "lean-research-agent"
    for i, seconds in enumerate(RESEARCH):
        # Four of the six write the artifact type "research" (PF204): the top code.
        final(
            "researched",
            "research",
            research,
            seconds,
            "research" if i < 4 else "report",
            "reports",
            root,
        )
    for seconds in PLANNING:
        final("planned", "plan", "planner-agent", seconds, "plan", "plans", root)
    impl = "python-implementation-agent"
    for seconds in IMPLEMENTED:
        final("implemented", "implement", impl, seconds, "summary", "summaries", root)
    final("partial", "implement", impl, PARTIAL, "summary", "summaries", root)

    # A near miss fixed in the same session: "done" (PF202), then "researched".
    n += 1
    task_dir = f"{n}_task{n}"
    rel = f"specs/{task_dir}/reports/out.md"
    write_artifact(root, rel)
    started = now - timedelta(seconds=FIXED_RESEARCH)
    bad = doc(n, "done", "research", research, started, artifact=("report", rel))
    assert _process(write_meta(root, task_dir, bad))[0] == 1
    good = doc(n, "researched", "research", research, started, artifact=("report", rel))
    assert _process(write_meta(root, task_dir, good))[0] == 0

    # Never fixed: "completed" (PF203) from a planner; the journal never gets its content.
    n += 1
    task_dir = f"{n}_task{n}"
    rel = f"specs/{task_dir}/plans/out.md"
    write_artifact(root, rel)
    bad = doc(n, "completed", "plan", "planner-agent", None, artifact=("plan", rel))
    assert _process(write_meta(root, task_dir, bad))[0] == 1
    built.invalid_session = session(n)

    # Stuck: in_progress for 3 h against a 2 h implementation timeout, flagged by the daemon.
    n += 1
    stuck = doc(n, "in_progress", "implement", impl, now - timedelta(hours=3))
    write_meta(root, f"{n}_task{n}", stuck)
    built.stuck_session = session(n)
    env = {**os.environ, "XDG_STATE_HOME": str(state)}
    daemon = subprocess.Popen(
        [sys.executable, "-m", "postflightd", "watch", str(root), "--log-format", "json"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        wait_until("the daemon to journal the stuck run", lambda: _journal_kinds(state, "stuck"))
    finally:
        terminate(daemon)

    # Interrupted: `process` of a file still in_progress (the agent's run ended).
    n += 1
    running = doc(n, "in_progress", "research", research, datetime.now(UTC))
    assert _process(write_meta(root, f"{n}_task{n}", running))[0] == 3
    built.interrupted_session = session(n)

    # Another root, with one run: outside the scope of `report ROOT`.
    rel = "specs/1_task1/reports/out.md"
    write_artifact(other, rel)
    one = doc(
        1,
        "researched",
        "research",
        research,
        now - timedelta(seconds=100),
        artifact=("report", rel),
    )
    assert _process(write_meta(other, "1_task1", one))[0] == 0
    return built


@pytest.fixture(scope="module")
def module_journal(tmp_path_factory: pytest.TempPathFactory) -> Built:
    base = tmp_path_factory.mktemp("report")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_STATE_HOME", str(base / "state"))
        mp.setenv("XDG_CONFIG_HOME", str(base / "config"))
        mp.delenv("POSTFLIGHTD_CONFIG", raising=False)
        return _build(base)


@pytest.fixture
def built(module_journal: Built, monkeypatch: pytest.MonkeyPatch) -> Built:
    monkeypatch.setenv("XDG_STATE_HOME", str(module_journal.state))
    return module_journal


def report_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["report", "--format", "json", *argv]) == 0
    return json.loads(capsys.readouterr().out)


def near(value: float | None, expected: float) -> bool:
    return value is not None and expected <= value <= expected + SLACK_S


# --- the figures ------------------------------------------------------------------------------


def test_the_journal_was_built_by_real_postflights(built: Built) -> None:
    assert built.exit_codes == [0] * 16
    kept = sorted(p.parent.name for p in (built.root / "specs").glob("*/.return-meta.json"))
    assert kept == ["18_task18", "19_task19", "20_task20"]  # invalid, stuck, interrupted


def test_runs_and_outcomes_per_operation(built: Built, capsys: pytest.CaptureFixture[str]) -> None:
    report = report_json(capsys, str(built.root))
    assert report["roots"] == [str(built.root)]
    assert report["runs"] == 20
    # Invalid, stuck, interrupted: never applied, yet each row kept the file's agent type.
    assert report["unattributed_runs"] == 0
    outcomes = {k: v for k, v in report["outcomes"].items() if v}
    assert outcomes == {
        "researched": 7,
        "planned": 5,
        "implemented": 4,
        "partial": 1,
        "invalid": 1,
        "stuck": 1,
        "interrupted": 1,
    }
    ops = {g["name"]: {k: v for k, v in g["outcomes"].items() if v} for g in report["operations"]}
    # A run never applied is placed by its agent's name, as the stuck detector places it.
    assert ops == {
        "research": {"researched": 7, "interrupted": 1},
        "planning": {"planned": 5, "invalid": 1},
        "implementation": {"implemented": 4, "partial": 1, "stuck": 1},
    }
    agents = {g["name"]: g["runs"] for g in report["agents"]}
    assert agents == {
        "lean-research-agent": 8,
        "planner-agent": 6,
        "python-implementation-agent": 6,
    }


def test_duration_medians_and_p95(built: Built, capsys: pytest.CaptureFixture[str]) -> None:
    report = report_json(capsys, str(built.root))
    ops = {g["name"]: g for g in report["operations"]}
    research = sorted([*RESEARCH, FIXED_RESEARCH])
    assert ops["research"]["timed_runs"] == 7
    assert near(ops["research"]["median_s"], research[3])  # 660
    assert near(ops["research"]["p95_s"], max(research))  # nearest rank: the longest of 7
    assert near(ops["planning"]["median_s"], 600)
    assert near(ops["planning"]["p95_s"], 800)
    assert near(ops["implementation"]["median_s"], PARTIAL)  # 600 900 1000 1200 1500
    assert near(ops["implementation"]["p95_s"], 1500)
    assert "unknown" not in ops
    agents = {g["name"]: g for g in report["agents"]}
    assert set(agents) == {"lean-research-agent", "planner-agent", "python-implementation-agent"}
    # The invalid plan (never applied, no started_at) is a run of its agent but has no duration.
    assert near(agents["planner-agent"]["median_s"], 600)
    assert agents["planner-agent"]["runs"] == 6


def test_timeouts_against_reality(built: Built, capsys: pytest.CaptureFixture[str]) -> None:
    report = report_json(capsys, str(built.root))
    advice = {t["operation"]: t for t in report["timeouts"]}
    assert set(advice) == {"research", "planning", "implementation"}
    research = advice["research"]
    assert research["timeout_s"] == 600  # from the root's .postflightd.toml
    assert research["verdict"] == "raise"  # 600 s is below the p95 of 1100 s
    assert 1650 <= research["suggested_s"] <= 1800
    assert "[timeouts] research = " in research["advice"]
    assert near(research["longest_success_s"], 1100)
    planning = advice["planning"]
    assert (planning["timeout_s"], planning["verdict"]) == (1800, "ok")
    implementation = advice["implementation"]
    assert implementation["timeout_s"] == 7200
    assert implementation["verdict"] == "lower"  # 2 h is more than 3x the longest (25 min)
    assert 3000 <= implementation["suggested_s"] <= 3300
    assert near(implementation["longest_success_s"], 1500)


def test_top_finding_code_with_share_agents_and_a_real_message(
    built: Built, capsys: pytest.CaptureFixture[str]
) -> None:
    report = report_json(capsys, str(built.root))
    findings = report["findings"]
    assert findings["validated_files"] == 20
    top = findings["codes"][0]
    assert top["code"] == "PF204"
    assert (top["files"], top["count"], top["share"]) == (4, 4, 0.2)
    assert top["top_agents"] == [{"agent": "lean-research-agent", "files": 4}]
    assert top["example"]["message"] == built.pf204_message
    assert top["example"]["location"] == "artifacts[0].type"
    codes = {c["code"]: c for c in findings["codes"]}
    assert codes["PF202"]["top_agents"] == [{"agent": "lean-research-agent", "files": 1}]
    # The invalid file was never applied: its agent comes from its validated rows.
    assert codes["PF203"]["top_agents"] == [{"agent": "planner-agent", "files": 1}]
    assert codes["PF602"]["files"] == 1
    assert codes["PF602"]["top_agents"] == [{"agent": "python-implementation-agent", "files": 1}]


def test_near_miss_statuses_are_counted_by_what_they_meant(
    built: Built, capsys: pytest.CaptureFixture[str]
) -> None:
    report = report_json(capsys, str(built.root))
    assert report["findings"]["near_miss_statuses"] == [
        {"status": "completed", "meant": "planned", "runs": 1},
        {"status": "done", "meant": "researched", "runs": 1},
    ]


def test_stuck_and_interrupted_runs_with_task_session_and_ending(
    built: Built, capsys: pytest.CaptureFixture[str]
) -> None:
    report = report_json(capsys, str(built.root))
    incidents = {i["kind"]: i for i in report["incidents"]}
    assert set(incidents) == {"stuck", "interrupted"}
    assert incidents["stuck"]["session"] == built.stuck_session
    assert incidents["stuck"]["task"] == 19
    assert incidents["stuck"]["ended"] == "not yet: still in_progress (file kept)"
    assert incidents["interrupted"]["session"] == built.interrupted_session
    assert incidents["interrupted"]["task"] == 20
    assert incidents["interrupted"]["file"] == "specs/20_task20/.return-meta.json"
    assert incidents["stuck"]["agent"] == "python-implementation-agent"
    assert incidents["interrupted"]["agent"] == "lean-research-agent"


def test_runs_per_day_and_the_scope_of_roots(
    built: Built, capsys: pytest.CaptureFixture[str]
) -> None:
    report = report_json(capsys, str(built.root))
    assert sum(d["runs"] for d in report["days"]) == 20
    assert sum(d["trouble"] for d in report["days"]) == 4  # partial, invalid, stuck, interrupted
    everything = report_json(capsys)
    assert everything["runs"] == 21
    assert everything["roots"] == sorted([str(built.root), str(built.other)])
    other = report_json(capsys, str(built.other))
    assert other["runs"] == 1
    assert other["timeouts"][0]["timeout_s"] == 3600  # that root has no .postflightd.toml
    assert other["timeouts"][0]["verdict"] == "too_few_runs"


def test_since_limits_the_period(built: Built, capsys: pytest.CaptureFixture[str]) -> None:
    assert report_json(capsys, str(built.root), "--since", "1h")["runs"] == 20
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).date().isoformat()
    assert main(["report", "--format", "json", "--since", tomorrow, str(built.root)]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["runs"] == 0
    assert captured.err.count("no runs recorded for ") == 1


def test_text_report_reads_as_a_summary(built: Built, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(built.root)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("postflightd report: 20 runs, ")
    assert re.search(r"^  research +8 +88% +11m", text, re.MULTILINE)  # 7 of 8: 1 interrupted
    assert re.search(r"^  PF204 +warning +4 +4 +20% +lean-research-agent \(4\)", text, re.M)
    assert "research: raise it: the timeout (10m00s) is below the p95 (18m2" in text
    assert "implementation: lower it: the timeout (2h00m) is more than 3x" in text
    assert '"done" -> researched: 1 run' in text
    assert f"stuck        19    {built.stuck_session}" in text


# --- HTML -------------------------------------------------------------------------------------


class _Page(HTMLParser):
    """Charts, their bars and marks, and every URL-bearing attribute of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.charts: dict[str, dict[str, int]] = {}
        self.current: str | None = None
        self.urls: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.tags.append(tag)
        for name in ("src", "href", "xlink:href", "action", "data"):
            if a.get(name):
                self.urls.append(str(a[name]))
        if tag == "svg" and a.get("data-chart"):
            self.current = str(a["data-chart"])
            self.charts[self.current] = {"bar": 0, "timeout": 0, "p95": 0}
        elif self.current and tag == "g":
            cls = a.get("class") or ""
            for mark in ("bar", "timeout", "p95"):
                if cls == mark:
                    self.charts[self.current][mark] += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "svg":
            self.current = None


def test_html_report_has_every_chart_and_nothing_external(
    built: Built, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from postflightd.reporters.report_html import BINS

    out = tmp_path / "report.html"
    assert main(["report", "--format", "html", "-o", str(out), str(built.root)]) == 0
    raw = out.read_bytes()
    text = raw.decode("utf-8")  # strict: valid UTF-8
    page = _Page()
    page.feed(text)
    charts = page.charts
    assert charts["outcomes-by-agent"]["bar"] == 3  # one per agent type
    for op in ("research", "planning", "implementation"):
        chart = charts[f"durations-{op}"]
        assert chart["bar"] == BINS
        assert chart["timeout"] == 1  # the configured timeout is marked
        assert chart["p95"] == 1
    assert "durations-unknown" not in charts
    codes = report_json(capsys, str(built.root))["findings"]["codes"]
    assert charts["findings-by-code"]["bar"] == len(codes)
    assert charts["runs-per-day"]["bar"] == len(report_json(capsys, str(built.root))["days"])
    assert page.urls == []
    assert "script" not in page.tags
    assert not re.search(rb"https?://", raw)
    assert b'<meta name=viewport content="width=device-width' in raw
    assert b"viewBox=" in raw


def test_html_bar_values_match_the_figures(built: Built, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    assert main(["report", "--format", "html", "-o", str(out), str(built.root)]) == 0
    text = out.read_text("utf-8")
    research = re.search(r'data-chart="durations-research".*?</svg>', text, re.S)
    assert research is not None
    counts = [int(v) for v in re.findall(r'<g class="bar" data-value="(\d+)"', research.group())]
    assert sum(counts) == 7  # every timed research run in one bin
    agents = re.search(r'data-chart="outcomes-by-agent".*?</svg>', text, re.S)
    assert agents is not None
    assert 'data-label="planner-agent" data-value="6"' in agents.group()  # 5 planned, 1 invalid


def test_the_forked_fold_gives_the_same_report(
    built: Built, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Half the runs folded in a child process (large journals): the same figures."""
    from postflightd.stats import source as report_journal

    monkeypatch.setattr(report_journal, "PARALLEL_MIN_ROWS", 10**9)
    serial = report_json(capsys, "--since", "all")
    monkeypatch.setattr(report_journal, "PARALLEL_MIN_ROWS", 0)
    forked = report_json(capsys, "--since", "all")
    for report in (serial, forked):
        report.pop("generated")
        # The order of runs within an operation's durations does not show; ties may differ.
        report["incidents"].sort(key=lambda i: (i["kind"], i["task"]))
    assert forked == serial
    assert forked["runs"] == 21


def test_a_version_2_journal_is_read_as_it_is_with_its_unapplied_runs_unknown(
    built: Built,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A journal an older postflightd wrote has no ``agent`` column: the report (which never
    migrates) reads it, and the runs never applied count as ``unknown``, as they did then."""
    import shutil

    from postflightd.journal.database import journal_path

    v2 = tmp_path / "v2-state"
    shutil.copytree(built.state, v2)
    monkeypatch.setenv("XDG_STATE_HOME", str(v2))
    path = journal_path("")
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("ALTER TABLE observations DROP COLUMN agent")
        conn.execute("PRAGMA user_version = 2")
        conn.commit()
    report = report_json(capsys, str(built.root))
    assert report["runs"] == 20
    assert report["unattributed_runs"] == 3  # invalid, stuck, interrupted
    unknown = next(g for g in report["operations"] if g["name"] == "unknown")
    assert {k: v for k, v in unknown["outcomes"].items() if v} == {
        "invalid": 1,
        "stuck": 1,
        "interrupted": 1,
    }
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (2,)  # not migrated
    assert main(["report", str(built.root)]) == 0
    assert "3 runs have no agent type on record" in capsys.readouterr().out
