#!/usr/bin/env python3
"""Benchmark: `postflightd mcp` from start to its answer to `initialize`, and a check_metadata.

Starts the real server in a sample project (one task), writes the client's `initialize` on its
stdin as a runtime does, and times, median of --runs rounds (each measure once a round), each
checked, in wall time and in the CPU time of the process (the server's own up to its answer,
read from /proc; on a loaded machine the wall time waits for a core, the CPU time much less):

* start to the `initialize` answer (the target: <= 300 ms);
* the same, then `check_metadata` of a document (its answer holding PF202; the checks are
  imported by that first call, not before the answer to `initialize`);
* the floor: the Python interpreter importing the SDK's server alone (`mcp.server.lowlevel`
  and its stdio transport), which no server on the SDK can start without: the ``mcp``
  package's ``__init__`` imports its client and ``mcp.server``'s imports ``MCPServer`` with
  the HTTP transports and their auth, however little of it a stdio server uses; within it,
  nested, each row part of the one above:
  * ``mcp_types.methods``: the wire models of both protocol eras, which the low-level
    server's session and runner import to route a message;
  * ``mcp_types``: the protocol's types of the current era;
  * pydantic's ``BaseModel``;
  * the interpreter alone;
* postflightd's own start without the SDK (the CLI and the server's module: what a server
  that spoke the protocol without the SDK would import before its first answer);
* the status quo, `postflightd --version`: the CLI's own start-up.

Bytecode as an install has it: postflightd's sources are compiled first (an editable checkout
run with PYTHONDONTWRITEBYTECODE would otherwise compile them again on every start), and the
load average is printed before and after: the machine's other work weighs on every row.

With `--baseline SRC` (e.g. main's `src/`) the server is also started on that checkout's code,
round by round with this one: a before/after under the same load. With `--instructions` each
row is also counted once in instructions, under valgrind: a figure no load changes.

    .venv/bin/python bench/mcp.py [--runs 7] [--baseline ../main/src] [--instructions]
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent
CLI = str(BIN / "postflightd")
TICK = os.sysconf("SC_CLK_TCK")
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"},
    },
}
CHECK = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {
        "name": "check_metadata",
        "arguments": {"task": 259, "document": {"status": "research-done"}},
    },
}


def sample(root: Path) -> None:
    (root / "specs" / "259_prove_completeness").mkdir(parents=True)
    state = {"active_projects": [{"project_number": 259, "project_name": "prove_completeness"}]}
    (root / "specs" / "state.json").write_text(json.dumps(state), "utf-8")


def _send(proc: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()


def _answer(proc: subprocess.Popen[bytes], wanted: int) -> dict[str, Any]:
    assert proc.stdout is not None
    while True:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit("the server closed its output before answering")
        doc = json.loads(line)
        if doc.get("id") == wanted:
            return doc  # type: ignore[no-any-return]


def cpu_so_far(pid: int) -> float:
    """The CPU time, user and system, a running process has used (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def one_run(root: Path, *, check: bool, src: str | None = None) -> tuple[float, float]:
    started = time.perf_counter()
    proc = subprocess.Popen(
        [CLI, "mcp"],
        cwd=root,
        env={**os.environ, "PYTHONPATH": src} if src else None,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        _send(proc, INIT)
        answer = _answer(proc, 1)
        assert "result" in answer, answer
        if check:
            _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
            _send(proc, CHECK)
            result = _answer(proc, 2)
            assert "PF202" in json.dumps(result), result
        elapsed = time.perf_counter() - started
        cpu = cpu_so_far(proc.pid)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)
    return elapsed, cpu


#: Ends an import-only run at once: the interpreter's teardown of the SDK's modules (a few
#: hundred milliseconds) is not start-up, and the server's rows stop at the answer.
EXIT = "; import os; os._exit(0)"


#: Counts the instructions a process runs, whatever the load: valgrind's cachegrind, its cache
#: not simulated (some 30 times slower than the process alone).
VALGRIND = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]


def instructions(argv: list[str], *, root: Path | None = None, src: str | None = None) -> int:
    """The instructions ``argv`` runs: to its end, or with ``root``, the server started there
    up to its answer to `initialize` (stopped by SIGTERM then, so that its teardown is not
    counted)."""
    proc = subprocess.Popen(
        [*VALGRIND, *argv],
        cwd=root,
        env={**os.environ, "PYTHONPATH": src} if src else None,
        stdin=subprocess.PIPE if root else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    if root is not None:
        _send(proc, INIT)
        assert "result" in _answer(proc, 1)
        proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=600)
    found = re.search(rb"I\s+refs:\s+([\d,]+)", err)
    assert found, err[-2000:]
    return int(found.group(1).replace(b",", b""))


