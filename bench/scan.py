#!/usr/bin/env python3
"""Benchmark: `postflightd scan` of 10,000 metadata files vs. the floor and the bash + jq
status quo.

Generates a project with N task directories under a temp dir (mixed valid and invalid
metadata files, an N-task state.json of about 1.6 KB a task: 16 MB at 10,000 tasks, the
artifacts the valid files list), then times, as whole processes and on a warm page cache:

* `postflightd scan --format json ROOT`         (median of --runs runs)
* the floor: `python -c FLOOR ROOT`, a plain loop that opens, reads and `json.loads` the
  same metadata files and state.json and validates nothing (what any Python program that
  looks at the files pays, start-up included); run alternately with the scan, so that both
  see the same load, and the ratio scan / floor is printed (target <= 2x)
* a bash loop doing `jq empty` + one `jq -r .status` per file, the postflight reading that
  workflows do today (median of --jq-runs runs; skipped when jq is not installed)
* `postflightd --version`                        (median of --runs * 2 runs)

and prints the figures, their targets and the machine it ran on.

    .venv/bin/python bench/scan.py [--tasks 10000] [--runs 5] [--jq-runs 3] [--keep]

``--vs-jsonschema 1000,10000`` instead compares with check-jsonschema: for each size, a project
with that many task directories, 5 % invalid metadata files and a fat state.json (about
1.6 KB a task: 16 MB at 10,000 tasks), then paired, alternating runs of
`postflightd scan --format json ROOT` and
`check-jsonschema --schemafile <postflightd schema> specs/*/.return-meta.json`, each as a
whole process whose wall time, CPU time (user + system) and peak RSS (wait4's ru_maxrss) are
recorded; medians are printed, the floor's too, and where the scan's time goes (the same scan
of a project with no metadata file: start-up; of one holding only the state.json: start-up and
state.json; the rest: the files). check-jsonschema is looked for beside this
interpreter, then on PATH (a bench-only `pip install check-jsonschema` into .venv; not a
project dependency).
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
from collections import Counter
from pathlib import Path
from typing import Any, Final

from machine import describe

SCAN_TARGET_S = 2.0
FLOOR_RATIO_TARGET = 2.0
SPEEDUP_TARGET = 10.0
VERSION_TARGET_S = 0.250
SESSION = "sess_1736700000_abc123"

JQ_LOOP = r"""
shopt -s nullglob
invalid=0
for f in "$1"/specs/*/.return-meta.json; do
  if ! jq empty "$f" 2>/dev/null; then
    invalid=$((invalid + 1))
    continue
  fi
  status=$(jq -r '.status' "$f")
done
echo "$invalid"
"""


#: The floor: what reading the same files costs in Python, validating nothing.
FLOOR = r"""
import json, os, sys
specs = os.path.join(sys.argv[1], "specs")
for entry in os.scandir(specs):
    if entry.is_dir(follow_symlinks=False):
        try:
            with open(os.path.join(entry.path, ".return-meta.json"), "rb") as f:
                data = f.read()
        except OSError:
            continue
        try:
            json.loads(data)
        except ValueError:
            pass
with open(os.path.join(specs, "state.json"), "rb") as f:
    json.loads(f.read())
"""


def floor_argv(root: Path) -> list[str]:
    return [sys.executable, "-c", FLOOR, str(root)]


def _metadata(kind: str) -> dict[str, Any]:
    return {
        "session_id": SESSION,
        "agent_type": f"general-{kind}-agent",
        "duration_seconds": 180,
        "delegation_depth": 1,
        "delegation_path": ["orchestrator", kind, f"general-{kind}-agent"],
    }


def _document(n: int, task_dir: str, variant: str) -> tuple[str, list[str]]:
    """(file text, artifact paths to create) for one task of the given variant."""
    report = f"specs/{task_dir}/reports/research-001.md"
    artifact = {"type": "report", "path": report, "summary": "Research report"}
    doc: dict[str, Any] = {
        "status": "researched",
        "artifacts": [artifact],
        "next_steps": f"Run /plan {n}",
        "metadata": _metadata("research"),
    }
    created = [report]
    if variant == "implemented_no_completion":  # PF303
        doc["status"] = "implemented"
        doc["metadata"] = _metadata("implement")
    elif variant == "truncated":  # PF102
        return json.dumps(doc, indent=2)[:57], []
    elif variant == "completed":  # PF203
        doc["status"] = "completed"
    elif variant == "in_progress":
        doc = {
            "status": "in_progress",
            "started_at": "2026-01-28T10:30:00Z",  # long past: PF602, stuck
            "artifacts": [],
            "partial_progress": {"stage": "initializing", "details": "Agent started"},
            "metadata": _metadata("research"),
        }
        created = []
    elif variant == "unknown_fields":  # PF205, valid
        doc["reviewer"] = "someone"
        doc["metadata"]["phase_count"] = 4
    elif variant == "missing_artifact":  # PF502
        created = []
    elif variant == "wrong_types":  # PF201
        doc["metadata"]["delegation_depth"] = "1"
    return json.dumps(doc, indent=2) + "\n", created


#: (variant, share of the tasks); the rest are valid.
VARIANTS = (
    ("implemented_no_completion", 0.05),
    ("truncated", 0.03),
    ("completed", 0.03),
    ("in_progress", 0.05),
    ("unknown_fields", 0.05),
    ("missing_artifact", 0.05),
    ("wrong_types", 0.04),
)


def _variant(n: int) -> str:
    # Deterministic spread of the variants over the task numbers.
    point = (n * 7919 % 1000) / 1000
    edge = 0.0
    for name, share in VARIANTS:
        edge += share
        if point < edge:
            return name
    return "valid"


def generate(root: Path, tasks: int) -> Counter[str]:
    specs = root / "specs"
    specs.mkdir(parents=True)
    counts: Counter[str] = Counter()
    projects = []
    for n in range(1, tasks + 1):
        slug = f"task_{n}"
        task_dir = f"{n:03d}_{slug}" if n % 2 else f"{n}_{slug}"
        variant = _variant(n)
        counts[variant] += 1
        text, artifacts = _document(n, task_dir, variant)
        directory = specs / task_dir
        directory.mkdir()
        (directory / ".return-meta.json").write_text(text, encoding="utf-8")
        for rel in artifacts:
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"# Research for task {n}\n", encoding="utf-8")
        projects.append(_fat_task(n, slug))
    state = {"next_project_number": tasks + 1, "active_projects": projects}
    (specs / "state.json").write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
    return counts


#: The comparison's tree: 5 % invalid, 5 % valid with unknown fields, nothing stuck (so that the
#: output does not depend on the clock and can be compared byte for byte).
LEAN_VARIANTS = (
    ("implemented_no_completion", 0.01),
    ("truncated", 0.01),
    ("completed", 0.01),
    ("missing_artifact", 0.01),
    ("wrong_types", 0.01),
    ("unknown_fields", 0.05),
)


def _lean_variant(n: int) -> str:
    point = (n * 7919 % 1000) / 1000
    edge = 0.0
    for name, share in LEAN_VARIANTS:
        edge += share
        if point < edge:
            return name
    return "valid"


def _fat_task(n: int, slug: str) -> dict[str, Any]:
    """A state.json task entry of about 1.6 KB, as a long-lived project's entries are."""
    return {
        "project_number": n,
        "project_name": slug,
        "status": "researching",
        "language": "general" if n % 5 else "meta",
        "priority": "medium",
        "effort": "2 hours",
        "session_id": SESSION,
        "created": "2026-01-08T14:30:00Z",
        "last_updated": "2026-01-08T14:30:00Z",
        "description": f"Task {n}: " + "prove the completeness theorem for the fragment; " * 6,
        "artifacts": [
            {
                "type": kind,
                "path": f"specs/{n}_{slug}/{kind}s/{kind}-00{i}.md",
                "summary": f"{kind.title()} {i} for task {n}, kept for the record",
            }
            for i, kind in enumerate(("report", "plan", "summary", "report", "plan"), 1)
        ],
        "dependencies": [max(1, n - 1), max(1, n - 2)],
        "completion_summary": None,
    }


def generate_lean(root: Path, tasks: int) -> Counter[str]:
    """The comparison's tree: ``tasks`` task directories, 5 % invalid, a fat state.json."""
    specs = root / "specs"
    specs.mkdir(parents=True)
    counts: Counter[str] = Counter()
    projects = []
    for n in range(1, tasks + 1):
        slug = f"task_{n}"
        task_dir = f"{n:03d}_{slug}" if n % 2 else f"{n}_{slug}"
        variant = _lean_variant(n)
        counts[variant] += 1
        text, artifacts = _document(n, task_dir, variant)
        directory = specs / task_dir
        directory.mkdir()
        (directory / ".return-meta.json").write_text(text, encoding="utf-8")
        for rel in artifacts:
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"# Research for task {n}\n", encoding="utf-8")
        projects.append(_fat_task(n, slug))
    state = {"next_project_number": tasks + 1, "active_projects": projects}
    (specs / "state.json").write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
    return counts


#: Every timed process runs with its bytecode compiled, as an installed package has it (an
#: untimed first run writes it): with PYTHONDONTWRITEBYTECODE set, a source tree whose
#: modules changed since its last compile, or a --baseline checkout that never ran, would
#: compile them again in every timed run.
ENV: Final = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def run_measured(
    argv: list[str],
    ok_codes: tuple[int, ...],
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MB) of one whole process.

    Through GNU time when it is installed: a child forked from this (large) process starts
    with this process's peak RSS on Linux, so wait4's ru_maxrss would report ours, not its.
    """
    gnu_time = Path("/usr/bin/time")
    with tempfile.NamedTemporaryFile("r", prefix="postflightd-bench-time-") as report:
        full = [str(gnu_time), "-f", "%U %S %M", "-o", report.name, *argv]
        start = time.perf_counter()
        done = subprocess.run(
            full if gnu_time.exists() else argv,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=ENV if env is None else env,
            check=False,
        )
        wall = time.perf_counter() - start
        if done.returncode not in ok_codes:
            sys.exit(f"{argv[:3]}... exited {done.returncode}: {done.stderr.decode()[-500:]}")
        if gnu_time.exists():
            user, system, rss_kb = report.read().split()[-3:]
            return wall, float(user) + float(system), int(rss_kb) / 1024
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)  # cumulative: a rough fallback
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def find_check_jsonschema() -> str | None:
    beside = Path(sys.executable).with_name("check-jsonschema")
    return str(beside) if beside.exists() else shutil.which("check-jsonschema")


def _med(rows: list[tuple[float, float, float]], i: int) -> float:
    return statistics.median(r[i] for r in rows)


def compare_jsonschema(
    sizes: list[int], runs: int, keep: bool, cpus: str | None, baseline: str | None = None
) -> int:
    """Paired, alternating runs against check-jsonschema, per size."""
    print(f"machine: {describe()}")
    checker = find_check_jsonschema()
    cmd = postflightd_command()
    if cpus:
        cmd = ["taskset", "-c", cpus, *cmd]
        print(f"postflightd pinned to CPUs {cpus} (taskset -c {cpus})")
    if checker is not None:
        version = subprocess.run(
            [checker, "--version"], capture_output=True, text=True, check=False
        )
        print(f"checker: {version.stdout.strip()}")
    else:
        print("check-jsonschema: not installed (pip install check-jsonschema); postflightd only")
    for size in sizes:
        tmp = Path(tempfile.mkdtemp(prefix="postflightd-bench-"))
        try:
            root = tmp / "project"
            counts = generate_lean(root, size)
            state_mb = (root / "specs" / "state.json").stat().st_size / 1e6
            schema = tmp / "schema.json"
            schema.write_bytes(
                subprocess.run(
                    [*postflightd_command(), "schema"], capture_output=True, check=True
                ).stdout
            )
            print()
            print(
                f"{size} task directories, state.json {state_mb:.1f} MB, variants: "
                + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
            )
            scan_argv = [*cmd, "scan", "--format", "json", str(root)]
            done = subprocess.run(scan_argv, capture_output=True, check=False)
            summary = json.loads(done.stdout)["summary"]
            print(f"scan summary: {summary}")
            files = sorted(
                str(p.relative_to(root)) for p in (root / "specs").glob("*/.return-meta.json")
            )
            check_argv = (
                [checker, "--schemafile", str(schema), *files] if checker is not None else None
            )
            if check_argv is not None and len("".join(files)) + 4 * len(files) > 1_500_000:
                print("check-jsonschema: skipped (the file list exceeds the argument limit)")
                check_argv = None
            # Where the scan's time goes: the same scan of a project with no metadata file
            # (start-up alone), then of one with only this state.json (start-up + state.json).
            empty, state_only = tmp / "empty", tmp / "state_only"
            (empty / "specs").mkdir(parents=True)
            (empty / "specs" / "state.json").write_text('{"active_projects": []}\n')
            (state_only / "specs").mkdir(parents=True)
            shutil.copy(root / "specs" / "state.json", state_only / "specs" / "state.json")
            parts: dict[Path, list[tuple[float, float, float]]] = {empty: [], state_only: []}
            ours: list[tuple[float, float, float]] = []
            floor: list[tuple[float, float, float]] = []
            theirs: list[tuple[float, float, float]] = []
            before: list[tuple[float, float, float]] = []
            # --baseline SRC: the same scan by another checkout's src/ (e.g. main's), paired.
            base_env = {**ENV, "PYTHONPATH": baseline} if baseline else None
            base_argv = [sys.executable, "-m", "postflightd", "scan", "--format", "json", str(root)]
            if cpus:
                base_argv = ["taskset", "-c", cpus, *base_argv]
            run_measured(scan_argv, (1,))  # untimed: writes the bytecode
            if base_env is not None:
                run_measured(base_argv, (1,), env=base_env)
            if check_argv is not None:  # warm its caches too, untimed
                run_measured(check_argv, (0, 1), cwd=root)
            for _ in range(runs):
                ours.append(run_measured(scan_argv, (1,)))
                floor.append(run_measured(floor_argv(root), (0,)))
                if base_env is not None:
                    before.append(run_measured(base_argv, (1,), env=base_env))
                if check_argv is not None:
                    theirs.append(run_measured(check_argv, (0, 1), cwd=root))
                for part, rows in parts.items():
                    rows.append(run_measured([*cmd, "scan", "--format", "json", str(part)], (0,)))
            for name, rows in (
                ("postflightd scan --format json", ours),
                ("  the same, --baseline src", before),
                ("floor (read + json.loads)", floor),
                ("check-jsonschema", theirs),
            ):
                if rows:
                    print(
                        f"  {name:<32} wall {_fmt(_med(rows, 0))}  CPU {_fmt(_med(rows, 1))}  "
                        f"peak {_med(rows, 2):.0f} MB  (median of {len(rows)}; wall "
                        f"min {_fmt(min(r[0] for r in rows))} max {_fmt(max(r[0] for r in rows))})"
                    )
            start, with_state = _med(parts[empty], 0), _med(parts[state_only], 0)
            print(
                f"  where the scan's wall time goes: start-up {_fmt(start)} (a project with no "
                f"metadata file), state.json {_fmt(with_state - start)}, the {size} files "
                f"{_fmt(_med(ours, 0) - with_state)}; CPU: start-up "
                f"{_fmt(_med(parts[empty], 1))}, the whole scan {_fmt(_med(ours, 1))}"
            )
            print(
                f"  scan / floor (wall): {_med(ours, 0) / _med(floor, 0):.2f}x"
                f"  target <= {FLOOR_RATIO_TARGET:.0f}x"
            )
            if before:
                print(f"  --baseline / floor (wall): {_med(before, 0) / _med(floor, 0):.2f}x")
            if theirs:
                print(f"  speed-up (wall): {_med(theirs, 0) / _med(ours, 0):.1f}x")
            if before:
                print(
                    f"  vs --baseline: wall {_med(before, 0) / _med(ours, 0):.2f}x faster, "
                    f"peak {_med(ours, 2) - _med(before, 2):+.0f} MB"
                )
        finally:
            if keep:
                print(f"kept: {tmp}")
            else:
                shutil.rmtree(tmp, ignore_errors=True)
    return 0


