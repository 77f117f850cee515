"""The dashboard's live state (``serve.live``): changes followed by events, not by rescans, and
pages that do not read their events never holding more than one snapshot."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import pytest

from helpers.daemon_process import in_progress_doc
from helpers.documents import researched_doc
from helpers.needs import require_extra
from helpers.project import project, write_artifact, write_meta
from helpers.serve_process import served
from helpers.waiting import wait_until

require_extra("web", "the dashboard runs on it")

from starlette.testclient import TestClient  # noqa: E402

from postflightd.cli import main  # noqa: E402
from postflightd.commands.serve import build_app  # noqa: E402
from postflightd.serve.live import Event, Hub  # noqa: E402


def client_for(root: Path, poll_s: float) -> TestClient:
    app = build_app(
        roots=[str(root)], host="127.0.0.1", port=8427, token=None, config_path=None, poll_s=poll_s
    )
    return TestClient(app, base_url="http://127.0.0.1:8427")


def test_a_page_that_reads_nothing_holds_one_snapshot_and_its_latest_outcomes() -> None:
    async def run() -> None:
        hub = Hub(size=8)
        stalled = hub.subscribe()
        for n in range(100):
            hub.publish(Event("state", json.dumps({"n": n})))
            hub.publish(Event("outcome", json.dumps({"id": n}), str(n)))
        states = [e for e in stalled.events if e.name == "state"]
        assert len(states) == 1
        assert json.loads(states[0].data) == {"n": 99}
        assert len(stalled.events) <= 8
        assert stalled.events[-1].id == "99"
        first = await stalled.get()  # what it reads when it wakes: still in order
        assert first.name in ("state", "outcome")

    asyncio.run(run())


def test_changes_on_disk_and_in_the_journal_reach_the_page_without_a_timer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With the interval at an hour, a run that starts and the outcome it lands still show:
    the tree and the journal are followed by their events (inotify), not looked at on a
    timer."""
    root = project(tmp_path / "project", 2)
    with client_for(root, poll_s=3600.0) as client:
        assert client.get("/api/state").json()["runs"] == []
        write_meta(root, "1_task1", in_progress_doc(1, stage="reading"))
        runs = lambda: client.get("/api/state").json()["runs"]  # noqa: E731
        wait_until("the run shows", lambda: [r["task"] for r in runs()] == [1], timeout=20)
        write_artifact(root, "specs/1_task1/reports/research-001.md")
        write_meta(root, "1_task1", researched_doc("1_task1"))
        assert main(["scan", "--apply", str(root)]) == 0
        capsys.readouterr()
        outcomes = lambda: client.get("/api/outcomes").json()  # noqa: E731
        wait_until("the outcome shows", lambda: len(outcomes()) == 1, timeout=20)
        wait_until("the run leaves", lambda: runs() == [], timeout=20)
        assert client.get("/api/state").json()["summary"]["applied_today"] == 1
        poller = client.app.app.state.poller  # type: ignore[attr-defined] # Guard's app
        assert [w.kind for w in poller.watches] == ["inotify"]


#: Task directories beside the idle server: enough that a listing of them all every 0.2 s
#: costs a few percent of a core.
IDLE_TASKS = 3000


def cpu_s(pid: int) -> float:
    """User and system CPU seconds of ``pid`` and its threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.slow
def test_an_idle_server_beside_thousands_of_task_directories_costs_next_to_nothing(
    tmp_path: Path,
) -> None:
    """Nothing changes, so nothing is listed or statted per task directory: the server's own
    CPU time (not the wall clock, which the machine's load stretches) stays far below what a
    look at every task directory five times a second costs here (a few percent of a core).
    bench/serve.py --idle measures it at 10,000 and 100,000."""
    root = project(tmp_path / "project", 1)
    for n in range(100, 100 + IDLE_TASKS):
        (root / "specs" / f"{n}_task" / "reports").mkdir(parents=True)
    with served(root) as (server, _port):
        # Its first look done and the watches set (slower on a loaded machine): a second in
        # which it used at most one clock tick.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            before = cpu_s(server.pid)
            time.sleep(1)
            if cpu_s(server.pid) - before <= 1 / os.sysconf("SC_CLK_TCK"):
                break
        before, t0 = cpu_s(server.pid), time.monotonic()
        time.sleep(11)  # two of the light looks every 5 s
        used = (cpu_s(server.pid) - before) / (time.monotonic() - t0)
    # Clock ticks are 10 ms: 11 s measures in steps of about 0.09 %. A look at every task
    # directory five times a second used 5.8 % here.
    assert used < 0.02, f"an idle serve used {used:.2%} of a core"
