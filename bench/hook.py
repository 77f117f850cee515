#!/usr/bin/env python3
"""Benchmark: `postflightd hook claude`, the stop hook every agent and subagent runs at each stop.

Each case is the hook as a whole process (start-up included), wall and CPU (the child's user +
system time), medians of --runs runs, every answer checked:

* nothing to do: a Stop in a project with no metadata file (most stops), without and with the
  project's `.postflightd.toml` as `init` writes it (read at every stop);
* files to validate and apply, in a project set up as `init` leaves it, written again,
  untimed, before each run: two clean final files (as most are), which must be applied; and
  three, one clean, one with a field of its own (valid, not clean) and the agent's own
  invalid one, on which the answer must block while the valid ones are applied;
* a subagent's 1 MB and 50 MB transcripts: a SubagentStop naming the transcript, a broken
  `.return-meta.json` last written a minute ago that only the transcript makes the agent's
  own (the answer must block on it), and the same stop without a transcript path (its floor);
* in-process: the transcript read as the hook reads it (`hooks.transcript.read_transcript`,
  the bounded tail), against the whole file read with `json.loads` on each line.

With `--baseline SRC` (e.g. `/work/main/src`) each process case also runs with that
checkout's `src/` first on `PYTHONPATH`, alternating run by run with this one, so that both
see the same load: a before/after in one run. Both sides write their bytecode once (the
untimed first run), as an installed package has it: `PYTHONDONTWRITEBYTECODE` is dropped.

With `--instructions` each process case is also counted once per side in instructions, under
valgrind (cachegrind, no cache simulation; `PYTHONHASHSEED=0`): a figure no load changes, the
way the hook's start-up cuts are measured (docs/benchmarks.md).

`--runtime-calls DIR` reads instead the hook calls a real runtime made under tests/runtimes/
(the recorder of tests/helpers/runtimes.py keeps each call's start and end in
`hook-calls/*.json`; pytest keeps its last runs' `tmp_path` under
/tmp/pytest-of-$USER/): each call's time, by runtime and event, medians and maxima.

    .venv/bin/python bench/hook.py [--runs 9] [--baseline ../main/src] [--keep] [--instructions]
    .venv/bin/python bench/hook.py --runtime-calls /tmp/pytest-of-root
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from machine import describe
from postflightd.hooks.transcript import read_transcript
from postflightd.project.setup import config_template

TASK_DIR = "259_prove_completeness"
SIZES = {"1 MB": 1024 * 1024, "50 MB": 50 * 1024 * 1024}
#: Targets, wall time of the whole process, on a quiet machine.
TARGET_IDLE_S = 0.050
TARGET_FILES_S = 0.100
TARGET_TRANSCRIPT_S = 0.200
SESSION = "sess_1736640000_abc123"


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


def a_minute_ago(path: Path) -> None:
    """Settled, and within the run's timeout: the hook waits for no write to end."""
    then = time.time() - 60
    os.utime(path, (then, then))


def researched(task: int, slug: str) -> dict[str, Any]:
    return {
        "status": "researched",
        "artifacts": [
            {
                "type": "report",
                "path": f"specs/{task}_{slug}/reports/research-001.md",
                "summary": "Research report",
            }
        ],
        "next_steps": "Run /plan",
        "metadata": {
            "session_id": SESSION,
            "agent_type": "research-agent",
            "duration_seconds": 180,
            "delegation_depth": 1,
            "delegation_path": ["orchestrator", "research", "research-agent"],
        },
    }


class FilesProject:
    """Final files to validate and apply, laid out again before each run: two clean ones, or
    one clean, one with a field of its own (valid) and the agent's own invalid one."""

    def __init__(self, root: Path, *, invalid: bool) -> None:
        self.root = root
        self.invalid = invalid
        self.tasks = (1, 2, 3) if invalid else (1, 2)
        self.specs = root / "specs"
        for n in self.tasks:
            (self.specs / f"{n}_task{n}" / "reports").mkdir(parents=True)
            (self.specs / f"{n}_task{n}" / "reports" / "research-001.md").write_text("# r\n")
        (root / ".postflightd.toml").write_text(config_template(apply=True), encoding="utf-8")

    def lay_out(self) -> None:
        state = {
            "next_project_number": 4,
            "active_projects": [
                {"project_number": n, "project_name": f"task{n}", "status": "researching"}
                for n in self.tasks
            ],
        }
        (self.specs / "state.json").write_text(json.dumps(state, indent=2) + "\n")
        todo = "".join(f"### {n}. Task {n}\n- **Status**: [RESEARCHING]\n\n" for n in self.tasks)
        (self.specs / "TODO.md").write_text("# TODO\n\n" + todo)
        (self.specs / "errors.json").unlink(missing_ok=True)
        docs = [researched(n, f"task{n}") for n in self.tasks]
        if self.invalid:
            docs[1]["metadata"]["phase_count"] = 4  # a field of its own: valid, not clean
            docs[2]["artifacts"][0]["summary"] = 5  # the agent's own file, of a wrong type
        for n, doc in zip(self.tasks, docs, strict=True):
            meta = self.specs / f"{n}_task{n}" / ".return-meta.json"
            meta.write_text(json.dumps(doc, indent=2) + "\n")
            a_minute_ago(meta)

    def check(self, answer: dict[str, Any]) -> None:
        blocked = answer.get("decision") == "block" and "PF201" in answer.get("reason", "")
        if blocked != self.invalid or (not self.invalid and answer != {}):
            raise SystemExit(f"the hook's answer is not the expected one: {answer}")
        state = json.loads((self.specs / "state.json").read_text())
        statuses = [t["status"] for t in state["active_projects"]]
        if statuses != ["researched", "researched", "researching"][: len(self.tasks)]:
            raise SystemExit(f"the hook did not apply the valid files: {statuses}")