def postflightd_command() -> list[str]:
    """The installed console script beside this interpreter, else ``python -m postflightd``."""
    script = Path(sys.executable).with_name("postflightd")
    return [str(script)] if script.exists() else [sys.executable, "-m", "postflightd"]


def time_process(
    argv: list[str], runs: int, ok_codes: tuple[int, ...], env: dict[str, str] | None = None
) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run(
            argv,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=ENV if env is None else env,
            check=False,
        )
        times.append(time.perf_counter() - start)
        if done.returncode not in ok_codes:
            sys.exit(f"{argv[:3]}... exited {done.returncode}: {done.stderr.decode()[-500:]}")
    return times


def _fmt(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 10 else f"{seconds:.1f} s"


def _verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5, help="timed scans (median)")
    parser.add_argument(
        "--jq-runs", type=int, default=1, help="timed jq loops (median; 0 skips; ~9 min each here)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the generated project")
    parser.add_argument(
        "--vs-jsonschema",
        metavar="SIZES",
        help="compare with check-jsonschema instead: e.g. 1000,10000 (paired runs)",
    )
    parser.add_argument("--cpus", help="with --vs-jsonschema: taskset -c CPUS for postflightd")
    parser.add_argument(
        "--baseline", metavar="SRC", help="also time the scan of this src/ (e.g. main's), paired"
    )
    args = parser.parse_args()
    if args.vs_jsonschema:
        sizes = [int(x) for x in args.vs_jsonschema.split(",")]
        return compare_jsonschema(sizes, args.runs, args.keep, args.cpus, args.baseline)

    tmp = Path(tempfile.mkdtemp(prefix="postflightd-bench-"))
    try:
        root = tmp / "project"
        start = time.perf_counter()
        counts = generate(root, args.tasks)
        print(f"machine: {describe()}")
        print(
            f"data: {args.tasks} task directories under {tmp}, generated in "
            f"{time.perf_counter() - start:.1f} s; variants: "
            + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        )

        cmd = postflightd_command()
        scan_argv = [*cmd, "scan", "--format", "json", str(root)]
        # One untimed run warms the page cache and checks the result is what was generated.
        done = subprocess.run(scan_argv, capture_output=True, check=False)
        report = json.loads(done.stdout)
        if done.returncode != 1 or report["summary"]["files"] != args.tasks:
            sys.exit(f"unexpected scan result: exit {done.returncode}, {report['summary']}")
        print(f"scan summary: {report['summary']}")

        time_process(floor_argv(root), 1, (0,))  # warm, untimed
        scan_times: list[float] = []
        floor_times: list[float] = []
        base_times: list[float] = []
        # --baseline SRC: the same scan by another checkout's src/ (e.g. main's), paired.
        base_env = {**ENV, "PYTHONPATH": args.baseline} if args.baseline else None
        base_argv = [sys.executable, "-m", "postflightd", "scan", "--format", "json", str(root)]
        time_process(scan_argv, 1, (1,))  # untimed: writes the bytecode
        if base_env is not None:
            time_process(base_argv, 1, (1,), base_env)
        for _ in range(args.runs):  # alternately: all see the same load
            scan_times += time_process(scan_argv, 1, (1,))
            floor_times += time_process(floor_argv(root), 1, (0,))
            if base_env is not None:
                base_times += time_process(base_argv, 1, (1,), base_env)
        scan_s = statistics.median(scan_times)
        floor_s = statistics.median(floor_times)
        version_times = time_process([*cmd, "--version"], args.runs * 2, (0,))
        version_s = statistics.median(version_times)

        print()
        print(
            f"postflightd scan --format json ({args.runs} runs): median {_fmt(scan_s)}"
            f"  [min {_fmt(min(scan_times))}, max {_fmt(max(scan_times))}]"
            f"  target <= {_fmt(SCAN_TARGET_S)}: {_verdict(scan_s <= SCAN_TARGET_S)}"
        )
        print(
            f"floor, a Python loop reading and parsing the same files ({args.runs} runs): "
            f"median {_fmt(floor_s)}  [min {_fmt(min(floor_times))}, "
            f"max {_fmt(max(floor_times))}]"
        )
        ratio = scan_s / floor_s
        print(
            f"scan / floor: {ratio:.2f}x  target <= {FLOOR_RATIO_TARGET:.0f}x: "
            f"{_verdict(ratio <= FLOOR_RATIO_TARGET)}"
        )
        if base_times:
            base_s = statistics.median(base_times)
            print(
                f"--baseline {args.baseline} ({args.runs} runs): median {_fmt(base_s)}  "
                f"[min {_fmt(min(base_times))}, max {_fmt(max(base_times))}]; "
                f"/ floor: {base_s / floor_s:.2f}x"
            )
        print(
            f"postflightd --version ({args.runs * 2} runs): median {_fmt(version_s)}"
            f"  target <= {_fmt(VERSION_TARGET_S)}: {_verdict(version_s <= VERSION_TARGET_S)}"
        )

        jq = shutil.which("jq")
        bash = shutil.which("bash")
        if args.jq_runs <= 0:
            print("bash + jq loop: skipped (--jq-runs 0)")
        elif jq is None or bash is None:
            print("bash + jq loop: skipped (jq or bash not installed)")
        else:
            version = subprocess.run(
                [jq, "--version"], capture_output=True, text=True, check=False
            ).stdout
            loop_argv = [bash, "-c", JQ_LOOP, "jq-loop", str(root)]
            jq_times = time_process(loop_argv, args.jq_runs, (0,))
            jq_s = statistics.median(jq_times)
            speedup = jq_s / scan_s
            print(
                f"bash + {version.strip()} loop, jq empty + jq -r .status per file "
                f"({args.jq_runs} runs): median {_fmt(jq_s)}"
            )
            print(
                f"speed-up of postflightd scan over the jq loop: {speedup:.1f}x"
                f"  target >= {SPEEDUP_TARGET:.0f}x: {_verdict(speedup >= SPEEDUP_TARGET)}"
            )
        print("(check-jsonschema, a generic JSON-schema CLI: compared by --vs-jsonschema)")
    finally:
        if args.keep:
            print(f"kept: {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
