#!/usr/bin/env python3
"""Benchmark: state.json read for a scan, msgspec's decode of its fields vs. the full reader.

Generates the scan bench's state.json (N tasks of about 1.6 KB: 16.6 MB at 10,000, written by
``json.dumps``, so ASCII) and the same with non-ASCII text in every task (as tools that write
raw UTF-8 leave it), then, for each file, times in fresh processes, alternating:

* ``load_state_for_scan(path, whole_min=0)``: decoded by msgspec (by default from 3 MiB up),
  msgspec's import included
* ``load_state_for_scan(path, whole_min=1 << 62)``: parsed by the full reader
  (``state.parse_state``) and the scan fields kept, what a smaller file, or one msgspec
  refuses, gets
* ``--baseline SRC``: the same call by another checkout's ``src/`` (e.g. main's)
* ``json.loads`` of the file's bytes, keeping everything

Each process imports the reader (timed), reads the file once
(timed), and reports its peak RSS over what it held before the read (VmHWM); medians
of ``--runs`` processes are printed.

    .venv/bin/python bench/state.py [--tasks 10000] [--runs 9] [--baseline ../main/src]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from machine import describe
from scan import _fat_task

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"

#: Runs in a fresh process: prints import ms, read ms, peak KB over the pre-read RSS, tasks.
#: The peak is the process's own high-water mark (VmHWM): ``ru_maxrss`` starts a child at its
#: parent's size, and this parent holds the generated document.
CODE = """
import re, sys, time
from pathlib import Path
def hwm():
    return int(re.search(r"VmHWM:\\s+(\\d+)", Path("/proc/self/status").read_text())[1])
kind, path = sys.argv[1], Path(sys.argv[2])
t0 = time.perf_counter()
if kind == "json":
    import json
else:
    from postflightd.project.scan_state import load_state_for_scan
t1 = time.perf_counter()
before = hwm()
t2 = time.perf_counter()
if kind == "json":
    n = len(json.loads(path.read_bytes())["active_projects"])
elif kind == "full":
    n = len(load_state_for_scan(path, whole_min=1 << 62).tasks)
elif kind == "whole":
    n = len(load_state_for_scan(path, whole_min=0).tasks)
else:
    n = len(load_state_for_scan(path).tasks)
t3 = time.perf_counter()
peak = hwm()
print((t1 - t0) * 1e3, (t3 - t2) * 1e3, peak - before, n)
"""


def write_files(tmp: Path, tasks: int) -> dict[str, Path]:
    projects = [_fat_task(n, f"task_{n}") for n in range(1, tasks + 1)]
    state = {"next_project_number": tasks + 1, "active_projects": projects}
    plain = tmp / "ascii.json"
    plain.write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
    for task in projects:
        task["description"] = "Tâche — " + task["description"] + " ✓"
    wide = tmp / "utf8.json"
    wide.write_text(json.dumps(state, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return {"ASCII": plain, "non-ASCII": wide}


def measure(kind: str, path: Path, src: Path, tasks: int) -> tuple[float, float, float]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run(
        [sys.executable, "-c", CODE, kind, str(path)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    imported, read, peak_kb, n = done.stdout.split()
    assert int(n) == tasks, done.stdout
    return float(imported), float(read), float(peak_kb) / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--baseline", metavar="SRC", help="also time this src/ (e.g. main's)")
    args = parser.parse_args()
    print(describe())
    variants: list[tuple[str, str, Path]] = [
        ("msgspec", "whole", SRC),
        ("the full reader", "full", SRC),
    ]
    if args.baseline:
        variants.append((f"--baseline {args.baseline}", "default", Path(args.baseline)))
    variants.append(("json.loads of the bytes", "json", SRC))
    with tempfile.TemporaryDirectory(prefix="postflightd-state-bench-") as tmp:
        for label, path in write_files(Path(tmp), args.tasks).items():
            size = path.stat().st_size / 1e6
            print(f"\n{label} state.json, {args.tasks} tasks, {size:.1f} MB ({args.runs} runs):")
            results: dict[str, list[tuple[float, float, float]]] = {v[0]: [] for v in variants}
            for _ in range(args.runs):
                for name, kind, src in variants:  # alternating: each sees the same load
                    results[name].append(measure(kind, path, src, args.tasks))
            for name, rows in results.items():
                imported, read, peak = (statistics.median(r[i] for r in rows) for i in range(3))
                print(
                    f"  {name:<34} read {read:6.1f} ms   import {imported:5.1f} ms   "
                    f"peak +{peak:5.1f} MB"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