#: Counts the instructions a process runs, whatever the load: valgrind's cachegrind, its cache
#: not simulated (some 30 times slower than the process alone).
VALGRIND = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]


class Side:
    """One checkout's hook, run as a process: (wall, CPU) per run."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.times: list[tuple[float, float]] = []

    def run(self, stdin: bytes) -> dict[str, Any]:
        argv = [sys.executable, "-m", "postflightd", "hook", "claude"]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(argv, input=stdin, capture_output=True, env=self.env, check=False)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            raise SystemExit(f"the hook exited {done.returncode}: {done.stderr.decode()[-500:]}")
        self.times.append(
            (wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
        )
        answer: dict[str, Any] = json.loads(done.stdout)
        return answer

    def count(self, stdin: bytes) -> tuple[dict[str, Any], int]:
        """The answer and the instructions of one run, under valgrind."""
        argv = [*VALGRIND, sys.executable, "-m", "postflightd", "hook", "claude"]
        env = {**self.env, "PYTHONHASHSEED": "0"}
        done = subprocess.run(argv, input=stdin, capture_output=True, env=env, check=False)
        if done.returncode != 0:
            raise SystemExit(f"the hook exited {done.returncode}: {done.stderr.decode()[-500:]}")
        found = re.search(rb"I\s+refs:\s+([\d,]+)", done.stderr)
        if found is None:
            raise SystemExit(f"no count from valgrind: {done.stderr.decode()[-500:]}")
        return json.loads(done.stdout), int(found.group(1).replace(b",", b""))

    def medians(self) -> tuple[float, float]:
        return (
            statistics.median(t[0] for t in self.times),
            statistics.median(t[1] for t in self.times),
        )


def paired(
    name: str,
    sides: dict[str, dict[str, str]],
    runs: int,
    stdin: Callable[[int], bytes],
    check: Callable[[dict[str, Any]], None],
    target_s: float | None,
    before: Callable[[], None] = lambda: None,
    *,
    counting: bool = False,
) -> dict[str, float]:
    """Each side's medians of one case, the sides alternating run by run (and with
    ``counting``, each side's instructions once); printed."""
    runners = {side: Side(env) for side, env in sides.items()}
    for runner in runners.values():  # untimed: bytecode, page cache; checks the answer
        before()
        check(runner.run(stdin(-1)))
        runner.times.clear()
    for n in range(runs):
        for runner in runners.values():
            before()
            check(runner.run(stdin(n)))
    counted = {}
    for side, runner in runners.items() if counting else ():
        before()
        answer, counted[side] = runner.count(stdin(-1))
        check(answer)
    cells, walls = [], {}
    for side, runner in runners.items():
        wall, cpu = runner.medians()
        walls[side] = wall
        count = f", {counted[side] / 1e6:.1f} M instructions" if side in counted else ""
        cells.append(f"{side} {wall * 1000:5.0f} / {cpu * 1000:4.0f} ms{count}")
    verdict = ""
    if target_s is not None:
        met = "met" if walls["this"] <= target_s else "MISSED"
        verdict = f"   target <= {target_s * 1000:.0f} ms: {met}"
    print(f"  {name:52s} " + "   ".join(cells) + verdict)
    return walls


#: A session of its own for each stop: postflightd's bound on blocks counts per session.
_SESSIONS = itertools.count()


def stop_payload(cwd: Path, event: str = "Stop", **more: Any) -> Callable[[int], bytes]:
    def payload(_: int) -> bytes:
        session = f"bench-{next(_SESSIONS)}"
        doc = {"cwd": str(cwd), "hook_event_name": event, "session_id": session, **more}
        return json.dumps(doc).encode()

    return payload


def expect_nothing(answer: dict[str, Any]) -> None:
    if answer != {}:
        raise SystemExit(f"the hook answered a stop with no file: {answer}")


def expect_block(answer: dict[str, Any]) -> None:
    if answer.get("decision") != "block":
        raise SystemExit(f"the hook did not block on the agent's own file: {answer}")


