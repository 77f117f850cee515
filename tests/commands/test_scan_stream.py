"""The streamed scan: same bytes as the whole report, a lean state.json read, worker count."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from helpers.documents import researched_doc, task_entry
from helpers.needs import require_tool
from helpers.project import project, write_artifact, write_meta
from postflightd.config import Config, policy_from
from postflightd.inert import json_text
from postflightd.pipeline import apply as pipeline
from postflightd.pipeline import parallel
from postflightd.project.scan_state import SCAN_FIELDS, load_state_for_scan
from postflightd.project.state import StateView, load_state
from postflightd.reporters.scan import REPORTERS, Scanned, write_github, write_json, write_text
from postflightd.reporters.style import Options


def full_state(path: Path) -> StateView:
    """What postflight reads (``loader.load_state``, through the tree layer)."""
    from postflightd.fs.directory import Directory

    with Directory.anchor(path.parent) as specs:
        return load_state(specs, path.name)


def _mixed_project(root: Path, n: int = 40) -> Path:
    """Valid, invalid, meta-task, unknown-task and non-UTF-8 metadata files; fat task entries."""
    tasks = [
        task_entry(
            i,
            f"t{i}",
            language="meta" if i % 4 == 0 else "general",
            description="é" * 50,
            artifacts=[{"type": "report", "path": f"specs/{i}_t{i}/r.md", "summary": "s"}],
        )
        for i in range(1, n + 1, 2)
    ]
    project(root, tasks)
    for i in range(1, n + 1):
        doc: Any = researched_doc(f"{i}_t{i}")
        if i % 7 == 0:
            doc["status"] = "completed"
        if i % 3 == 0:
            write_artifact(root, f"specs/{i}_t{i}/reports/research-001.md")
        if i % 11 == 0:
            doc = '{"status": '
        write_meta(root, f"{i}_t{i}", doc)
    (root / "specs" / "99_bad" / ".return-meta.json").parent.mkdir()
    (root / "specs" / "99_bad" / ".return-meta.json").write_bytes(b'{"status": "\xff"}')
    return root


def _scan_cli(root: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "postflightd", "scan", *args, str(root)],
        capture_output=True,
        cwd=root.parent,
        check=False,
        timeout=120,
    )


@pytest.mark.parametrize("fmt", ["json", "text", "github", "sarif"])
def test_streamed_output_is_the_whole_reports_output(tmp_path: Path, fmt: str) -> None:
    """The CLI streams; the in-memory report, written whole, gives the very same bytes."""
    root = _mixed_project(tmp_path / "p")
    done = _scan_cli(root, "--format", fmt)
    assert done.returncode == 1, done.stderr
    config = Config()
    report = pipeline.scan(
        [root.resolve()],
        config,
        policy_from(config),
        datetime.now(UTC),
        positions=fmt in ("github", "sarif"),
    )
    out = io.StringIO()
    REPORTERS[fmt](
        Scanned(report.roots, report.files, report.tally()), out, Options(cwd=str(tmp_path))
    )
    assert done.stdout.decode("utf-8") == out.getvalue()
    assert len(report.files) == 41


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("count", [0, 1, 3])
def test_json_written_piecewise_is_json_dumps_of_the_whole(tmp_path: Path, count: int) -> None:
    """Compact and indented (a terminal): byte for byte ``json.dumps`` of the whole object."""
    root = project(tmp_path / "p", [task_entry(1, "a")])
    for i in range(1, count + 1):
        write_meta(root, f"{i}_t{i}", researched_doc(f"{i}_t{i}") if i != 2 else "[1, 2")
    config = Config()
    report = pipeline.scan([root], config, policy_from(config), datetime.now(UTC))
    for stream, indent in ((io.StringIO(), None), (_Terminal(), 2)):
        write_json(Scanned(report.roots, report.files, report.tally()), stream)
        assert stream.getvalue() == json_text(report.to_json(), indent=indent) + "\n"
        assert json.loads(stream.getvalue())["summary"]["files"] == count


def test_text_and_github_stream_empty_scans(tmp_path: Path) -> None:
    root = project(tmp_path / "p", None)
    config = Config()
    report = pipeline.scan([root], config, policy_from(config), datetime.now(UTC))
    text, github = io.StringIO(), io.StringIO()
    write_text(Scanned(report.roots, report.files, report.tally()), text)
    write_github(Scanned(report.roots, report.files, report.tally()), github)
    assert text.getvalue() == "0 files: 0 valid, 0 invalid; 0 errors, 0 warnings\n"
    assert github.getvalue() == ""


#: state.json decoded by msgspec (by default for a file of 3 MiB or more), or parsed by the
#: full reader, whatever the file's size.
READERS: dict[str, dict[str, int]] = {"msgspec": {"whole_min": 0}, "full": {"whole_min": 1 << 62}}


@pytest.mark.parametrize("reader", READERS)
def test_lean_state_has_the_scan_fields_of_the_full_state(tmp_path: Path, reader: str) -> None:
    root = _mixed_project(tmp_path / "p")
    path = root / "specs" / "state.json"
    lean, full = load_state_for_scan(path, **READERS[reader]), full_state(path)
    assert lean.usable and lean.problem is None
    assert set(lean.tasks) == set(full.tasks)
    for number, task in full.tasks.items():
        assert lean.tasks[number] == {k: task[k] for k in SCAN_FIELDS if k in task}


def test_lean_state_keeps_only_the_fields_present(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.write_text('{"active_projects": [{"project_number": 3, "language": null, "x": [1]}]}')
    assert load_state_for_scan(path).tasks == {3: {"project_number": 3, "language": None}}


BAD_STATES: list[bytes] = [
    b"",
    b"   \n",
    b"\xef\xbb\xbf" + b'{"active_projects": []}',
    b'{"active_projects": [{"project_number": 1, "x": "\xff"}]}',  # bad UTF-8, skipped field
    b'{"active_projects": [{"project_number": 1, "x": NaN}]}',
    b'{"active_projects": [{"project_number": true}]}',
    b'{"active_projects": [{"project_number": "1"}]}',
    b'{"active_projects": [{"name": "no number"}]}',
    b'{"active_projects": [7]}',
    b'{"active_projects": {}}',
    b'{"tasks": []}',
    b"[]",
    b'{"active_projects": []} trailing',
    b'{"active_projects": [{"project_number": 1, "x": "a\x01b"}]}',
    b'{"active_projects": [{"project_number": 1, "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}]}",
    b'{"active_projects": [',
    b'{"active_projects": [{"project_number": 1}], "active_projects": 5}',
    b'{"active_projects": [{"project_number": 1}]}}',
    b'{"active_projects": [{"project_number": 1}} ]}',
    b'{"active_projects": [{"project_number": 1}, ]}',
    b'{"a": Infinity, "active_projects": []}',
    b"{}",
    b"{,}",
]


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("raw", BAD_STATES, ids=range(len(BAD_STATES)))
def test_lean_state_calls_unusable_what_load_state_calls_unusable(
    tmp_path: Path, raw: bytes, reader: str
) -> None:
    path = tmp_path / "state.json"
    path.write_bytes(raw)
    lean, full = load_state_for_scan(path, **READERS[reader]), full_state(path)
    assert not full.usable
    assert (lean.usable, lean.exists, lean.problem) == (False, True, full.problem)


ODD_BUT_USABLE: list[bytes] = [
    b'{"active_projects": [{"project_number": 1, "project_name": "\\ud800"}]}',
    b'{"active_projects": [{"project_number": 1, "x": 123456789012345678901234567890}]}',
    b'{"active_projects": [{"project_number": 123456789012345678901234567890}]}',
    b'{"active_projects": [{"project_number": 1, "project_number": 2}]}',
    '{"active_projects": [{"project_number": 1, "project_name": "né"}]}'.encode(),
    b' {"x": {"active_projects": 1}, "active_projects": [{"project_number": 12345}] ,"y":-1.5e3}',
    b'{"active_projects": [{"project_number": 1}], "active_projects": [{"project_number": 2}]}',
    b'{"active_projects": [\n\t{"project_number": 10, "status": "x", "session_id": 1}\r\n]}\n',
    b'{"active_projects": []}',
]


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("raw", ODD_BUT_USABLE, ids=range(len(ODD_BUT_USABLE)))
def test_lean_state_reads_what_load_state_reads(tmp_path: Path, raw: bytes, reader: str) -> None:
    path = tmp_path / "state.json"
    path.write_bytes(raw)
    lean, full = load_state_for_scan(path, **READERS[reader]), full_state(path)
    assert full.usable and lean.usable
    assert lean.tasks == {
        n: {k: t[k] for k in SCAN_FIELDS if k in t} for n, t in full.tasks.items()
    }


def test_lean_state_missing_or_a_directory(tmp_path: Path) -> None:
    missing = load_state_for_scan(tmp_path / "state.json")
    assert (missing.exists, missing.problem) == (False, "state.json does not exist")
    (tmp_path / "state.json").mkdir()
    assert load_state_for_scan(tmp_path / "state.json").problem == "state.json is a directory"


def test_scan_with_an_unusable_state_says_pf604_once(tmp_path: Path) -> None:
    root = project(tmp_path / "p", [task_entry(1, "a")])
    (root / "specs" / "state.json").write_bytes(b'{"active_projects": [{"project_number": 1')
    write_meta(root, "1_a", researched_doc("1_a"))
    done = _scan_cli(root, "--format", "json")
    assert done.returncode == 1
    # Said once, as state.json's own finding on stdout (a note too only without files).
    assert "PF604" not in done.stderr.decode()
    files = json.loads(done.stdout)["files"]
    assert (files[0]["path"], [x["code"] for x in files[0]["findings"]]) == (
        "specs/state.json",
        ["PF604"],
    )
    assert "PF604" not in [x["code"] for f in files[1:] for x in f["findings"]]


def test_worker_count_follows_the_cores_the_process_may_use() -> None:
    require_tool("taskset", "it narrows the cores the process may use (util-linux)")
    code = (
        "from postflightd.pipeline.parallel import worker_count as w;"
        " print(w(10), w(10_000), w(10**6))"
    )
    one = subprocess.run(
        ["taskset", "-c", "0", sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
    )
    assert one.stdout.split() == ["1", "1", "1"]
    import os

    cores = len(os.sched_getaffinity(0))
    anywhere = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    small, mid, big = (int(x) for x in anywhere.stdout.split())
    assert small == 1
    assert mid == min(cores, 1 + 10_000 // parallel.PARALLEL_MIN_FILES)
    assert big == cores


def test_a_reader_that_goes_away_stops_the_workers(tmp_path: Path) -> None:
    """`scan | head -1` past the fork threshold: exit 141 (the verdict went unread: never 0)
    without a traceback or a stray process."""
    n = parallel.PARALLEL_MIN_FILES + 600
    root = project(tmp_path / "p", [])
    for i in range(1, n + 1):
        write_meta(root, f"{i}_t{i}", "{")
    with subprocess.Popen(
        [sys.executable, "-m", "postflightd", "scan", str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as scan:
        assert scan.stdout is not None and scan.stderr is not None
        first = scan.stdout.readline()
        scan.stdout.close()  # as `head -1` does
        err = scan.stderr.read()
        assert scan.wait(timeout=120) == 141
    assert b"PF102 error: the file ends at 1:2 before its JSON is complete" in first
    assert b"Traceback" not in err
