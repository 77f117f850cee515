"""``postflightd serve`` as a real process: without the web extra, the rest of postflightd never
loads it, ``init`` mentions it, and an open event stream sees a change on disk and in the
journal as it happens."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers.daemon_process import in_progress_doc
from helpers.documents import researched_doc
from helpers.project import project, write_meta
from helpers.serve_process import served
from postflightd.cli import main

WEB = ("starlette", "uvicorn", "sse_starlette", "prometheus_client", "anyio")


def test_serve_without_the_web_extra_says_what_to_install(tmp_path: Path) -> None:
    root = project(tmp_path / "p", 1)
    # The extra's modules made unimportable, as on an install without it.
    code = textwrap.dedent(
        f"""
        import sys
        for name in {WEB!r}:
            sys.modules[name] = None
        from postflightd.cli import main
        sys.exit(main(["serve", {str(root)!r}]))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=60
    )
    assert out.returncode == 2, out.stderr
    # From a clone, as postflightd is installed: not a bare name an index would be asked for.
    assert "pip install './postflightd[web]'" in out.stderr
    assert "Traceback" not in out.stderr
    assert out.stdout == ""


def test_the_daemon_the_hook_and_scan_import_nothing_of_the_web_stack(tmp_path: Path) -> None:
    root = project(tmp_path / "p", 1)
    write_meta(root, "1_task1", researched_doc("1_task1"))
    code = textwrap.dedent(
        f"""
        import contextlib, io, json, sys
        from postflightd.cli import main
        with contextlib.redirect_stdout(io.StringIO()):
            main(["scan", {str(root)!r}])
        import postflightd.commands.watch, postflightd.daemon.loop
        import postflightd.commands.hook, postflightd.hooks.claude
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in {WEB!r}
                        or m.startswith("postflightd.serve"))
        print(json.dumps(loaded))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(out.stdout.splitlines()[-1]) == []


def test_init_mentions_the_dashboard(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = project(tmp_path / "p", 1)
    main(["init", "--yes", str(root)])
    out = capsys.readouterr().out
    (line,) = [x for x in out.splitlines() if "postflightd serve" in x]
    assert str(root) in line and "web extra" in line


@pytest.fixture
def served_project(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    root = project(tmp_path / "project", 3)
    with served(root) as (_, port):
        yield root, port


class EventStream:
    """An open ``/events`` connection, read event by event."""

    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.conn.request("GET", "/events", headers={"accept": "text/event-stream"})
        self.response = self.conn.getresponse()
        assert self.response.status == 200
        assert self.response.getheader("content-type", "").startswith("text/event-stream")

    def next(self) -> tuple[str, Any]:
        name, data = "message", []
        while True:
            line = self.response.readline().decode().rstrip("\r\n")
            if not line:
                if data:
                    return name, json.loads("\n".join(data))
                continue
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip())

    def until(self, what: str, test: Any, limit: int = 200) -> Any:
        for _ in range(limit):
            name, doc = self.next()
            if test(name, doc):
                return doc
        raise AssertionError(f"no event showed {what} in {limit} events")

    def close(self) -> None:
        self.conn.close()


@pytest.mark.slow
def test_an_open_event_stream_sees_a_run_start_and_its_outcome_land(
    served_project: tuple[Path, int], capsys: pytest.CaptureFixture[str]
) -> None:
    root, port = served_project
    stream = EventStream(port)
    try:
        first = stream.until("the first state", lambda n, d: n == "state")
        assert first["runs"] == []
        write_meta(root, "2_task2", in_progress_doc(2, stage="drafting"))
        # The file is written in place (truncated, then written): a state sent between the two
        # shows the run with no stage yet, which is right; the test waits for the whole file.
        state = stream.until(
            "the run in flight",
            lambda n, d: n == "state" and d["runs"] and d["runs"][0].get("stage") == "drafting",
        )
        assert (state["runs"][0]["task"], state["runs"][0]["stage"]) == (2, "drafting")
        write_meta(root, "2_task2", researched_doc("2_task2"))
        assert main(["process", str(root / "specs/2_task2/.return-meta.json")]) == 0
        outcome = stream.until("the outcome", lambda n, d: n == "outcome" and d["task"] == 2)
        assert (outcome["outcome"], outcome["status"]) == ("applied", "researched")
        stream.until("the run gone", lambda n, d: n == "state" and d["runs"] == [])
    finally:
        stream.close()
    capsys.readouterr()
