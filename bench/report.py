#!/usr/bin/env python3
"""Benchmark: `postflightd report` over a journal of 100,000 runs (target: <= 2 s).

Generates, under a temp dir, a journal through the journal's own record API, with the rows the
daemon writes for each run: validated in_progress, 0-3 progress updates (validated again),
validated final, postflighted with the full file content, deleted; invalid runs stop after
validation, stuck runs get a stuck row. Spread over 30 days, 4 roots, 12 agent types. Then
times, as whole processes (start-up included):

* `postflightd report --since all`                 text; median of --runs runs
* `postflightd report --since all --format html`   median of --runs runs
* `postflightd report --since all --format json`   median of --runs runs
* the status quo: `postflightd history --format json --limit N` (the raw material a hand-made
  script over the journal starts from; it computes nothing yet); --history-runs runs (1)
* in-process, the naive way: fetch every row, `json.loads` every content in Python;
  median of --runs runs

Wall times depend on what else runs on the machine: the load average is printed before and
after, and the CPU time (user + system, the forked child included) beside each wall time.
``--baseline SRC`` times the same three reports run by another checkout's ``src/`` (e.g.
main's) in the same alternation, and checks that both print the same bytes (the clock aside:
``generated`` is the one line that differs).

    .venv/bin/python bench/report.py [--runs-count 100000] [--runs 5] [--history-runs 1] [--keep]
                                     [--baseline OTHER/src] [--state KEPT/state]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from machine import describe

TARGET_S = 2.0
AGENTS = [
    (f"{lang}-{op}-agent", op)
    for lang in ("lean", "python", "neovim", "general")
    for op in ("research", "plan", "implement")
]
FINAL = {"research": "researched", "plan": "planned", "implement": "implemented"}
WARNINGS = [
    {
        "code": "PF204",
        "severity": "warning",
        "location": "artifacts[0].type",
        "message": "artifact type 'research' is not one of report, plan, summary, "
        "implementation (read as report)",
    },
    {
        "code": "PF207",
        "severity": "warning",
        "location": "metadata.delegation_depth",
        "message": "metadata.delegation_depth is missing; the schema asks for it",
    },
]
ERRORS = [
    {
        "code": "PF203",
        "severity": "error",
        "location": "status",
        "message": '"completed" is forbidden in the metadata file: write "status": "planned"',
    },
    {
        "code": "PF502",
        "severity": "error",
        "location": "artifacts[0].path",
        "message": "artifact 'specs/1_x/plans/p.md' does not exist: write it, or fix the path",
    },
]


def generate(state: Path, runs: int, seed: int = 14) -> int:
    """Write ``runs`` runs into the journal under ``state``; return the number of rows."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
    from postflightd.journal.database import Journal

    rng = random.Random(seed)
    path = state / "postflightd" / "journal.sqlite3"
    journal = Journal.open(path)
    assert journal.enabled, journal.error
    start = datetime.now(UTC) - timedelta(days=30)
    rows = 0
    with journal:
        for chunk in range(0, runs, 5000):
            with journal.batch(durable=False):
                for i in range(chunk, min(chunk + 5000, runs)):
                    rows += _run(journal, rng, i, start + timedelta(seconds=i * 25.9))
    return rows


def _run(journal: object, rng: random.Random, i: int, when: datetime) -> int:
    from postflightd.journal.database import Journal

    assert isinstance(journal, Journal)
    root = f"/srv/projects/p{i % 4}"
    task = 1000 + i
    file = f"specs/{task}_task_{task}/.return-meta.json"
    session = f"sess_{1736700000 + i}_{i % 999999:06d}"
    agent, op = AGENTS[i % len(AGENTS)]
    duration = rng.lognormvariate(6.5, 0.6)
    started = when
    ended = when + timedelta(seconds=duration)
    # Every row names its agent, as postflightd writes them since journal version 3.
    common = {"root": root, "file": file, "task": task, "session": session, "agent": agent}
    journal.record("validated", status="in_progress", findings=[], ts=started, **common)
    # Progress updates: the daemon validates (and journals) every rewrite of the file.
    updates = rng.choice((0, 1, 2, 3))
    for k in range(updates):
        at = started + timedelta(seconds=duration * (k + 1) / (updates + 1))
        journal.record("validated", status="in_progress", findings=[], ts=at, **common)
    roll = rng.random()
    if roll < 0.03:
        journal.record("stuck", status="in_progress", ts=ended, **common)
        return 2 + updates
    if roll < 0.08:
        journal.record(
            "validated", status="completed", findings=[rng.choice(ERRORS)], ts=ended, **common
        )
        return 2 + updates
    status = FINAL[op] if roll < 0.9 else rng.choice(["partial", "failed", "blocked"])
    findings = [rng.choice(WARNINGS)] if rng.random() < 0.3 else []
    content = json.dumps(
        {
            "status": status,
            "started_at": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "artifacts": [
                {
                    "type": "report",
                    "path": f"specs/{task}_task_{task}/reports/r.md",
                    "summary": "A report of the work done, with a few findings and next steps",
                }
            ],
            "next_steps": "Run the next step of the workflow",
            "metadata": {
                "session_id": session,
                "agent_type": agent,
                "duration_seconds": round(duration),
                "delegation_depth": 1,
                "delegation_path": ["orchestrator", op, agent],
            },
        },
        indent=2,
    )
    journal.record("validated", status=status, findings=findings, ts=ended, **common)
    journal.record("postflighted", status=status, content=content, ts=ended, **common)
    journal.record("deleted", status=status, ts=ended, **common)
    return 4 + updates