def timed(argv: list[str]) -> tuple[float, float]:
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - started
    assert os.waitstatus_to_exitcode(status) == 0, argv
    return elapsed, usage.ru_utime + usage.ru_stime


def imported(modules: str) -> Callable[[], tuple[float, float]]:
    return lambda: timed([sys.executable, "-c", f"import {modules}{EXIT}"])


def compile_sources() -> str:
    """Compile postflightd's sources as an install has them; what was done, said."""
    spec = importlib.util.find_spec("postflightd")
    assert spec is not None and spec.origin is not None
    package = Path(spec.origin).parent
    compileall.compile_dir(package, quiet=2)
    return f"postflightd's bytecode compiled ({package})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="also count each row's instructions once, under valgrind (minutes)",
    )
    parser.add_argument(
        "--baseline", metavar="SRC", help="also time another checkout's src/ (e.g. main's), paired"
    )
    args = parser.parse_args()
    runs = args.runs
    compiled = compile_sources()
    baseline = str(Path(args.baseline).resolve()) if args.baseline else None
    if baseline:
        compileall.compile_dir(baseline, quiet=2)
        compiled += f" and the baseline's ({baseline})"
    tmp = Path(tempfile.mkdtemp(prefix="pf-bench-mcp-"))
    before = os.getloadavg()
    try:
        root = tmp / "proj"
        sample(root)
        one_run(root, check=True)  # warm the page cache
        measures: dict[str, Callable[[], tuple[float, float]]] = {
            "initialize answered": lambda: one_run(root, check=False),
            **(
                {"  the baseline's code": lambda: one_run(root, check=False, src=baseline)}
                if baseline
                else {}
            ),
            "initialize + check_metadata": lambda: one_run(root, check=True),
            "floor: import the SDK's server": imported("mcp.server.lowlevel, mcp.server.stdio"),
            "  of which both eras' types (methods)": imported("mcp_types.methods"),
            "    of which the types (mcp_types)": imported("mcp_types"),
            "      of which pydantic's BaseModel": imported("pydantic.main"),
            "        of which the interpreter": lambda: timed([sys.executable, "-c", "pass"]),
            "without the SDK: postflightd's own start": imported(
                "postflightd.cli, postflightd.commands.mcp"
            ),
            "status quo: postflightd --version": lambda: timed([CLI, "--version"]),
        }
        # Round by round, each measure once a round: a load that changes during the run
        # weighs on every row alike, so the rows compare.
        rows: dict[str, list[tuple[float, float]]] = {name: [] for name in measures}
        for _ in range(runs):
            for name, measure in measures.items():
                rows[name].append(measure())
        counted = counts(root, baseline) if args.instructions else {}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    after = os.getloadavg()
    print(f"median of {runs} runs (target: initialize answered <= 300 ms); {compiled}")
    print(
        f"load average (1, 5, 15 min) {_load(before)} before, {_load(after)} after, on "
        f"{os.cpu_count()} CPUs"
    )
    print(f"  {'':<42} {'wall':>7}    {'CPU':>7}    {'instructions' if counted else ''}")
    for name, times in rows.items():
        wall = statistics.median(t[0] for t in times) * 1000
        cpu = statistics.median(t[1] for t in times) * 1000
        count = f"{counted[name] / 1e6:9,.0f} million" if name in counted else ""
        print(f"  {name:<42} {wall:7.0f} ms {cpu:7.0f} ms {count}")


def counts(root: Path, baseline: str | None) -> dict[str, int]:
    """Each row's instructions, once (the check_metadata row left out: its count would hold
    the wait for the call)."""
    server = [sys.executable, CLI, "mcp"]

    def imports(modules: str) -> int:
        return instructions([sys.executable, "-c", f"import {modules}{EXIT}"])

    found = {
        "initialize answered": instructions(server, root=root),
        "floor: import the SDK's server": imports("mcp.server.lowlevel, mcp.server.stdio"),
        "  of which both eras' types (methods)": imports("mcp_types.methods"),
        "    of which the types (mcp_types)": imports("mcp_types"),
        "      of which pydantic's BaseModel": imports("pydantic.main"),
        "        of which the interpreter": instructions([sys.executable, "-c", "pass"]),
        "without the SDK: postflightd's own start": imports(
            "postflightd.cli, postflightd.commands.mcp"
        ),
        "status quo: postflightd --version": instructions([sys.executable, CLI, "--version"]),
    }
    if baseline:
        found["  the baseline's code"] = instructions(server, root=root, src=baseline)
    return found


def _load(values: tuple[float, float, float]) -> str:
    return " ".join(f"{v:.1f}" for v in values)


if __name__ == "__main__":
    main()
