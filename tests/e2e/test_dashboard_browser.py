"""The dashboard in a real headless browser (Debian's chromium, driven through chromedriver):
the page on a copy of the example project, then a simulated agent's run seen live, without a
reload, from in flight to its applied outcome.

``POSTFLIGHTD_SCREENSHOT=PATH`` saves screenshots of the page at the end: light at PATH, dark and
narrow beside it (``-dark``, ``-narrow`` before the suffix; docs/images/ holds the three taken
so). The page shows the project's path, so for a screenshot the example
is copied to /tmp/project, a path like a reader's own, not pytest's temporary directory. As
every switch that writes a file (``helpers.update_mode``), it is refused under CI, and the
test that wrote the screenshot fails, so that such a run is never green.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers.needs import unavailable
from helpers.paths import REPO, copy_example
from helpers.serve_process import served
from helpers.update_mode import refuse_under_ci, rewritten
from helpers.waiting import wait_until

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,1200",
)

pytestmark = pytest.mark.slow

#: Where the example project is copied when a screenshot is taken (the page shows the root).
SCREENSHOT_ROOT = Path("/tmp/project")
SCREENSHOT_ENV = "POSTFLIGHTD_SCREENSHOT"


def _need_browser() -> None:
    if CHROMIUM.exists() and CHROMEDRIVER.exists():
        return
    unavailable(
        f"needs Debian's chromium and chromium-driver ({CHROMIUM}, {CHROMEDRIVER}):"
        " apt-get install chromium chromium-driver"
    )


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    _need_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*FLAGS, f"--user-data-dir={tmp_path / 'chromium-profile'}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def example(tmp_path: Path) -> Iterator[Path]:
    """A copy of examples/project, with the daemon watching it (it applies what agents finish)."""
    screenshot = bool(os.environ.get(SCREENSHOT_ENV))
    if screenshot:
        refuse_under_ci(SCREENSHOT_ENV)
    root = SCREENSHOT_ROOT if screenshot else tmp_path / "project"
    if screenshot and root.exists():
        pytest.fail(f"{root} exists: the screenshot's copy of the example goes there; move it")
    copy_example(root)
    daemon = subprocess.Popen(
        [sys.executable, "-m", "postflightd", "watch", str(root)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        done = root / "specs" / "259_prove_completeness" / ".return-meta.json"
        wait_until("the daemon applies task 259", lambda: not done.exists(), timeout=60)
        yield root
    finally:
        daemon.terminate()
        daemon.wait(15)
        if screenshot:
            shutil.rmtree(root, ignore_errors=True)


def _screenshots(driver: Any, shot: Path) -> list[Path]:
    """The page light at PATH, dark at PATH-dark.png and narrow (a phone) at PATH-narrow.png."""
    dark = shot.with_name(f"{shot.stem}-dark{shot.suffix}")
    narrow = shot.with_name(f"{shot.stem}-narrow{shot.suffix}")
    driver.save_screenshot(str(shot))
    media = {"features": [{"name": "prefers-color-scheme", "value": "dark"}]}
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", media)
    driver.save_screenshot(str(dark))
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})
    driver.set_window_size(420, 1400)
    time.sleep(0.5)  # laid out again
    driver.save_screenshot(str(narrow))
    driver.set_window_size(1280, 1200)
    return [shot, dark, narrow]


def _text(driver: Any, selector: str) -> str | None:
    """The rendered text of the first element ``selector`` finds, read in one call: the page
    rebuilds its sections as it updates, so an element found in one call may be gone by the
    next (a stale element)."""
    text = driver.execute_script(
        "const e = document.querySelector(arguments[0]); return e ? e.innerText : null", selector
    )
    return None if text is None else str(text)


def _seen(driver: Any, selector: str) -> Callable[[], bool]:
    from selenium.webdriver.common.by import By

    return lambda: bool(driver.find_elements(By.CSS_SELECTOR, selector))


def test_the_page_shows_runs_in_flight_invalid_files_and_a_run_landing_live(
    browser: Any, example: Path
) -> None:
    from selenium.webdriver.common.by import By

    with served(example) as (_, port):
        browser.get(f"http://127.0.0.1:{port}/")
        wait_until("the page is live", _seen(browser, '#connection[data-state="live"]'), 30)
        wait_until("the stuck run", _seen(browser, '#runs tr.stuck[data-task="262"]'), 30)
        row = _text(browser, '#runs tr[data-task="262"]')
        assert "STUCK" in row and "python-implementation-agent" in row
        assert browser.find_elements(By.CSS_SELECTOR, "#runs meter")  # elapsed against timeout
        # What matters first, first: the header's figures, the daemon's state.
        wait_until("the header's figures", lambda: _text(browser, "#sum-stuck") == "1", 30)
        assert "alert" in browser.execute_script(
            "return document.getElementById('sum-stuck').closest('li').className"
        )
        cards = browser.execute_script(
            "return document.querySelectorAll('#invalid article').length"
        )
        assert _text(browser, "#sum-invalid") == str(cards)
        assert "Daemon watching" in (_text(browser, "#roots") or "")
        order = browser.execute_script(
            "return [...document.querySelectorAll('main > section')].map((s) => s.id)"
        )
        assert (
            order.index("flight") < order.index("invalid-section") < order.index("outcomes-section")
        )
        invalid = browser.find_element(By.ID, "invalid").get_attribute("textContent")
        for name in ("260_lsp_setup", "261_agent_registry", "263_flaky_ci"):
            assert name in invalid
        assert "PF203" in invalid and "Write instead:" in invalid
        summaries = browser.execute_script(
            "return document.querySelectorAll('#invalid summary').length"
        )
        assert summaries == cards >= 3
        assert "PF203" in (_text(browser, "#invalid") or "")  # its codes, unfolded
        applied = _seen(browser, '#outcomes li[data-task="259"][data-outcome="applied"]')
        wait_until("task 259's outcome", applied, 30)
        browser.execute_script("window.postflightdMarker = 'same page'")

        agent = subprocess.Popen(
            [sys.executable, str(REPO / "examples" / "agent_sim.py"), str(example),
             "264_demo_run", "--steps", "4", "--interval", "1"],
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            in_flight = _seen(browser, '#runs tr[data-task="264"]')
            wait_until("task 264 in flight", lambda: in_flight() or agent.poll() is not None, 30)
            # Seen while the agent was still writing progress: live, not after the fact.
            assert in_flight(), "the run never showed while the agent was running"
            assert agent.poll() is None, "the run showed only after the agent had finished"
            landed = _seen(browser, '#outcomes li[data-task="264"][data-outcome="applied"]')
            wait_until("task 264's applied outcome", landed, 60)
        finally:
            agent.wait(60)
        text = _text(browser, '#outcomes li[data-task="264"]') or ""
        assert "applied as researched" in text
        wait_until("task 264 leaves the runs in flight", lambda: not in_flight(), 30)
        assert browser.execute_script("return window.postflightdMarker") == "same page"
        assert not [e for e in browser.get_log("browser") if e.get("level") == "SEVERE"], (
            "the page logged errors (a refused resource, a script error)"
        )
        shot = os.environ.get(SCREENSHOT_ENV)
        written: list[Path] = []
        if shot:
            time.sleep(1.6)  # the new outcome's highlight fades first
            for path in _screenshots(browser, Path(shot)):
                written.append(path)
        server_port = port
    # The server goes away and comes back: the page says so, reconnects by itself, and shows
    # what happened meanwhile, still without a reload.
    reconnecting = _seen(browser, '#connection[data-state="reconnecting"]')
    wait_until("the page notices the server is gone", reconnecting, 30)
    (example / "specs" / "262_parser_rewrite" / ".return-meta.json").unlink()
    with served(example, port=server_port):
        wait_until("live again", _seen(browser, '#connection[data-state="live"]'), 60)
        gone = _seen(browser, '#runs tr[data-task="262"]')
        wait_until("the removed run leaves the page", lambda: not gone(), 30)
        assert browser.execute_script("return window.postflightdMarker") == "same page"
    for path in written:
        rewritten(path, SCREENSHOT_ENV)  # a run that wrote a file is never green


def test_each_invalid_file_shows_its_own_fixes_grouped_by_code_errors_before_warnings(
    browser: Any, tmp_path: Path
) -> None:
    """The fixes are this file's (its task directory, the session state.json holds, the status
    its message suggests), five findings of one code are one card, and the warnings stand
    apart from the errors, each with its severity."""
    from selenium.webdriver.common.by import By

    from helpers.documents import SESSION, researched_doc
    from helpers.project import project, write_meta

    root = project(tmp_path / "project", 2)
    doc = researched_doc("1_task1")
    doc["artifacts"][0]["path"] = "/home/me/notes/research.md"
    doc["metadata"]["session_id"] = "sess_1736700999_zzz999"
    doc["next_step"] = "Plan the proof"
    for n in range(4):
        doc[f"extra_{n}"] = n
    write_meta(root, "1_task1", doc)
    near = researched_doc("2_task2")
    near["status"] = "research_done"
    write_meta(root, "2_task2", near)
    with served(root) as (_, port):
        browser.get(f"http://127.0.0.1:{port}/")
        one = '#invalid article[data-file*="1_task1"]'
        wait_until("the invalid files", _seen(browser, f'{one} .finding[data-code="PF205"]'), 30)
        # Each file is folded to its name and codes: opened, as a person opens it (it stays
        # open across live updates).
        browser.execute_script(
            "document.querySelectorAll('#invalid details').forEach(d => d.open = true)"
        )

        def card(file: str, code: str) -> Any:
            (found,) = browser.find_elements(
                By.CSS_SELECTOR,
                f'#invalid article[data-file*="{file}"] .finding[data-code="{code}"]',
            )
            return found

        def fixes(file: str, code: str) -> list[str]:
            return [p.text for p in card(file, code).find_elements(By.TAG_NAME, "pre")]

        unknown = card("1_task1", "PF205")
        assert unknown.get_attribute("data-severity") == "warning"
        assert "\u00d75" in unknown.text and "warning" in unknown.text
        assert fixes("1_task1", "PF205") == ['"next_steps": "Plan the proof"']
        assert fixes("1_task1", "PF501") == ['"path": "specs/1_task1/reports/research.md"']
        assert fixes("1_task1", "PF405") == [f'"session_id": "{SESSION}"']
        assert fixes("2_task2", "PF202") == ['"status": "researched"']
        assert card("1_task1", "PF501").get_attribute("data-severity") == "error"
        # Errors first, the warnings apart after them.
        groups = browser.find_elements(By.CSS_SELECTOR, f"{one} > details > div")
        assert [g.get_attribute("class") for g in groups] == ["errors", "warnings"]
        assert browser.find_elements(
            By.CSS_SELECTOR, f'{one} .warnings .finding[data-code="PF205"]'
        )
        assert not browser.find_elements(By.CSS_SELECTOR, f"{one} .errors .finding.warning")
        assert not [e for e in browser.get_log("browser") if e.get("level") == "SEVERE"]


#: Why task 264's postflight stays incomplete while errors.json holds a number.
ERRORS_UNUSABLE = "errors.json is not usable (a number)"


def _grown_example(root: Path) -> dict[str, str]:
    """The example project grown with what a real one held: a near-miss status (265), a file
    with an artifact outside its task, another session's id and five fields of its own, one
    of them misspelt (266), and a partial outcome (264) whose errors.json record cannot be
    written (errors.json holds a number), so that its postflight stays incomplete. Returns
    the sessions state.json holds, by task."""
    import json

    from helpers.documents import partial_doc, researched_doc, task_entry

    specs = root / "specs"
    state = json.loads((specs / "state.json").read_text(encoding="utf-8"))
    state["active_projects"] += [
        task_entry(265, "near_miss", session_id="sess_1736700600_stu901"),
        task_entry(266, "own_fields", session_id="sess_1736700700_vwx234"),
    ]
    state["next_project_number"] = 267
    (specs / "state.json").write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
    sessions = {str(t["project_number"]): t["session_id"] for t in state["active_projects"]}

    def write(task_dir: str, doc: dict[str, Any]) -> None:
        (specs / task_dir / "reports").mkdir(parents=True, exist_ok=True)
        (specs / task_dir / "reports" / "research-001.md").write_text("# report\n")
        (specs / task_dir / ".return-meta.json").write_text(json.dumps(doc, indent=2) + "\n")

    partial = partial_doc("264_demo_run")
    partial["metadata"]["session_id"] = sessions["264"]
    write("264_demo_run", partial)
    near = researched_doc("265_near_miss")
    near["status"] = "research_done"
    near["metadata"]["session_id"] = sessions["265"]
    write("265_near_miss", near)
    own = researched_doc("266_own_fields")
    own["artifacts"][0]["path"] = "/home/me/notes/research.md"
    own["metadata"]["session_id"] = "sess_1736700999_zzz999"
    del own["next_steps"]
    own["next_step"] = "Plan the proof"
    for n in range(4):
        own[f"extra_{n}"] = n
    write("266_own_fields", own)
    (specs / "errors.json").write_text("42\n", encoding="utf-8")
    return sessions


def _feed(driver: Any) -> list[tuple[str, str, str]]:
    """The outcomes on the page, newest first: (task, outcome, what its badge says)."""
    rows = driver.execute_script(
        "return [...document.querySelectorAll('#outcomes > li')].map((li) =>"
        " [li.dataset.task, li.dataset.outcome, li.querySelector(':scope > .badge').textContent])"
    )
    return [tuple(r) for r in rows]


def _read_again(daemon: Any) -> Callable[[], bool]:
    """Whether a daemon started again has read every file, the truncated one last: summed up
    as unchanged (or, were it journaled again, logged as invalid)."""

    def read() -> bool:
        invalid = [e.get("task") for e in daemon.events("invalid")]
        return bool(daemon.events("unchanged_since_last_run")) or 263 in invalid

    return read


def _partial_count(port: int) -> float:
    """``postflightd_outcomes_total`` for the partial status, over every agent."""
    import http.client

    from prometheus_client.parser import text_string_to_metric_families

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/metrics")
    body = conn.getresponse().read().decode()
    conn.close()
    return sum(
        s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
        if s.name == "postflightd_outcomes_total" and s.labels.get("status") == "partial"
    )


def test_on_the_grown_example_each_outcome_shows_once_and_a_waiting_file_says_why(
    browser: Any, tmp_path: Path
) -> None:
    """The example project grown with the cases a real one held, seen in the page: each
    fix carries the file's own values, a final file waiting says why and since when, two
    restarts of the daemon add nothing to the feed, and a postflight retried while it stays
    incomplete is one entry, counted once in /metrics."""
    from selenium.webdriver.common.by import By

    from helpers.daemon_process import daemons

    root = copy_example(tmp_path / "project")
    sessions = _grown_example(root)
    with served(root) as (_, port), daemons(tmp_path) as start_daemon:
        browser.get(f"http://127.0.0.1:{port}/")
        wait_until("the page is live", _seen(browser, '#connection[data-state="live"]'), 30)
        # No daemon yet: the final files wait, and say why.
        wait_until("the waiting files", _seen(browser, '#waiting tr[data-task="264"]'), 30)
        assert _text(browser, "#sum-waiting") == "2"
        why = _text(browser, '#waiting tr[data-task="259"] .why') or ""
        assert why.startswith("no daemon watches this root") and str(root) in why
        assert "ago" in (_text(browser, '#waiting tr[data-task="259"] .elapsed') or "")
        why = _text(browser, '#waiting tr[data-task="264"] .why') or ""
        assert why.startswith("errors.json is unusable")
        assert "No daemon" in (_text(browser, "#roots") or "")
        # Each fix is the file's own.
        browser.execute_script(
            "document.querySelectorAll('#invalid details').forEach(d => d.open = true)"
        )

        def card(task: str, code: str) -> Any:
            (found,) = browser.find_elements(
                By.CSS_SELECTOR,
                f'#invalid article[data-file*="/{task}_"] .finding[data-code="{code}"]',
            )
            return found

        def fixes(task: str, code: str) -> list[str]:
            return [p.text for p in card(task, code).find_elements(By.TAG_NAME, "pre")]

        # The fix and the message (the CLI's words) name the same value.
        assert fixes("265", "PF202") == ['"status": "researched"']
        assert 'did you mean "researched"?' in card("265", "PF202").text
        assert fixes("266", "PF501") == ['"path": "specs/266_own_fields/reports/research.md"']
        assert fixes("266", "PF405") == [f'"session_id": "{sessions["266"]}"']
        assert card("266", "PF405").text.count(sessions["266"]) == 2
        assert fixes("266", "PF205") == ['"next_steps": "Plan the proof"']
        assert "\u00d75" in card("266", "PF205").text
        assert fixes("260", "PF203") == ['"status": "planned"']
        assert 'write "status": "planned"' in card("260", "PF203").text

        first = start_daemon(root)
        first.wait_event("incomplete")
        # The truncated file is judged last, after the daemon's start.
        judged = lambda: 263 in [e.get("task") for e in first.events("invalid")]  # noqa: E731
        wait_until("the daemon judges task 263", judged, 30)
        assert first.stop() == 0
        applied = _seen(browser, '#outcomes li[data-task="259"][data-outcome="applied"]')
        wait_until("task 259 applied", applied, 30)
        incomplete = _seen(browser, '#outcomes li[data-task="264"][data-outcome="incomplete"]')
        wait_until("task 264's incomplete postflight", incomplete, 30)
        time.sleep(1)  # anything else the first daemon journaled reaches the page
        before = _feed(browser)
        assert [o for o in before if o[0] == "264"] == [
            ("264", "incomplete", f"incomplete: {ERRORS_UNUSABLE}"),
            ("264", "applied", "applied as partial"),
        ]
        assert _partial_count(port) == 1
        why = _text(browser, '#waiting tr[data-task="264"] .why') or ""
        assert why.startswith("errors.json is unusable"), why

        for _ in range(2):
            again = start_daemon(root)
            again.wait_event("incomplete")
            wait_until("the daemon reads every file again", _read_again(again), 30)
            assert again.stop() == 0
        # A file fixed and applied after the restarts: once it shows, every row journaled
        # before it has been read.
        fixed = root / "specs" / "265_near_miss" / ".return-meta.json"
        fixed.write_text(fixed.read_text().replace("research_done", "researched"))
        assert (
            subprocess.run(
                [sys.executable, "-m", "postflightd", "scan", "--apply", str(root)],
                capture_output=True,
                check=False,
            ).returncode
            != 0
        )  # task 264 is still incomplete
        landed = _seen(browser, '#outcomes li[data-task="265"][data-outcome="applied"]')
        wait_until("task 265 applied", landed, 30)
        after = _feed(browser)
        assert after == [("265", "applied", "applied as researched"), *before]
        assert _partial_count(port) == 1
        assert not [e for e in browser.get_log("browser") if e.get("level") == "SEVERE"]


def test_the_figures_follow_new_outcomes_for_the_range_chosen(browser: Any, tmp_path: Path) -> None:
    """The figures frame shows the range chosen above it, and is made again for that range
    once new outcomes land (at most once a minute), without a reload."""
    import re
    from datetime import UTC, date, datetime

    from helpers.documents import researched_doc
    from helpers.project import project, write_meta

    root = project(tmp_path / "project", 2)
    apply = [sys.executable, "-m", "postflightd", "scan", "--apply", str(root)]
    write_meta(root, "1_task1", researched_doc("1_task1"))
    assert subprocess.run(apply, capture_output=True, check=False).returncode == 0

    def frame() -> str:
        return str(
            browser.execute_script(
                "const d = document.getElementById('figures').contentDocument;"
                " return d && d.body ? d.body.innerText : ''"
            )
        )

    def days_back() -> int | None:
        since = re.search(r"\(since (\d{4}-\d\d-\d\d)\)", frame())
        today = datetime.now(UTC).date()
        return (today - date.fromisoformat(since[1])).days if since else None

    with served(root) as (_, port):
        browser.get(f"http://127.0.0.1:{port}/")
        wait_until("the page is live", _seen(browser, '#connection[data-state="live"]'), 30)
        browser.execute_script(
            "const r = document.getElementById('range'); r.value = '30d';"
            " r.dispatchEvent(new Event('change'))"
        )
        wait_until("the figures of 30 days", lambda: days_back() in (29, 30, 31), 30)
        assert "1 run," in frame()
        write_meta(root, "2_task2", researched_doc("2_task2"))
        assert subprocess.run(apply, capture_output=True, check=False).returncode == 0
        landed = _seen(browser, '#outcomes li[data-task="2"][data-outcome="applied"]')
        wait_until("task 2's outcome", landed, 30)
        wait_until("the figures made again", lambda: "2 runs," in frame(), 90)
        assert days_back() in (29, 30, 31)
        assert browser.execute_script("return document.getElementById('range').value") == "30d"
        assert not [e for e in browser.get_log("browser") if e.get("level") == "SEVERE"]