def _without_clock(text: str) -> str:
    """A report's text with its ``generated`` time blanked: two runs differ by nothing else."""
    return re.sub(r'(generated"?:? "?)\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ', r"\1<now>", text)


def same_output(argv: list[str], env: dict[str, str], base_env: dict[str, str]) -> bool:
    """Both source trees print the same report (the clock aside)."""
    ours, theirs = (
        subprocess.run(argv, env=e, capture_output=True, text=True, check=True).stdout
        for e in (env, base_env)
    )
    return _without_clock(ours) == _without_clock(theirs)


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall time and CPU time (user + system, the process and its children) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(
        argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False
    )
    elapsed = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr.decode()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def _figures(runs: list[tuple[float, float]]) -> str:
    wall = [w for w, _ in runs]
    cpu = statistics.median(c for _, c in runs)
    return (
        f"median {statistics.median(wall):6.2f} s "
        f"(min {min(wall):.2f}, max {max(wall):.2f}; CPU {cpu:.2f} s)"
    )


def naive(path: Path) -> float:
    """Every row into Python, every content parsed: what a script without SQL JSON does."""
    t0 = time.perf_counter()
    conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    agents: dict[str, int] = {}
    for kind, content in conn.execute("SELECT kind, content FROM observations ORDER BY id"):
        if kind == "postflighted" and content:
            doc = json.loads(content)
            agent = doc["metadata"]["agent_type"]
            agents[agent] = agents.get(agent, 0) + 1
    conn.close()
    return time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs-count", type=int, default=100_000, help="runs in the journal")
    parser.add_argument("--runs", type=int, default=5, help="timed runs per figure")
    parser.add_argument(
        "--history-runs", type=int, default=1, help="timed runs of the status quo (slow)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the generated journal")
    parser.add_argument(
        "--baseline", metavar="SRC", help="also time this src/ (paired, alternating)"
    )
    parser.add_argument(
        "--state",
        metavar="DIR",
        help="reuse a journal kept by --keep (its XDG_STATE_HOME) instead of generating one",
    )
    args = parser.parse_args()
    print(f"machine: {describe()}")
    tmp = Path(tempfile.mkdtemp(prefix="postflightd-bench-report-"))
    try:
        state = Path(args.state) if args.state else tmp / "state"
        t0 = time.perf_counter()
        db = state / "postflightd" / "journal.sqlite3"
        if args.state:
            rows = (
                sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)
                .execute("SELECT count(*) FROM observations")
                .fetchone()[0]
            )
        else:
            rows = generate(state, args.runs_count)
        size_mb = sum(p.stat().st_size for p in db.parent.iterdir()) / 1e6
        print(
            f"journal: {args.runs_count:,} runs, {rows:,} rows, {size_mb:.0f} MB "
            f"({'reused' if args.state else 'generated'} in {time.perf_counter() - t0:.1f} s)"
        )
        env = {**os.environ, "XDG_STATE_HOME": str(state), "XDG_CONFIG_HOME": str(tmp / "cfg")}
        base_env = (
            {**env, "PYTHONPATH": str(Path(args.baseline).resolve())} if args.baseline else None
        )
        exe = [sys.executable, "-m", "postflightd"]
        # One untimed run: warms the page cache, and checks the report counts every run.
        out = subprocess.run(
            [*exe, "report", "--since", "all", "--format", "json"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        counted = json.loads(out.stdout)["runs"]
        if counted != args.runs_count:
            raise SystemExit(f"the report counted {counted} runs, not {args.runs_count}")
        figures = {
            "report (text)": [*exe, "report", "--since", "all"],
            "report --format html": [*exe, "report", "--since", "all", "--format", "html"],
            "report --format json": [*exe, "report", "--since", "all", "--format", "json"],
            "status quo: history --format json (no figures yet)": [
                *exe,
                "history",
                "--format",
                "json",
                "--limit",
                str(rows),
            ],
        }
        print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        for name, argv in figures.items():
            count = args.history_runs if name.startswith("status quo") else args.runs
            if not count:
                continue
            paired = base_env is not None and name.startswith("report")
            runs: list[tuple[float, float]] = []
            base: list[tuple[float, float]] = []
            for _ in range(count):
                runs.append(timed(argv, env))
                if paired and base_env is not None:
                    base.append(timed(argv, base_env))
            verdict = ""
            if name.startswith("report"):
                ok = statistics.median(w for w, _ in runs) <= TARGET_S
                verdict = f"  target <= {TARGET_S:g} s: {'met' if ok else 'MISSED'}"
            print(f"{name:<52} {_figures(runs)}{verdict}")
            if paired and base_env is not None:
                same = same_output(argv, env, base_env)
                print(
                    f"{'  the same, --baseline src':<52} {_figures(base)}  "
                    f"output {'identical' if same else 'DIFFERS'}"
                )
        times = [naive(db) for _ in range(args.runs)]
        print(
            f"{'naive in-process: every row fetched, every content parsed':<52} median "
            f"{statistics.median(times):6.2f} s (no figures computed)"
        )
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        if args.keep:
            print(f"kept: {tmp} (XDG_STATE_HOME={tmp / 'state'})")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
