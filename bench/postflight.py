#!/usr/bin/env python3
"""Benchmark: `postflightd scan --apply` of a burst of 1,000 final metadata files vs. bash + jq.

Generates, under a temp dir, a project whose specs/state.json lists N tasks (several hundred
KB, 2-space indent, a few artifacts per task), a TODO.md with one section per task and, in
every task directory, a valid final `.return-meta.json` (a mix of researched / planned /
implemented) whose artifacts exist. Then times, as whole processes, each run on a fresh copy
of that project:

* `postflightd scan --apply ROOT`                 (group commit; median of --runs runs)
* the same with `[postflight] sync_todo = false`  (state.json only; median of --runs runs)
* the status-quo bash + jq postflight             (median of --jq-runs runs; skipped when jq
  is not installed): per file `jq -r` for the status, the artifact and the session, one
  `jq ... state.json > tmp && mv tmp state.json`, then `rm`. It does not touch TODO.md,
  errors.json or a journal, so it does less work than postflightd.

Every run is checked: all N metadata files are gone and all N tasks changed status. The
journal and config lookups point at a temp dir (XDG_STATE_HOME, XDG_CONFIG_HOME).

`--todo-forms real` writes the task sections of TODO.md in the forms real projects use
(label lines, sub-lists with summaries, bare links under long labels, an Artifacts list,
links relative to specs/; tests/postflight/test_todo_forms.py has one of each), one form per
task in turn, and checks that every task's new artifact was linked in its section; the
default, `plain`, writes one label line per type with root-relative links.

    .venv/bin/python bench/postflight.py [--tasks 1000] [--runs 5] [--jq-runs 1] [--keep]
                                         [--todo-forms plain|real]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from machine import describe

APPLY_TARGET_S = 3.0
SESSION_PREFIX = "sess_1736700000_"

#: file status -> (state.json status before, state.json status after, TODO marker before)
KINDS = {
    "researched": ("researching", "researched", "RESEARCHING"),
    "planned": ("planning", "planned", "PLANNING"),
    "implemented": ("implementing", "completed", "IMPLEMENTING"),
}
#: file status -> (delegation_path[1], artifact type, artifact dir, artifact file name)
OPERATIONS = {
    "researched": ("research", "report", "reports", "research-001.md"),
    "planned": ("plan", "plan", "plans", "implementation-001.md"),
    "implemented": ("implement", "summary", "summaries", "implementation-summary-001.md"),
}
LANGUAGES = ("general", "python", "lean4", "neovim", "latex")

# $1: project root. Bash + jq, one file at a time, as the workflows' prompt text does it.
JQ_POSTFLIGHT = r"""
set -euo pipefail
shopt -s nullglob
state="$1/specs/state.json"
for f in "$1"/specs/*/.return-meta.json; do
  dir=$(basename "$(dirname "$f")")
  num=$((10#${dir%%_*}))
  status=$(jq -r '.status' "$f")
  case "$status" in
    researched) new=researched; link=research ;;
    planned) new=planned; link=plan ;;
    implemented) new=completed; link=summary ;;
    *) continue ;;
  esac
  path=$(jq -r '.artifacts[0].path' "$f")
  summary=$(jq -r '.artifacts[0].summary' "$f")
  session=$(jq -r '.metadata.session_id' "$f")
  now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  jq --argjson n "$num" --arg st "$new" --arg ts "$now" --arg sid "$session" \
     --arg t "$link" --arg p "$path" --arg s "$summary" \
     '(.active_projects[] | select(.project_number == $n)) |=
        (.status = $st | .last_updated = $ts | .session_id = $sid
         | .artifacts = ([.artifacts[] | select(.path != $p)]
                         + [{type: $t, path: $p, summary: $s}]))' \
     "$state" > "$state.tmp" && mv "$state.tmp" "$state"
  rm "$f"
done
"""


def _session(n: int) -> str:
    """``sess_1736700000_abc123``-style: a distinct 6-character base-36 suffix per task."""
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    value, suffix = n * 7919 + 36**5, ""
    for _ in range(6):
        value, rest = divmod(value, 36)
        suffix = digits[rest] + suffix
    return SESSION_PREFIX + suffix


def _kind(n: int) -> str:
    return ("researched", "planned", "implemented")[n % 3]


def _prior_artifacts(kind: str, task_dir: str) -> list[dict[str, str]]:
    """Artifacts a task of this kind already lists in state.json before the run."""
    base = f"specs/{task_dir}"
    research = {
        "type": "research",
        "path": f"{base}/reports/research-000.md",
        "summary": "Initial survey of the codebase and the open issues",
    }
    plan = {
        "type": "plan",
        "path": f"{base}/plans/implementation-000.md",
        "summary": "First draft plan: 4 phases, 3 hours (superseded)",
    }
    return [research, plan] if kind == "implemented" else [research]


def _task_entry(n: int, slug: str, task_dir: str, kind: str) -> dict[str, Any]:
    before = KINDS[kind][0]
    entry: dict[str, Any] = {
        "project_number": n,
        "project_name": slug,
        "status": before,
        "language": LANGUAGES[n % len(LANGUAGES)],
        "priority": ("low", "medium", "high")[n % 3],
        "effort": f"{1 + n % 6} hours",
        "description": f"Task {n}: {slug.replace('_', ' ')}, with tests and docs",
        "session_id": _session(n),
        "last_updated": "2026-01-08T14:30:00Z",
        "dependencies": [n - 1] if n > 1 and n % 4 == 0 else [],
        "artifacts": _prior_artifacts(kind, task_dir),
    }
    if kind != "researched":
        entry["researched"] = "2026-01-05T10:00:00Z"
    if kind == "implemented":
        entry["planned"] = "2026-01-06T11:00:00Z"
    return entry


def _metadata_doc(n: int, task_dir: str, kind: str) -> tuple[dict[str, Any], str]:
    """(the final metadata document, the artifact path it lists) for task n."""
    operation, art_type, art_dir, art_name = OPERATIONS[kind]
    agent = f"general-{operation}-agent"
    rel = f"specs/{task_dir}/{art_dir}/{art_name}"
    doc: dict[str, Any] = {
        "status": kind,
        "artifacts": [{"type": art_type, "path": rel, "summary": f"{operation} output"}],
        "next_steps": f"Run the next step for task {n}",
        "metadata": {
            "session_id": _session(n),
            "agent_type": agent,
            "duration_seconds": 120 + n % 600,
            "delegation_depth": 1,
            "delegation_path": ["orchestrator", operation, agent],
        },
    }
    if kind == "researched":
        doc["metadata"]["findings_count"] = 1 + n % 9
    if kind == "implemented":
        doc["metadata"]["phases_completed"] = 4
        doc["metadata"]["phases_total"] = 4
        doc["completion_data"] = {
            "completion_summary": f"Implemented task {n}: 4 phases, tests pass",
        }
    return doc, rel


def _link_lines(n: int, task_dir: str, artifacts: list[dict[str, str]], form: str) -> list[str]:
    """TODO.md link lines for the task's prior artifacts, in the plain or a real form."""
    paths = [a["path"] for a in artifacts]
    names = [Path(p).name for p in paths]
    specs_rel = [p.removeprefix("specs/") for p in paths]
    task_rel = [p.removeprefix(f"specs/{task_dir}/") for p in paths]
    plan = len(paths) > 1
    shape = (
        "plain" if form == "plain" else ("label", "sub-list", "bare", "artifacts", "specs")[n % 5]
    )
    if shape in {"plain", "label"}:
        lines = [f"- **Research**: [{names[0]}]({paths[0]})"]
        return lines + ([f"- **Plan**: [{names[1]}]({paths[1]})"] if plan else [])
    if shape == "sub-list":
        lines = ["- **Research**:", f"  - [{names[0]}]({specs_rel[0]}) — initial survey"]
        return lines + ([f"- **Plan**: [{names[1]}]({specs_rel[1]})"] if plan else [])
    if shape == "bare":
        lines = [f"- **Research Report**: [{paths[0]}]"]
        return lines + ([f"- **Implementation Plan**: [{paths[1]}]"] if plan else [])
    if shape == "artifacts":
        return ["- **Artifacts**:", *(f"  - {p}" for p in task_rel)]
    return [f"- **Research**: [{names[0]}]({specs_rel[0]})"] + (
        [f"- **Plans**: [{names[1]}]({specs_rel[1]})"] if plan else []
    )


def generate(root: Path, tasks: int, todo_forms: str = "plain") -> Counter[str]:
    specs = root / "specs"
    specs.mkdir(parents=True)
    counts: Counter[str] = Counter()
    projects = []
    todo = ["# TODO", "", "## Tasks", ""]
    for n in range(1, tasks + 1):
        kind = _kind(n)
        counts[kind] += 1
        slug = f"task_{n}_bench_item"
        task_dir = f"{n:03d}_{slug}"
        directory = specs / task_dir
        entry = _task_entry(n, slug, task_dir, kind)
        projects.append(entry)
        doc, rel = _metadata_doc(n, task_dir, kind)
        for path in [rel, *(a["path"] for a in entry["artifacts"])]:
            target = root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(f"# {Path(path).stem} for task {n}\n\nBody.\n", encoding="utf-8")
        (directory / ".return-meta.json").write_text(
            json.dumps(doc, indent=2) + "\n", encoding="utf-8"
        )
        todo += [
            f"### {n}. {slug.replace('_', ' ').capitalize()}",
            f"- **Effort**: {entry['effort']}",
            f"- **Status**: [{KINDS[kind][2]}]",
            f"- **Language**: {entry['language']}",
            *_link_lines(n, task_dir, entry["artifacts"], todo_forms),
            "",
        ]
    state = {"next_project_number": tasks + 1, "active_projects": projects}
    (specs / "state.json").write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
    (specs / "TODO.md").write_text("\n".join(todo), encoding="utf-8")
    return counts


def postflightd_command() -> list[str]:
    """The installed console script beside this interpreter, else ``python -m postflightd``."""
    script = Path(sys.executable).with_name("postflightd")
    return [str(script)] if script.exists() else [sys.executable, "-m", "postflightd"]


def isolated_env(home: Path) -> dict[str, str]:
    """The environment with the journal, config and cache lookups under ``home``."""
    env = dict(os.environ)
    for var, sub in (
        ("XDG_STATE_HOME", "state"),
        ("XDG_CONFIG_HOME", "config"),
        ("XDG_CACHE_HOME", "cache"),
    ):
        env[var] = str(home / sub)
    env.pop("POSTFLIGHTD_CONFIG", None)
    env.pop("NOTIFY_SOCKET", None)
    return env


def check_linked(root: Path, label: str) -> None:
    """Exit with a clear message unless every task's section links its new artifact."""
    text = (root / "specs" / "TODO.md").read_text(encoding="utf-8")
    missing = []
    for section in text.split("\n### ")[1:]:
        n = int(section.split(".", 1)[0])
        if OPERATIONS[_kind(n)][3] not in section:
            missing.append(n)
    if missing:
        sys.exit(f"FAILED ({label}): TODO.md does not link the new artifact of tasks {missing[:5]}")


def check_applied(root: Path, before: dict[int, str], label: str) -> None:
    """Exit with a clear message unless every metadata file is gone and every task changed."""
    left = sorted((root / "specs").glob("*/.return-meta.json"))
    state = json.loads((root / "specs" / "state.json").read_text(encoding="utf-8"))
    changed = sum(1 for p in state["active_projects"] if p["status"] != before[p["project_number"]])
    if left or changed != len(before):
        sys.exit(
            f"FAILED ({label}): {len(left)} metadata files left (e.g. "
            f"{[str(p.relative_to(root)) for p in left[:3]]}), {changed} of {len(before)} tasks "
            "changed status; expected 0 files left and every task changed"
        )


