#!/usr/bin/env python3
"""Benchmark: `postflightd mcp` from start to its answer to `initialize`, and a check_metadata.

Starts the real server in a sample project (one task), writes the client's `initialize` on its
stdin as a runtime does, and times, median of --runs rounds (each measure once a round), each
checked:

* start to the `initialize` answer (the target: <= 300 ms);
* the same, then `check_metadata` of a document (its answer holding PF202);
* the floor: the Python interpreter importing the SDK's server alone (`mcp.server.lowlevel`
  and its stdio transport), which no server on the SDK can start without: the ``mcp``
  package's ``__init__`` imports its client and ``mcp.server``'s imports ``MCPServer`` with
  the HTTP transports and their auth, however little of it a stdio server uses;
* within it, the protocol's types alone (``mcp_types``: pydantic models of two protocol
  eras), which even a loop of one's own on the SDK's types would pay;
* the tools' own code (``postflightd.commands.mcp``: ``scan``'s checks and reporter), all a
  server that spoke the protocol without the SDK would import;
* the status quo, `postflightd --version`: the CLI's own start-up.

    .venv/bin/python bench/mcp.py [--runs 7]
"""

from __future__ import annotations

import argparse
import json
import shutil
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


def one_run(root: Path, *, check: bool) -> float:
    started = time.perf_counter()
    proc = subprocess.Popen(
        [CLI, "mcp"],
        cwd=root,
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
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)
    return elapsed


#: Ends an import-only run at once: the interpreter's teardown of the SDK's modules (a few
#: hundred milliseconds) is not start-up, and the server's rows stop at the answer.
EXIT = "; import os; os._exit(0)"


def timed(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    runs = parser.parse_args().runs
    tmp = Path(tempfile.mkdtemp(prefix="pf-bench-mcp-"))
    try:
        root = tmp / "proj"
        sample(root)
        one_run(root, check=True)  # warm the page cache
        measures: dict[str, Callable[[], float]] = {
            "initialize answered": lambda: one_run(root, check=False),
            "initialize + check_metadata": lambda: one_run(root, check=True),
            "floor: import the SDK's server": lambda: timed(
                [sys.executable, "-c", f"import mcp.server.lowlevel, mcp.server.stdio{EXIT}"]
            ),
            "of which the protocol types (mcp_types)": lambda: timed(
                [sys.executable, "-c", f"import mcp_types{EXIT}"]
            ),
            "without the SDK: the tools' own code": lambda: timed(
                [sys.executable, "-c", f"import postflightd.commands.mcp{EXIT}"]
            ),
            "status quo: postflightd --version": lambda: timed([CLI, "--version"]),
        }
        # Round by round, each measure once a round: a load that changes during the run
        # weighs on every row alike, so the rows compare.
        rows: dict[str, list[float]] = {name: [] for name in measures}
        for _ in range(runs):
            for name, measure in measures.items():
                rows[name].append(measure())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"median of {runs} runs (target: initialize answered <= 300 ms)")
    for name, times in rows.items():
        print(f"  {name:<40} {statistics.median(times) * 1000:7.0f} ms")


if __name__ == "__main__":
    main()
