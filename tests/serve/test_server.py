"""The server loop ``serve`` runs: it wakes once a second, not ten times, and still refreshes
the ``Date`` header and stops promptly on SIGTERM (exit 0)."""

from __future__ import annotations

import http.client
import signal
import time
from email.utils import parsedate_to_datetime
from pathlib import Path

from helpers.needs import require_extra
from helpers.project import project
from helpers.serve_process import served

require_extra("web", "the dashboard runs on it")

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