def timed_runs(
    template: Path,
    work: Path,
    argv_for: Any,
    runs: int,
    env: dict[str, str],
    before: dict[int, str],
    label: str,
    setup: Any = None,
) -> list[float]:
    """Time ``argv_for(root)`` ``runs`` times, each on a fresh copy of ``template``."""
    times = []
    for i in range(runs):
        root = work / f"{label}-{i}"
        shutil.copytree(template, root, symlinks=True)
        if setup is not None:
            setup(root)
        argv = argv_for(root)
        start = time.perf_counter()
        done = subprocess.run(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, check=False
        )
        times.append(time.perf_counter() - start)
        if done.returncode != 0:
            sys.exit(
                f"FAILED ({label}): {argv[:3]}... exited {done.returncode}: "
                f"{done.stderr.decode(errors='replace')[-800:]}"
            )
        check_applied(root, before, label)
        if label == "apply":
            check_linked(root, label)
        shutil.rmtree(root, ignore_errors=True)
    return times


def _fmt(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 10 else f"{seconds:.1f} s"


def _runs(times: list[float]) -> str:
    return "[" + ", ".join(_fmt(t) for t in times) + "]"


def _verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def _no_todo_sync(root: Path) -> None:
    (root / ".postflightd.toml").write_text("[postflight]\nsync_todo = false\n", encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5, help="timed scan --apply runs (median)")
    parser.add_argument("--jq-runs", type=int, default=1, help="timed bash + jq runs (median)")
    parser.add_argument("--keep", action="store_true", help="keep the generated project")
    parser.add_argument(
        "--todo-forms",
        choices=["plain", "real"],
        default="plain",
        help="TODO.md link lines: one label line per type, or the real forms, one per task in turn",
    )
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="postflightd-bench-"))
    try:
        template = tmp / "template"
        work = tmp / "runs"
        work.mkdir()
        env = isolated_env(tmp / "home")
        start = time.perf_counter()
        counts = generate(template, args.tasks, args.todo_forms)
        state_bytes = (template / "specs" / "state.json").stat().st_size
        todo_bytes = (template / "specs" / "TODO.md").stat().st_size
        before = {
            p["project_number"]: p["status"]
            for p in json.loads((template / "specs" / "state.json").read_text())["active_projects"]
        }
        print(f"machine: {describe()}")
        print(
            f"data: {args.tasks} tasks under {tmp}, generated in "
            f"{time.perf_counter() - start:.1f} s; final files: "
            + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        )
        print(
            f"sizes: state.json {state_bytes:,} bytes ({state_bytes / 1024:.0f} KiB, indent 2), "
            f"TODO.md {todo_bytes:,} bytes ({args.todo_forms} link forms)"
        )

        cmd = postflightd_command()
        # The burst must consist of real applies: a plain scan reports no error on it.
        done = subprocess.run(
            [*cmd, "scan", "--format", "json", str(template)],
            capture_output=True,
            env=env,
            check=False,
        )
        summary = json.loads(done.stdout)["summary"]
        if done.returncode != 0 or summary["errors"] or summary["valid"] != args.tasks:
            sys.exit(
                f"FAILED: the generated tree does not scan clean: exit {done.returncode}, {summary}"
            )
        print(f"pre-check scan summary: {summary}")

        def apply_argv(root: Path) -> list[str]:
            return [*cmd, "scan", "--apply", str(root)]

        apply_times = timed_runs(template, work, apply_argv, args.runs, env, before, "apply")
        apply_s = statistics.median(apply_times)
        nosync_times = timed_runs(
            template, work, apply_argv, args.runs, env, before, "apply-notodo", _no_todo_sync
        )
        nosync_s = statistics.median(nosync_times)

        print()
        print(
            f"postflightd scan --apply, {args.tasks} final files ({args.runs} runs): "
            f"median {_fmt(apply_s)}  {_runs(apply_times)}"
        )
        print(
            f"  target: all applied in <= {_fmt(APPLY_TARGET_S)}: "
            f"{_verdict(apply_s <= APPLY_TARGET_S)}"
        )
        print(
            f"postflightd scan --apply, sync_todo = false ({args.runs} runs): "
            f"median {_fmt(nosync_s)}  {_runs(nosync_times)}"
        )

        jq = shutil.which("jq")
        bash = shutil.which("bash")
        if jq is None or bash is None:
            print("bash + jq postflight: skipped (jq or bash not installed)")
        elif args.jq_runs > 0:
            version = subprocess.run(
                [jq, "--version"], capture_output=True, text=True, check=False
            ).stdout

            def jq_argv(root: Path) -> list[str]:
                return [bash, "-c", JQ_POSTFLIGHT, "jq-postflight", str(root)]

            jq_times = timed_runs(template, work, jq_argv, args.jq_runs, env, before, "jq")
            jq_s = statistics.median(jq_times)
            print(
                f"bash + {version.strip()} postflight, 4 jq + 1 mv + 1 rm per file "
                f"({args.jq_runs} runs): median {_fmt(jq_s)}  {_runs(jq_times)}"
            )
            print(
                "  (state.json only: it does not update TODO.md, errors.json or a journal, "
                "validates nothing and takes no lock, so it does less work than postflightd)"
            )
            print(
                f"ratio bash + jq / postflightd scan --apply: {jq_s / apply_s:.1f}x "
                f"(vs. sync_todo = false: {jq_s / nosync_s:.1f}x)"
            )
    finally:
        if args.keep:
            print(f"kept: {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
