"""The dashboard over HTTP (Starlette's TestClient, the real application and a real journal):
what it shows, and the rules every request meets."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import sqlite3
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from helpers.daemon_process import in_progress_doc
from helpers.documents import researched_doc
from helpers.needs import require_extra
from helpers.project import project, write_artifact, write_meta
from helpers.waiting import wait_until

require_extra("web", "the dashboard runs on it")

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402

from postflightd.cli import main  # noqa: E402
from postflightd.commands.serve import build_app  # noqa: E402
from postflightd.commands.status import collect_status  # noqa: E402
from postflightd.journal.database import default_journal_path  # noqa: E402

HOSTILE = "<script>alert(1)</script>\u202eevil"
BASE = "http://127.0.0.1:8427"
#: Every route, with the parameters it takes.
ROUTES = (
    "/",
    "/static/dashboard.js",
    "/static/dashboard.css",
    "/api/state",
    "/api/outcomes",
    "/figures?range=all",
    "/metrics",
)
#: A reference to another origin: a scheme, or a protocol-relative ``//host``.
EXTERNAL = re.compile(r"(?:https?:)?//[^\s/'\")]")


def in_progress(n: int) -> dict[str, Any]:
    return in_progress_doc(n, stage="reading sources")


@pytest.fixture
def root(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """Two runs applied, one invalid file whose agent value is hostile, one run in flight."""
    root = project(tmp_path / "project", 4)
    for n in (1, 2):
        write_meta(root, f"{n}_task{n}", researched_doc(f"{n}_task{n}"))
    assert main(["scan", "--apply", str(root)]) == 0
    bad = researched_doc("3_task3")
    bad["status"] = "completed"
    bad["metadata"]["agent_type"] = HOSTILE
    write_meta(root, "3_task3", bad)
    main(["scan", "--apply", str(root)])
    write_meta(root, "4_task4", in_progress(4))
    capsys.readouterr()
    return root


def client_for(root: Path, **kwargs: Any) -> TestClient:
    options: dict[str, Any] = {"host": "127.0.0.1", "port": 8427, "token": None}
    options.update(kwargs)
    app = build_app(roots=[str(root)], config_path=None, **options)
    base = f"http://{options['host']}:{options['port']}"
    return TestClient(app, base_url=base, follow_redirects=False)


@pytest.fixture
def client(root: Path) -> Iterator[TestClient]:
    with client_for(root) as c:
        yield c


def test_state_shows_the_run_in_flight_and_the_invalid_file_with_its_fix(
    client: TestClient,
) -> None:
    state = client.get("/api/state").json()
    assert [(r["task"], r["state"], r["stage"]) for r in state["runs"]] == [
        (4, "running", "reading sources")
    ]
    assert state["runs"][0]["phases_total"] == 3
    (invalid,) = state["invalid"]
    assert invalid["task"] == 3
    codes = {f["code"]: f for f in invalid["findings"]}
    assert "PF203" in codes
    # What to write instead: this file's, from the rule that found it (a research run).
    assert codes["PF203"]["fix"] == '"status": "researched"'
    assert codes["PF203"]["severity"] == "error"


def test_outcomes_hold_the_applied_runs_and_the_invalid_one(client: TestClient) -> None:
    outcomes = client.get("/api/outcomes").json()
    assert [(o["task"], o["outcome"], o["status"]) for o in outcomes] == [
        (1, "applied", "researched"),
        (2, "applied", "researched"),
        (3, "invalid", "completed"),
    ]
    journaled = {f["code"]: f for f in outcomes[2]["findings"]}
    assert journaled["PF203"]["fix"] == '"status": "researched"'  # kept with the finding


def test_agent_values_are_inert_in_json_and_html(client: TestClient) -> None:
    for path in ("/api/state", "/api/outcomes", "/figures?range=all"):
        body = client.get(path).text
        assert "\u202e" not in body, path
        assert "<script>alert" not in body, path
    state = client.get("/api/state").json()
    # Made visible: the override is shown as its escape, the markup as text.
    assert state["invalid"][0]["agent"] == "<script>alert(1)</script>\\u202eevil"
    figures = client.get("/figures?range=all").text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;\\u202eevil" in figures
    for path in ("/api/state", "/api/outcomes"):
        response = client.get(path)
        assert response.headers["content-type"].startswith("application/json")
        assert response.headers["x-content-type-options"] == "nosniff"


def test_the_page_loads_only_its_own_script_and_style(client: TestClient) -> None:
    page = client.get("/").text
    assert re.findall(r"<script[^>]*>", page) == ['<script src="/static/dashboard.js" defer>']
    assert "<style" not in page and " style=" not in page
    assert re.findall(r'<link[^>]*href="([^"]+)"', page) == ["/static/dashboard.css"]
    script = client.get("/static/dashboard.js").text
    assert "innerHTML" not in script and "insertAdjacentHTML" not in script
    assert "eval(" not in script


@pytest.mark.parametrize("path", ROUTES)
def test_every_answer_carries_the_safety_headers_and_no_external_reference(
    client: TestClient, path: str
) -> None:
    response = client.get(path)
    assert response.status_code == 200
    csp = response.headers["content-security-policy"]
    if path.startswith("/figures"):
        # The report page: its one style sheet by hash; no script at all; framed only by us.
        assert csp.startswith("default-src 'none'; style-src 'sha256-")
        assert "frame-ancestors 'self'" in csp
    else:
        assert csp.startswith("default-src 'self'")
        assert "frame-ancestors 'none'" in csp
        assert "'unsafe-inline'" not in csp
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "no-referrer"
    assert not EXTERNAL.search(response.text.replace("http://www.w3.org/2000/svg", "")), path


def test_figures_policy_allows_exactly_the_style_sheet_the_page_holds(client: TestClient) -> None:
    import base64
    import hashlib

    response = client.get("/figures?range=7d")
    (style,) = re.findall(r"<style>(.*?)</style>", response.text, re.DOTALL)
    digest = base64.b64encode(hashlib.sha256(style.encode()).digest()).decode()
    assert f"'sha256-{digest}'" in response.headers["content-security-policy"]
    assert "<script" not in response.text


@pytest.mark.parametrize("host", ["evil.example:8427", "127.0.0.1:9999", "attacker.test", ""])
def test_a_host_that_is_not_the_served_address_is_refused(client: TestClient, host: str) -> None:
    response = client.get("/api/state", headers={"host": host})
    assert response.status_code == 421
    assert "runs" not in response.text


@pytest.mark.parametrize("host", ["127.0.0.1:8427", "localhost:8427", "[::1]:8427"])
def test_the_loopback_names_of_the_served_address_are_accepted(
    client: TestClient, host: str
) -> None:
    assert client.get("/api/state", headers={"host": host}).status_code == 200


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"])
def test_only_get_and_head(client: TestClient, method: str) -> None:
    response = client.request(method, "/api/state")
    assert response.status_code == 405
    assert response.headers["allow"] == "GET, HEAD"
    assert client.head("/api/state").status_code == 200


@pytest.mark.parametrize(
    "query",
    ["file=/etc/passwd", "range=../../etc/passwd", "path=specs/state.json", "range=7d&x=1", "%zz"],
)
def test_no_parameter_names_a_file(client: TestClient, query: str) -> None:
    assert client.get(f"/figures?{query}").status_code == 400
    assert client.get(f"/?{query}").status_code == 400


def test_unknown_paths_are_not_found(client: TestClient) -> None:
    for path in ("/static/../pyproject.toml", "/static/dashboard.html", "/specs/state.json"):
        assert client.get(path).status_code == 404, path


def test_beyond_loopback_every_request_needs_the_token(root: Path) -> None:
    token = "s3cret-token"  # noqa: S105 - a test's token
    with client_for(root, host="0.0.0.0", token=token) as c:  # noqa: S104 - the case tested
        assert c.get("/api/state").status_code == 401
        assert c.get("/api/state", headers={"authorization": "Bearer wrong"}).status_code == 401
        ok = c.get("/api/state", headers={"authorization": "Bearer s3cret-token"})
        assert ok.status_code == 200
        first = c.get("/?token=s3cret-token&range=7d")
        assert first.status_code == 303
        assert first.headers["location"] == "/?range=7d"  # the token leaves the address bar
        cookie = first.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        assert c.get("/api/state").status_code == 200  # the cookie now
        assert c.get("/api/state", headers={"host": "evil.example:8427"}).status_code == 421


def test_beyond_loopback_without_a_token_is_a_usage_error(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from postflightd.errors import UsageError

    with pytest.raises(UsageError, match="give --token-file or POSTFLIGHTD_TOKEN"):
        client_for(root, host="0.0.0.0")  # noqa: S104 - the case tested


def test_metrics_parse_with_the_expected_families_and_values(
    client: TestClient, root: Path
) -> None:
    text = client.get("/metrics").text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in families.values()
        for s in f.samples
    }
    assert samples[("postflightd_runs_in_flight", (("state", "running"),))] == 1
    assert samples[("postflightd_stuck_runs", ())] == 0
    assert samples[("postflightd_invalid_files", ())] == 1
    key = (("agent", "neovim-research-agent"), ("status", "researched"))
    assert samples[("postflightd_outcomes_total", key)] == 2
    assert samples[("postflightd_findings_total", (("code", "PF203"),))] >= 1
    assert samples[("postflightd_apply_latency_seconds_count", ())] == 2
    assert samples[("postflightd_apply_latency_seconds_bucket", (("le", "+Inf"),))] == 2
    with contextlib.closing(sqlite3.connect(default_journal_path())) as db:
        rows = db.execute("SELECT count(*) FROM observations").fetchone()[0]
    assert samples[("postflightd_journal_rows", ())] == rows
    assert families["postflightd_apply_latency_seconds"].type == "histogram"
    assert families["postflightd_outcomes"].type == "counter"


def test_a_fresh_project_without_runs_journaled_is_served(tmp_path: Path) -> None:
    root = project(tmp_path / "fresh", 1)
    write_meta(root, "1_task1", in_progress(1))
    with client_for(root) as c:
        assert [r["task"] for r in c.get("/api/state").json()["runs"]] == [1]
        assert c.get("/api/outcomes").json() == []
        figures = c.get("/figures?range=7d")
        assert figures.status_code == 200
        assert "journal" in figures.text  # what the report says about a missing journal
        metrics = c.get("/metrics").text
        assert "postflightd_runs_in_flight" in metrics
        assert json.loads(c.get("/api/state").text)["stuck"] == 0


def test_the_example_grafana_board_uses_only_metrics_served(client: TestClient) -> None:
    from helpers.paths import REPO

    board = (REPO / "docs" / "grafana-dashboard.json").read_text(encoding="utf-8")
    json.loads(board)
    served = {f.name for f in text_string_to_metric_families(client.get("/metrics").text)}
    named = set(re.findall(r"postflightd_[a-z_]+", board))
    assert named
    for name in named:
        base = re.sub(r"_(total|bucket|count|sum)$", "", name)
        assert base in served, name


def unnameable_artifact_text(task_dir: str) -> str:
    """A valid file but for its artifact path: a lone surrogate (the JSON escape ``\\ud800``),
    which no file name can hold."""
    return json.dumps(researched_doc(task_dir)).replace("research-001.md", "\\ud800x.md")


def invalid_codes(client: TestClient) -> dict[int, list[str]]:
    state = client.get("/api/state").json()
    return {f["task"]: [x["code"] for x in f["findings"]] for f in state["invalid"]}


def test_serve_starts_beside_an_unnameable_artifact_path_and_shows_it_invalid(
    tmp_path: Path,
) -> None:
    root = project(tmp_path / "project", 2)
    write_meta(root, "1_task1", unnameable_artifact_text("1_task1"))
    with client_for(root) as client:
        assert invalid_codes(client) == {1: ["PF501"]}


def test_an_unnameable_artifact_path_written_while_serving_leaves_the_view_live(
    tmp_path: Path,
) -> None:
    """The file appears while serve runs: it is shown as PF501, and the view goes on
    following the tree (a later invalid file is shown too)."""
    root = project(tmp_path / "project", 2)
    with client_for(root, poll_s=0.05) as client:
        assert invalid_codes(client) == {}
        write_meta(root, "1_task1", unnameable_artifact_text("1_task1"))
        wait_until("the file shown", lambda: 1 in invalid_codes(client))
        bad = researched_doc("2_task2")
        bad["status"] = "completed"
        write_meta(root, "2_task2", bad)
        wait_until("the view to go on", lambda: 2 in invalid_codes(client))
        assert invalid_codes(client) == {1: ["PF501"], 2: ["PF203"]}


def test_the_header_figures_come_first_and_waiting_files_are_apart_from_runs(
    root: Path,
) -> None:
    """What matters first: runs in flight, stuck, invalid, applied today, the last outcome,
    and the daemon's state with how to start it; a final file waiting for its postflight is
    not a run in flight, and says why it waits and since when."""
    write_artifact(root, "specs/2_task2/reports/research-001.md")
    leftover = write_meta(root, "2_task2", researched_doc("2_task2"))
    long_ago = leftover.stat().st_mtime - 262 * 86400
    os.utime(leftover, (long_ago, long_ago))
    with client_for(root) as c:
        state = c.get("/api/state").json()
        outcomes = c.get("/api/outcomes").json()
    summary = state["summary"]
    assert (summary["in_flight"], summary["stuck"], summary["invalid"]) == (1, 0, 1)
    assert summary["applied_today"] == 2
    assert summary["last_outcome"] == outcomes[-1]["ts"]
    (daemon,) = state["roots"]
    assert daemon["daemon"] is False
    assert daemon["start"] == f"postflightd watch {root}"
    assert [r["task"] for r in state["runs"]] == [4]
    (waiting,) = state["waiting"]
    assert waiting["task"] == 2
    assert waiting["waiting"].startswith("no daemon watches this root")
    since = datetime.fromisoformat(waiting["waiting_since"])
    assert abs(since.timestamp() - long_ago) < 0.01


def test_figures_are_made_once_per_range_while_the_journal_has_no_new_row(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Page views and frame refreshes reuse the report of their range: a new process only
    for another range, or once the journal has a new row and the reuse time is over."""
    from postflightd.commands.status import status_target
    from postflightd.serve.app import create_app

    app = build_app(roots=[str(root)], host="127.0.0.1", port=8427, token=None, config_path=None)
    settings = app.app.state.figures.settings
    resolved, _, configs = status_target([str(root)], None, (), ())

    def collect(now: datetime) -> Any:
        findings: dict[Any, Any] = {}
        return collect_status(resolved, configs, now, findings), findings

    quick = dataclasses.replace(settings, figures_ttl_s=0.0)
    guarded = create_app(quick, collect)
    with TestClient(guarded, base_url=BASE) as c:
        figures = guarded.app.state.figures
        for _ in range(3):
            assert c.get("/figures?range=7d").status_code == 200
        assert figures.builds == 1
        c.get("/figures?range=30d")
        assert figures.builds == 2
        write_meta(root, "4_task4", researched_doc("4_task4"))
        write_artifact(root, "specs/4_task4/reports/research-001.md")
        main(["scan", "--apply", str(root)])
        capsys.readouterr()
        landed = lambda: 4 in [o["task"] for o in c.get("/api/outcomes").json()]  # noqa: E731
        wait_until("the outcome is read", landed)
        c.get("/figures?range=7d")
        assert figures.builds == 3


def test_a_stuck_run_is_an_invalid_file_only_when_its_file_breaks_the_format(
    tmp_path: Path,
) -> None:
    """Being stuck is the runs table's (PF602 there), not a finding of the file: the header's
    invalid count is the files that break the format, as ``status`` counts them, and a stuck
    run is among them only with the findings that make it so."""
    root = project(tmp_path / "project", 2)
    long_ago = "2026-01-08T16:00:00Z"
    stuck = in_progress(1)
    stuck["started_at"] = long_ago
    write_meta(root, "1_task1", stuck)
    broken = in_progress(2)
    broken["started_at"] = long_ago
    broken["metadata"]["delegation_depth"] = 9
    write_meta(root, "2_task2", broken)
    with client_for(root) as c:
        state = c.get("/api/state").json()
    assert [(r["task"], r["state"]) for r in state["runs"]] == [(1, "stuck"), (2, "stuck")]
    assert state["summary"]["stuck"] == 2
    assert [i["task"] for i in state["invalid"]] == [2]
    assert state["summary"]["invalid"] == 1
    (invalid,) = state["invalid"]
    codes = [f["code"] for f in invalid["findings"]]
    assert "PF401" in codes and "PF602" not in codes
