#!/usr/bin/env python3
"""Benchmark: what the daemon's healer costs after a state.json write that lost nothing.

After every state.json write that is not its own, the daemon compares the tasks it applied
recently (the journal's last ``heal_window_s``) with state.json. This measures
that check when nothing was lost, on a 1,000-task state.json (2-space indent, a few
artifacts per task), for N recently applied tasks, each iteration after an external write
that changes only a top-level key (what a jq script that keeps a counter does):

* parse     ``load_state`` of the new bytes: paid by the daemon on any external write
            anyway (the next postflight reads it; cached by content), shown for scale;
* healer    ``Healer.check`` once the bytes are parsed: the incremental journal query (rows
            newer than the last seen: none here) and one comparison per tracked task;
* re-verify the alternative without the healer's memory: ``verify``'s ``inspect_root``
            (the whole window read back from the journal and decoded, every task judged).

The status quo, no check at all, costs nothing and loses the outcomes (2,474 of 5,000 when a
jq script rewrote state.json alongside a burst of postflights). Medians of --runs iterations;
every healer run is checked to have found no candidate.

    .venv/bin/python bench/heal.py [--tasks 1000] [--recent 10,100,1000] [--runs 50]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from machine import describe
from postflightd.config import Config
from postflightd.daemon.healer import Healer
from postflightd.journal.changes import TaskChange
from postflightd.journal.database import Journal, format_ts
from postflightd.pipeline.verify import inspect_root
from postflightd.project.state import load_state


def task(n: int, status: str) -> dict[str, Any]:
    return {
        "project_number": n,
        "project_name": f"task_{n}",
        "status": status,
        "language": "python",
        "session_id": f"sess_1736700000_{n:06d}",
        "last_updated": "2026-01-08T14:30:00Z",
        "researched": "2026-01-08T14:30:00Z",
        "artifacts": [
            {
                "type": "research",
                "path": f"specs/{n}_task_{n}/reports/research-00{i}.md",
                "summary": "Findings about the plugin API and its failure modes",
            }
            for i in range(1, 4)
        ],
        "description": "Implement the feature described in the research report " * 3,
    }


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def bench(base: Path, tasks: int, recent: int, runs: int) -> tuple[float, float, float]:
    root = base / f"root-{recent}"
    specs = root / "specs"
    specs.mkdir(parents=True)
    doc: dict[str, Any] = {
        "next_project_number": tasks + 1,
        "active_projects": [task(n, "researched") for n in range(1, tasks + 1)],
    }
    state = specs / "state.json"
    state.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    config = Config()
    journal = Journal.open(base / f"journal-{recent}.sqlite3")
    assert journal.enabled, journal.error
    with journal.batch(durable=False):
        for n in range(1, recent + 1):
            journal.record(
                "postflighted",
                root=str(root),
                file=f"specs/{n}_task_{n}/.return-meta.json",
                task=n,
                status="researched",
                change=TaskChange(task(n, "researching"), task(n, "researched")),
            )
    healer = Healer()
    healer.check(root, config, journal)  # the first check reads the window in
    since = format_ts(datetime.now(UTC) - timedelta(hours=1))
    parse, heal, reverify = [], [], []
    for i in range(runs):
        doc["writer_count"] = i  # an external write that loses nothing
        tmp = specs / ".jq.tmp"
        tmp.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        tmp.replace(state)
        parse.append(timed(lambda: load_state(state)))
        stats = None

        def check() -> None:
            nonlocal stats
            stats = healer.check(root, config, journal)

        heal.append(timed(check))
        assert stats is not None and stats.candidates == 0 and stats.checked == recent, stats
        reverify.append(timed(lambda: inspect_root(root, config, journal, since)))
    journal.close()
    return statistics.median(parse), statistics.median(heal), statistics.median(reverify)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--recent", default="10,100,1000")
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    print(f"machine: {describe()}")
    print(f"state.json: {args.tasks} tasks; {args.runs} external writes per row; medians")
    header = ("recent tasks", "parse", "healer", "per task", "re-verify")
    print("  ".join(f"{h:>{w}}" for h, w in zip(header, (12, 11, 11, 9, 11), strict=True)))
    with tempfile.TemporaryDirectory(prefix="postflightd-heal-") as tmp:
        os.environ["XDG_STATE_HOME"] = str(Path(tmp) / "state")
        for recent in (int(x) for x in args.recent.split(",")):
            parse, heal, reverify = bench(Path(tmp), args.tasks, min(recent, args.tasks), args.runs)
            per_task = heal / recent * 1e6
            print(
                f"{recent:>12}  {parse * 1000:8.3f} ms  {heal * 1000:8.3f} ms  "
                f"{per_task:6.2f} us  {reverify * 1000:8.3f} ms"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
