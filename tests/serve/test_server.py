"""The server ``serve`` runs: it wakes once a second, not ten times, and still refreshes the
``Date`` header and stops promptly on SIGTERM (exit 0); pages waiting for a slow report never
hold up the live view."""

from __future__ import annotations

import http.client
import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from email.utils import parsedate_to_datetime
from pathlib import Path

from helpers.documents import researched_doc
from helpers.needs import require_extra
from helpers.project import project, write_meta
from helpers.serve_process import served
from helpers.waiting import wait_until

require_extra("web", "the dashboard runs on it")

from postflightd.cli import main  # noqa: E402
from postflightd.serve.server import TICK_S  # noqa: E402


def test_the_date_is_current_and_a_stop_is_prompt(tmp_path: Path) -> None:
    root = project(tmp_path / "project", 1)
    with served(root) as (server, port):
        dates = []
        for _ in range(2):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            conn.request("GET", "/api/state")
            answer = conn.getresponse()
            answer.read()
            conn.close()
            dates.append(parsedate_to_datetime(answer.getheader("date", "")).timestamp())
            time.sleep(TICK_S * 2.5)
        assert abs(dates[0] - time.time()) < 60
        assert dates[1] > dates[0]  # refreshed while the server ran
        server.send_signal(signal.SIGTERM)
        assert server.wait(TICK_S * 10) == 0


def _report_child(server: int) -> int | None:
    """The pid of the server's `postflightd report` child, if it runs."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        if ppid == server and b"report" in argv:
            return int(entry.name)
    return None


def _get(port: int, path: str, timeout: float) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        answer = conn.getresponse()
        return answer.status, answer.read()
    finally:
        conn.close()


def test_pages_waiting_for_a_slow_report_never_hold_up_the_live_view(tmp_path: Path) -> None:
    """45 pages ask for figures while the report making them is held (as a report over a large
    journal takes its time): they wait, one thread between them, and the live view goes on:
    /metrics answers, and an outcome applied meanwhile is shown. Given threads of the shared
    pool, the waiting pages held all 40 and neither answered until the report was done."""
    root = project(tmp_path / "project", 2)
    with served(root) as (server, port), ThreadPoolExecutor(46) as pool:
        pages = [pool.submit(_get, port, "/figures?range=all", 120)]
        report = wait_until("the figures' report process", lambda: _report_child(server.pid))
        os.kill(report, signal.SIGSTOP)
        try:
            pages += [pool.submit(_get, port, "/figures?range=all", 120) for _ in range(45)]
            # Given time to reach the server and wait there (on the old code, each in a thread).
            time.sleep(2)
            assert _get(port, "/metrics", 20)[0] == 200
            write_meta(root, "1_task1", researched_doc("1_task1"))
            assert main(["process", str(root / "specs/1_task1/.return-meta.json")]) == 0
            wait_until(
                "the outcome on the live view",
                lambda: b'"task": 1' in _get(port, "/api/outcomes", 20)[1],
            )
        finally:
            os.kill(report, signal.SIGCONT)
        assert {future.result()[0] for future in pages} == {200}