def empty_project(root: Path, config: str | None = None) -> Path:
    (root / "specs" / "1_task").mkdir(parents=True)
    (root / "specs" / "state.json").write_text('{"active_projects": []}\n', encoding="utf-8")
    if config is not None:
        (root / ".postflightd.toml").write_text(config, encoding="utf-8")
    return root


def processes(args: argparse.Namespace, work: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(XDG_STATE_HOME=str(work / "state"), XDG_CONFIG_HOME=str(work / "config"))
    sides = {"this": env}
    if args.baseline:
        sides["baseline"] = {**env, "PYTHONPATH": str(Path(args.baseline).resolve())}
    print(f"the hook as a process, medians of {args.runs} runs, wall / CPU (sides alternating)")
    case = functools.partial(paired, counting=args.instructions)
    bare = empty_project(work / "bare")
    case("nothing to do: no metadata file", sides, args.runs, stop_payload(bare),
           expect_nothing, TARGET_IDLE_S)  # fmt: skip
    inited = empty_project(work / "inited", config_template(apply=True))
    case("nothing to do, the .postflightd.toml init writes", sides, args.runs,
           stop_payload(inited), expect_nothing, TARGET_IDLE_S)  # fmt: skip
    clean = FilesProject(work / "clean", invalid=False)
    case("2 files to validate and apply, both clean", sides, args.runs,
           stop_payload(clean.root), clean.check, TARGET_FILES_S, clean.lay_out)  # fmt: skip
    mixed = FilesProject(work / "mixed", invalid=True)
    case("3 files to validate, 2 to apply, 1 to block on", sides, args.runs,
           stop_payload(mixed.root), mixed.check, TARGET_FILES_S, mixed.lay_out)  # fmt: skip

    root = work / "proj"
    (root / "specs" / TASK_DIR).mkdir(parents=True)
    state = {
        "next_project_number": 260,
        "active_projects": [
            {"project_number": 259, "project_name": "prove_completeness", "status": "x"}
        ],
    }
    (root / "specs" / "state.json").write_text(json.dumps(state), encoding="utf-8")
    meta = root / "specs" / TASK_DIR / ".return-meta.json"
    meta.write_text('{"status": "researched",\n', encoding="utf-8")
    a_minute_ago(meta)
    case("a subagent's broken file, no transcript (the floor)", sides, args.runs,
           stop_payload(root, "SubagentStop"), lambda _: None, None)  # fmt: skip
    for label, size in SIZES.items():
        path = work / f"agent-{size}.jsonl"
        transcript(path, size, meta)
        payload = stop_payload(
            root, "SubagentStop", stop_hook_active=False, agent_transcript_path=str(path)
        )
        case(f"... found as its own in a {label} transcript", sides, args.runs, payload,
               expect_block, TARGET_TRANSCRIPT_S if size == SIZES["50 MB"] else None)  # fmt: skip
    print("the transcript read in-process, medians")
    for label, size in SIZES.items():
        path = work / f"agent-{size}.jsonl"
        tail_s = median_s(args.runs, lambda p=path: read_transcript(p))
        found = read_transcript(path)
        if found is None or TASK_DIR not in found.task_dirs:
            raise SystemExit("the tail read did not find the agent's own write")
        whole_s = median_s(args.runs, lambda p=path: naive(p))
        print(
            f"  {label:>6} ({path.stat().st_size / 1e6:.1f} MB): the hook's tail read "
            f"{tail_s * 1000:.1f} ms; whole file, json.loads per line {whole_s * 1000:.0f} ms"
        )


def runtime_calls(top: Path) -> int:
    """Each recorded hook call's time, by runtime and event."""
    times: dict[str, list[float]] = defaultdict(list)
    for path in sorted(top.rglob("hook-calls/*.json")):
        try:
            call = json.loads(path.read_text(encoding="utf-8"))
            stdin = json.loads(call["stdin"])
            # Copilot CLI names no event: its stop is a stop.
            event = stdin.get("hook_event_name") or stdin.get("hookEventName") or "Stop"
            argv = " ".join(call["argv"])
            times[f"{argv}, {event}"].append((call["ended"] - call["started"]) / 1e9)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
    if not times:
        print(f"no recorded hook call under {top} (hook-calls/*.json)")
        return 1
    print(f"hook calls made by the real runtimes, under {top}: median / max of each")
    for key, values in sorted(times.items()):
        print(
            f"  {key:40s} {len(values):4d} calls  {statistics.median(values) * 1000:5.0f} / "
            f"{max(values) * 1000:5.0f} ms"
        )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--baseline", metavar="SRC", help="also time another checkout's src/")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--runtime-calls", metavar="DIR", type=Path)
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="also count each process case once per side, under valgrind (minutes)",
    )
    args = parser.parse_args()

    print(f"machine: {describe()}; load average {os.getloadavg()[0]:.1f}")
    if args.runtime_calls is not None:
        return runtime_calls(args.runtime_calls)
    work = Path(tempfile.mkdtemp(prefix="postflightd-bench-hook-"))
    try:
        processes(args, work)
    finally:
        if args.keep:
            print(f"kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(f"load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
