#!/usr/bin/env python3
"""Regenerate docs/report-example.html (and .txt): `postflightd report` on the example project.

    .venv/bin/python examples/report_example.py [--out docs]

On a copy of examples/project, with its own journal (XDG_STATE_HOME in a temp dir), it does
what users do, with the real command line only:

1. `postflightd scan --apply`: the bundled files (259 applied; 260, 261, 263 invalid; 262 in
   progress for months), then a `watch` daemon long enough to flag 262 as stuck;
2. a few dozen agent runs on new tasks of the copy, each written as an agent writes it, with a
   chosen `started_at` (research ~10-25 min, planning ~5-15 min, implementation ~15-35 min),
   then `postflightd process`: some partial or failed, a few with schema slips (an artifact of
   type `research`, a missing `delegation_depth`), near-miss statuses (`done`, `success`),
   one fixed in the same session, one interrupted;
3. `postflightd report --format html` and `--format text` into `--out`.

The project's `.postflightd.toml` sets `research = 900` so that the timeout advice has
something to say. The roots shown in the report are the temp copy's path.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
META = ".return-meta.json"
AGENTS = {
    "research": ["lean-research-agent", "general-research-agent"],
    "plan": ["planner-agent"],
    "implement": ["python-implementation-agent", "lean-implementation-agent"],
}
MINUTES = {"research": (10, 25), "plan": (5, 15), "implement": (15, 35)}
FINAL = {"research": "researched", "plan": "planned", "implement": "implemented"}
FOLDER = {
    "research": ("report", "reports"),
    "plan": ("plan", "plans"),
    "implement": ("summary", "summaries"),
}


def postflightd(*argv: str, env: dict[str, str], check: bool = False) -> int:
    done = subprocess.run(
        [sys.executable, "-m", "postflightd", *argv],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    if check and done.returncode != 0:
        raise SystemExit(f"postflightd {' '.join(argv)} exited {done.returncode}")
    return done.returncode


def add_tasks(specs: Path, numbers: list[int]) -> None:
    state = json.loads((specs / "state.json").read_text("utf-8"))
    todo = (specs / "TODO.md").read_text("utf-8")
    for n in numbers:
        state["active_projects"].append(
            {
                "project_number": n,
                "project_name": f"task_{n}",
                "status": "not_started",
                "language": "python",
                "session_id": f"sess_{1736800000 + n}_ex{n:04d}",
                "last_updated": "2026-01-09T09:00:00Z",
                "artifacts": [],
            }
        )
        todo += f"\n### {n}. Task {n}\n- **Status**: [NOT STARTED]\n- **Language**: python\n"
    state["next_project_number"] = max(numbers) + 1
    (specs / "state.json").write_text(json.dumps(state, indent=2) + "\n", "utf-8")
    (specs / "TODO.md").write_text(todo, "utf-8")


def metadata_doc(n: int, op: str, agent: str, status: str, minutes: float) -> dict[str, Any]:
    kind, folder = FOLDER[op]
    started = datetime.now(UTC) - timedelta(minutes=minutes)
    doc: dict[str, Any] = {
        "status": status,
        "started_at": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "artifacts": [
            {"type": kind, "path": f"specs/{n}_task_{n}/{folder}/{op}-001.md", "summary": op}
        ],
        "next_steps": "Continue with the next step",
        "metadata": {
            "session_id": f"sess_{1736800000 + n}_ex{n:04d}",
            "agent_type": agent,
            "delegation_depth": 1,
            "delegation_path": ["orchestrator", op, agent],
        },
    }
    if status == "implemented":
        doc["completion_data"] = {"completion_summary": "Implemented the plan."}
    if status in ("partial", "failed", "in_progress"):
        doc["partial_progress"] = {"stage": "phase 2", "details": "half way through"}
        doc["errors"] = [
            {
                "type": "execution",
                "message": "tests kept failing",
                "recoverable": True,
                "recommendation": "resume",
            }
        ]
    if status == "in_progress":
        del doc["errors"]
        doc["artifacts"] = []
    return doc


def write(specs: Path, n: int, doc: dict[str, Any]) -> Path:
    task_dir = specs / f"{n}_task_{n}"
    for artifact in doc["artifacts"]:
        path = specs.parent / artifact["path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {n}\n\nWritten by the example.\n", "utf-8")
    task_dir.mkdir(parents=True, exist_ok=True)
    path = task_dir / META
    path.write_text(json.dumps(doc, indent=2) + "\n", "utf-8")
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", default=str(REPO / "docs"), help="directory for the reports")
    args = parser.parse_args()
    rng = random.Random(14)  # noqa: S311 - example data, not a secret
    out = Path(args.out)
    with tempfile.TemporaryDirectory(prefix="postflightd-example-") as tmp:
        root = Path(tmp) / "project"
        shutil.copytree(HERE / "project", root)
        specs = root / "specs"
        (root / ".postflightd.toml").write_text("[timeouts]\nresearch = 900\n", "utf-8")
        env = {
            **os.environ,
            "XDG_STATE_HOME": str(Path(tmp) / "state"),
            "XDG_CONFIG_HOME": str(Path(tmp) / "config"),
        }
        env.pop("POSTFLIGHTD_CONFIG", None)
        postflightd("scan", "--apply", str(root), env=env)
        daemon = subprocess.Popen(
            [sys.executable, "-m", "postflightd", "watch", str(root)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(3)  # the daemon reconciles at start and flags 262 (stuck since January)
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(10)

        numbers = list(range(300, 336))
        add_tasks(specs, numbers)
        plan = ["research"] * 14 + ["plan"] * 10 + ["implement"] * 12
        for n, op in zip(numbers, plan, strict=True):
            agent = rng.choice(AGENTS[op])
            lo, hi = MINUTES[op]
            minutes = rng.uniform(lo, hi)
            roll = rng.random()
            status = FINAL[op]
            if op == "implement" and roll < 0.25:
                status = rng.choice(["partial", "failed"])
            doc = metadata_doc(n, op, agent, status, minutes)
            if op == "research" and roll > 0.6:
                doc["artifacts"][0]["type"] = "research"  # PF204, the classic slip
            if roll < 0.15:
                del doc["metadata"]["delegation_depth"]  # PF207
            if n == 305:
                doc["status"] = "done"  # PF202, fixed below in the same session
            if n == 318:
                doc["status"] = "success"  # PF202, never fixed
            if n == 333:
                doc = metadata_doc(n, op, agent, "in_progress", minutes)
            path = write(specs, n, doc)
            postflightd("process", str(path), env=env)
            if n == 305:
                doc["status"] = "researched"
                postflightd("process", str(write(specs, n, doc)), env=env)
        out.mkdir(parents=True, exist_ok=True)
        postflightd(
            "report",
            str(root),
            "--format",
            "html",
            "-o",
            str(out / "report-example.html"),
            env=env,
            check=True,
        )
        postflightd("report", str(root), "-o", str(out / "report-example.txt"), env=env, check=True)
    print(f"wrote {out / 'report-example.html'} and {out / 'report-example.txt'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
