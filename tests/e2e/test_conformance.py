"""Conformance: the six classic cases of return validation, and the metadata format's own
valid examples (tests/fixtures/metadata_examples/).

The six cases (plain text, a missing status, status "success", a phantom research, a missing
artifact file, a valid return) were written for a console return; here they are adapted to
the metadata file (``specs/{N}_{SLUG}/.return-meta.json``) and run through ``postflightd scan``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from helpers.documents import task_entry
from helpers.paths import FIXTURES
from helpers.project import project, write_artifact, write_meta
from postflightd.cli import main
from postflightd.config import Config
from postflightd.pipeline.apply import scan
from postflightd.rules.findings import Policy, Severity

METADATA_EXAMPLES = FIXTURES / "metadata_examples"
TASK = "1_setup_lsp_config"
SID = "sess_1736700000_abc123"
REPORT = f"specs/{TASK}/reports/research-001.md"


def _metadata() -> dict[str, Any]:
    return {
        "session_id": SID,
        "agent_type": "researcher",
        "delegation_depth": 1,
        "delegation_path": ["orchestrator", "research", "researcher"],
    }


def _researched(artifacts: list[dict[str, str]]) -> dict[str, Any]:
    return {"status": "researched", "artifacts": artifacts, "metadata": _metadata()}


def _scan(root: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code = main(["scan", "--format", "json", str(root)])
    report = json.loads(capsys.readouterr().out)
    assert len(report["files"]) == 1
    file: dict[str, Any] = report["files"][0]
    return code, file


def _codes(file: dict[str, Any], severity: str = "error") -> list[str]:
    return [f["code"] for f in file["findings"] if f["severity"] == severity]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return project(tmp_path, [task_entry(1, "setup_lsp_config", session_id=SID)])


def test_case_1_plain_text_return(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Case 1: plain text instead of JSON fails to parse, and reports only that."""
    write_meta(root, TASK, "Research completed successfully\n")
    code, file = _scan(root, capsys)
    assert code == 1
    assert [f["code"] for f in file["findings"]] == ["PF102"]
    assert "not valid JSON at 1:1" in file["findings"][0]["message"]
    assert file["valid"] is False


def test_case_2_missing_required_field(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Case 2: ``status`` missing is named as the missing required field."""
    write_meta(root, TASK, '{"summary": "Done", "artifacts": []}')
    code, file = _scan(root, capsys)
    assert code == 1
    missing = {f["location"] for f in file["findings"] if f["code"] == "PF200"}
    assert {"status", "metadata"} <= missing
    assert file["valid"] is False


def test_case_3_invalid_status(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Case 3: ``"status": "success"`` is not a status; the probable one is named, and the
    file is judged as that one at the same time (every finding at once): a research run with
    no artifact is a phantom too."""
    doc = {"status": "success", "summary": "Done", "artifacts": [], "metadata": _metadata()}
    write_meta(root, TASK, doc)
    code, file = _scan(root, capsys)
    assert code == 1
    assert _codes(file) == ["PF202", "PF500"]
    assert 'did you mean "researched"' in file["findings"][0]["message"]
    assert file["status"] == "success"


def test_case_4_phantom_research(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Case 4: a success status with no artifacts is a phantom operation."""
    write_meta(root, TASK, _researched([]))
    code, file = _scan(root, capsys)
    assert code == 1
    assert _codes(file) == ["PF500"]
    assert "phantom" in file["findings"][0]["message"]


def test_case_5_missing_artifact_file(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Case 5: an artifact listed but not on disk (paths are root-relative here)."""
    artifact = {"type": "report", "path": REPORT, "summary": "Research report"}
    write_meta(
        root, TASK, {"status": "researched", "artifacts": [artifact], "metadata": _metadata()}
    )
    code, file = _scan(root, capsys)
    assert code == 1
    assert _codes(file) == ["PF502"]
    assert file["findings"][0]["location"] == "artifacts[0].path"


def test_case_5_as_written_absolute_artifact_path(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Case 5 as first written lists ``/nonexistent/file.md``: an absolute path is PF501."""
    artifact = {"type": "report", "path": "/nonexistent/file.md", "summary": "Research report"}
    write_meta(
        root, TASK, {"status": "researched", "artifacts": [artifact], "metadata": _metadata()}
    )
    code, file = _scan(root, capsys)
    assert code == 1
    assert _codes(file) == ["PF501"]


def test_case_6_valid_return(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Case 6: an existing, non-empty artifact and full metadata validate clean."""
    write_artifact(root, REPORT, "Test content\n")
    artifact = {"type": "report", "path": REPORT, "summary": "Research report"}
    write_meta(
        root, TASK, {"status": "researched", "artifacts": [artifact], "metadata": _metadata()}
    )
    code, file = _scan(root, capsys)
    assert code == 0
    assert file["findings"] == []
    assert file["valid"] is True


# --- the metadata format's own examples ----------------------------------------------------

EXAMPLES = sorted(METADATA_EXAMPLES.glob("*.json"))
#: The examples start in-progress runs at this instant; scan them a minute later.
EXAMPLES_NOW = datetime(2026, 1, 28, 10, 31, tzinfo=UTC)


#: The examples' own deviations from the format's field rules, reported as warnings only.
EXAMPLE_WARNINGS = {
    # metadata.phase_count and estimated_hours are not in the schema (kept as is).
    "planning_success": {"PF205"},
    # The format asks for partial_progress on partial files; its own example has none.
    "implementation_partial": {"PF302"},
}


def test_the_metadata_examples_are_all_present() -> None:
    assert len(EXAMPLES) == 9


def _project_for(tmp_path: Path, doc: dict[str, Any]) -> Path:
    """A project where the example's task exists, its session is expected, its files exist."""
    task_dir = next(
        (
            a["path"].split("/")[1]
            for a in doc["artifacts"]
            if a["path"].startswith("specs/") and a["path"].count("/") >= 2
        ),
        TASK,
    )
    number, _, slug = task_dir.partition("_")
    completion = doc.get("completion_data") or {}
    language = "meta" if "claudemd_suggestions" in completion else "neovim"
    entry = task_entry(
        int(number), slug, session_id=doc["metadata"]["session_id"], language=language
    )
    root = project(tmp_path, [entry])
    write_meta(root, task_dir, doc)
    for artifact in doc["artifacts"]:
        write_artifact(root, artifact["path"])
    return root


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_metadata_example_has_no_errors(tmp_path: Path, example: Path) -> None:
    """Every example of the format meant to be valid validates without errors."""
    doc = json.loads(example.read_text(encoding="utf-8"))
    root = _project_for(tmp_path, doc)
    report = scan([root], Config(), Policy(), EXAMPLES_NOW)
    [file] = report.files
    errors = [f for f in file.findings if f.severity is Severity.ERROR]
    assert errors == []
    assert file.valid
    assert not file.stuck
    assert {f.code for f in file.findings} == EXAMPLE_WARNINGS.get(example.stem, set())
