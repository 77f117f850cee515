"""A dashboard kept open through a busy day, compressed: the server's memory stays flat.

Runs start, report progress and land in rounds (a day of a team's agents, at the speed the
server can see them), with two pages open: one that reads every event, and one that reads
nothing at all (a stalled tab, a laptop asleep). The server's resident memory after the
last round is compared with what it was after the first few: what an open page costs is
bounded by its queue, not by how long it stays open.
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from helpers.daemon_process import in_progress_doc
from helpers.documents import researched_doc
from helpers.project import project, write_meta
from helpers.serve_process import served
from postflightd.cli import main

pytestmark = pytest.mark.slow

TASKS_PER_ROUND = 25
ROUNDS = 16
#: Rounds before the baseline: by then the stalled page's queue is full.
WARM_ROUNDS = 8
#: Runs in flight all day long (long ones, and stuck ones nobody restarted): every state event
#: is a snapshot of a few hundred KiB, so that keeping events a stalled page never read would
#: show as megabytes.
LONG_RUNS = 150
#: Growth allowed between the warm rounds and the last one (allocator slack, caches filled).
MAX_GROWTH_KB = 4 * 1024


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def open_stream(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(f"GET /events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
    return sock


def reader(sock: socket.socket, counts: dict[str, int]) -> None:
    try:
        while chunk := sock.recv(65536):
            counts["bytes"] += len(chunk)
            counts["events"] += chunk.count(b"\nevent: ") + chunk.startswith(b"event: ")
    except OSError:
        pass


def one_round(root: Path, first: int, stage_text: str) -> None:
    tasks = range(first, first + TASKS_PER_ROUND)
    for step in range(4):
        for n in tasks:
            write_meta(root, f"{n}_task{n}", in_progress_doc(n, stage=f"{stage_text} {step}"))
        time.sleep(0.15)  # pacing: each step is seen by a poll (100 ms)
    for n in tasks:
        write_meta(root, f"{n}_task{n}", researched_doc(f"{n}_task{n}"))
    main(["scan", "--apply", str(root)])


def test_an_open_page_through_a_day_of_runs_keeps_the_server_memory_flat(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = project(tmp_path / "project", TASKS_PER_ROUND * ROUNDS + LONG_RUNS)
    stage_text = "x" * 1000  # progress text as long as agents write it
    for n in range(TASKS_PER_ROUND * ROUNDS + 1, TASKS_PER_ROUND * ROUNDS + LONG_RUNS + 1):
        write_meta(root, f"{n}_task{n}", in_progress_doc(n, stage=stage_text))
    counts: dict[str, Any] = {"bytes": 0, "events": 0}
    with served(root, extra=("--interval", "100ms")) as (server, port):
        reading = open_stream(port)
        stalled = open_stream(port)  # never read
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        thread = threading.Thread(target=reader, args=(reading, counts), daemon=True)
        thread.start()
        try:
            baseline = 0
            for r in range(ROUNDS):
                one_round(root, 1 + r * TASKS_PER_ROUND, stage_text)
                if r == WARM_ROUNDS - 1:
                    time.sleep(0.5)
                    baseline = rss_kb(server.pid)
            time.sleep(0.5)
            final = rss_kb(server.pid)
        finally:
            reading.close()
            stalled.close()
            thread.join(10)
    capsys.readouterr()
    # The reading page got the day's events: the day happened, and it was live.
    assert counts["events"] >= ROUNDS * 2
    growth = final - baseline
    assert growth <= MAX_GROWTH_KB, f"RSS grew {growth} KiB over {ROUNDS - WARM_ROUNDS} rounds"
