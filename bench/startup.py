#!/usr/bin/env python3
"""Benchmark: what a command costs before it has a metadata file to check.

Times, each as a whole process, wall and CPU (the child's user + system time), medians of
--runs runs:

* `postflightd scan --format json ROOT` of a project with no metadata file (specs/ and an
  empty state.json): start-up, the configuration, listing nothing;
* `postflightd hook claude` fed a stop in that project (most stops find no file);
* `postflightd --version`;
* `postflightd scan ROOT` of the same project with its own `.postflightd.toml` (every key at
  its default): what reading and validating a configuration file adds.

With `--baseline SRC` (e.g. `/work/main/src`) each case also runs with that checkout's `src/`
first on `PYTHONPATH`, alternating run by run with this one, so that both see the same load:
a before/after in one run.

    .venv/bin/python bench/startup.py [--runs 10] [--baseline ../main/src]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine import describe

#: Every key a project's own file may set, at its default.
PROJECT_CONFIG = """specs_dir = "specs"
[validation]
select = []
ignore = []
strict = false
max_file_bytes = 1048576
check_artifacts = true
[timeouts]
research = 3600
[watch]
settle_ms = 200
heal_window_s = 600
[postflight]
sync_todo = true
[postflight.status_map]
implemented = "completed"
[hook]
apply = true
"""


def postflightd_command() -> list[str]:
    """The installed console script beside this interpreter, else ``python -m postflightd``."""
    script = Path(sys.executable).with_name("postflightd")
    return [str(script)] if script.exists() else [sys.executable, "-m", "postflightd"]


def empty_project(root: Path, config: str | None = None) -> Path:
    (root / "specs").mkdir(parents=True)
    (root / "specs" / "state.json").write_text('{"active_projects": []}\n', encoding="utf-8")
    if config is not None:
        (root / ".postflightd.toml").write_text(config, encoding="utf-8")
    return root


def once(argv: list[str], stdin: bytes, env: dict[str, str]) -> tuple[float, float]:
    """One process: (wall, CPU) in seconds; exits on an unexpected exit code."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, input=stdin, capture_output=True, env=env, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"{argv[1:3]}... exited {done.returncode}: {done.stderr.decode()[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument(
        "--baseline", metavar="SRC", help="also time another checkout's src/ (e.g. main's), paired"
    )
    args = parser.parse_args()
    print(describe())
    cmd = postflightd_command()
    tmp = Path(tempfile.mkdtemp(prefix="pf-startup-"))
    # Both sides write their bytecode once (the untimed first run), then read it.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["XDG_CONFIG_HOME"] = str(tmp / "config")  # no user configuration file
    sides = {"this": env}
    if args.baseline:
        sides["baseline"] = {**env, "PYTHONPATH": str(Path(args.baseline).resolve())}
    try:
        empty = empty_project(tmp / "empty")
        configured = empty_project(tmp / "configured", PROJECT_CONFIG)
        stop = json.dumps({"cwd": str(empty), "hook_event_name": "Stop"}).encode()
        cases = {
            "scan, no metadata file": ([*cmd, "scan", "--format", "json", str(empty)], b""),
            "hook, a stop with no metadata file": ([*cmd, "hook", "claude"], stop),
            "--version": ([*cmd, "--version"], b""),
            "scan, with the project's .postflightd.toml": ([*cmd, "scan", str(configured)], b""),
        }
        print(f"medians of {args.runs} runs, wall / CPU (sides alternating run by run)")
        for name, (argv, stdin) in cases.items():
            times: dict[str, list[tuple[float, float]]] = {side: [] for side in sides}
            for side_env in sides.values():
                once(argv, stdin, side_env)  # untimed: bytecode, page cache
            for _ in range(args.runs):
                for side, side_env in sides.items():
                    times[side].append(once(argv, stdin, side_env))
            cells = []
            for side, rows in times.items():
                wall = statistics.median(r[0] for r in rows) * 1000
                cpu = statistics.median(r[1] for r in rows) * 1000
                cells.append(f"{side} {wall:5.0f} / {cpu:4.0f} ms")
            print(f"  {name:45s} " + "   ".join(cells))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
