#!/usr/bin/env python3
"""Benchmark: `postflightd hook claude` on a subagent's 1 MB and 50 MB transcripts.

Generates, under a temp dir, a project with one task and a broken `.return-meta.json` (last
written a minute ago, so only the transcript can make it the agent's own), and for each size a
transcript in the agent runtime's JSON-lines format: many lines of other tool calls (Bash,
Read), the agent's own Write of its metadata file near the end. Then times, each checked:

* `postflightd hook claude` as a whole process (start-up included), fed a SubagentStop
  naming that transcript; median of --runs runs. Every answer must block on the file.
* the same hook fed a SubagentStop without a transcript path: the floor (start-up, the
  configuration, validation), so that what reading the transcript adds is seen apart;
* the hook in a project with no metadata file at all, as most stops are (a main agent's turn
  ending, a subagent that writes none): start-up and the configuration, wall and CPU time;
* the transcript read as the hook reads it (`hooks.transcript.read_transcript`, the bounded
  tail), in-process; median of --runs runs.
* the status quo: the whole file read and `json.loads` run on each line, in-process; median
  of --runs runs.

Target: the hook's median <= 300 ms on both sizes. On a loaded machine the floor alone (mostly
importing pydantic and building the models) can exceed it: compare the hook with its floor.

    .venv/bin/python bench/hook.py [--runs 7] [--keep]
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from machine import describe
from postflightd.hooks.transcript import read_transcript

TASK_DIR = "259_prove_completeness"
TARGET_S = 0.300
SIZES = {"1 MB": 1024 * 1024, "50 MB": 50 * 1024 * 1024}


def line(kind: str, content: list[dict[str, Any]], n: int) -> bytes:
    entry = {
        "parentUuid": f"uuid-{n - 1:08d}",
        "isSidechain": True,
        "sessionId": "0b6e5c1e-4c1d-4f57-9c1a-2f7d3c9a1e11",
        "type": kind,
        "message": {"id": f"msg_{n:08d}", "role": kind, "content": content},
        "uuid": f"uuid-{n:08d}",
        "timestamp": "2026-01-08T14:05:00.000Z",
    }
    return (json.dumps(entry) + "\n").encode()


def transcript(path: Path, size: int, meta: Path) -> None:
    """``size`` bytes of other tool calls and their results, the own Write near the end."""
    first = {"type": "user", "timestamp": "2026-01-08T14:00:00.000Z", "message": {"content": "go"}}
    with path.open("wb") as fh:
        fh.write((json.dumps(first) + "\n").encode())
        n, written = 1, 0
        while written < size:
            call = {
                "type": "tool_use",
                "id": f"toolu_{n:08d}",
                "name": "Bash" if n % 2 else "Read",
                "input": {"command": f"grep -rn TODO src/mod{n}.py"}
                if n % 2
                else {"file_path": f"/home/dev/proj/src/mod{n}.py"},
            }
            result = {"type": "tool_result", "tool_use_id": f"toolu_{n:08d}", "content": "x" * 400}
            chunk = line("assistant", [call], n) + line("user", [result], n + 1)
            fh.write(chunk)
            written += len(chunk)
            n += 2
        write = {
            "type": "tool_use",
            "id": "toolu_own",
            "name": "Write",
            "input": {"file_path": str(meta), "content": "{}"},
        }
        fh.write(line("assistant", [write], n))
        fh.write(line("assistant", [{"type": "text", "text": "Done."}], n + 1))


def naive(path: Path) -> int:
    """The status quo: the whole file read, every line parsed."""
    count = 0
    with path.open("rb") as fh:
        for raw in fh:
            try:
                json.loads(raw)
                count += 1
            except ValueError:
                pass
    return count


def median_s(runs: int, once: Callable[[], object]) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        once()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def cpu_s() -> float:
    """CPU seconds of the children waited for so far (user + system)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    print(f"machine: {describe()}")
    work = Path(tempfile.mkdtemp(prefix="postflightd-bench-hook-"))
    env = {
        **os.environ,
        "XDG_STATE_HOME": str(work / "state"),
        "XDG_CONFIG_HOME": str(work / "config"),
    }
    try:
        root = work / "proj"
        specs = root / "specs"
        (specs / TASK_DIR).mkdir(parents=True)
        state = {
            "next_project_number": 260,
            "active_projects": [
                {"project_number": 259, "project_name": "prove_completeness", "status": "x"}
            ],
        }
        (specs / "state.json").write_text(json.dumps(state), encoding="utf-8")
        meta = specs / TASK_DIR / ".return-meta.json"
        meta.write_text('{"status": "researched",\n', encoding="utf-8")
        a_minute_ago = time.time() - 60
        os.utime(meta, (a_minute_ago, a_minute_ago))
        ok = True
        argv = [sys.executable, "-m", "postflightd", "hook", "claude"]
        bare = json.dumps({"cwd": str(root), "hook_event_name": "SubagentStop"}).encode()

        def floor() -> None:
            subprocess.run(argv, input=bare, capture_output=True, env=env, check=True)

        empty = work / "empty"
        (empty / "specs" / "1_task").mkdir(parents=True)
        (empty / "specs" / "state.json").write_text(json.dumps(state), encoding="utf-8")
        stop = json.dumps({"cwd": str(empty), "hook_event_name": "Stop"}).encode()
        cpus: list[float] = []

        def no_file() -> None:
            before = cpu_s()
            out = subprocess.run(argv, input=stop, capture_output=True, env=env, check=True)
            cpus.append(cpu_s() - before)
            if json.loads(out.stdout) != {}:
                raise SystemExit(f"the hook answered a stop with no file: {out.stdout!r}")

        no_file()
        cpus.clear()
        no_file_s = median_s(args.runs, no_file)
        print(
            f"hook process, a stop with no metadata file (most stops): {no_file_s * 1000:.0f} ms "
            f"wall, {statistics.median(cpus) * 1000:.0f} ms CPU"
        )
        floor()
        floor_s = median_s(args.runs, floor)
        print(f"hook process without a transcript (the floor): {floor_s * 1000:.0f} ms")
        for label, size in SIZES.items():
            path = work / f"agent-{size}.jsonl"
            transcript(path, size, meta)
            payload = json.dumps(
                {
                    "cwd": str(root),
                    "hook_event_name": "SubagentStop",
                    "stop_hook_active": False,
                    "agent_transcript_path": str(path),
                }
            ).encode()

            def hook(payload: bytes = payload) -> None:
                out = subprocess.run(argv, input=payload, capture_output=True, env=env, check=True)
                answer = json.loads(out.stdout)
                if answer.get("decision") != "block":
                    raise SystemExit(f"the hook did not block on the agent's own file: {answer}")

            hook()  # untimed: warms the page cache and checks the answer
            hook_s = median_s(args.runs, hook)
            tail_s = median_s(args.runs, lambda p=path: read_transcript(p))
            found = read_transcript(path)
            if found is None or TASK_DIR not in found.task_dirs:
                raise SystemExit("the tail read did not find the agent's own write")
            whole_s = median_s(args.runs, lambda p=path: naive(p))
            verdict = "ok" if hook_s <= TARGET_S else "OVER TARGET"
            ok &= hook_s <= TARGET_S
            print(
                f"{label:>6} transcript ({path.stat().st_size / 1e6:.1f} MB): "
                f"hook process {hook_s * 1000:.0f} ms ({verdict}, target "
                f"<= {TARGET_S * 1000:.0f} ms; floor + {(hook_s - floor_s) * 1000:.0f} ms); "
                f"transcript tail read {tail_s * 1000:.1f} ms; "
                f"whole file json.loads per line {whole_s * 1000:.0f} ms "
                f"({whole_s / tail_s:.0f}x the tail read)"
            )
    finally:
        if args.keep:
            print(f"kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
