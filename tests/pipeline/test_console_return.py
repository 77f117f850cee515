"""``check-return``: the six classic cases of return validation, the contracts' own valid
examples, one failing case per rule,
dialect detection, extraction from a final message, and the bad-input list."""

from __future__ import annotations

import copy
import io
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.paths import FIXTURES, REPO
from postflightd.cli import main
from postflightd.models.terms import Dialect
from postflightd.pipeline.console_extract import (
    MAX_RETURN_BYTES,
    Origin,
    detect_dialect,
    extract_return,
)
from postflightd.pipeline.console_return import check_bytes, return_probe
from postflightd.rules.findings import RULES, Policy, Severity
from postflightd.rules.probe import ArtifactState

RETURNS = FIXTURES / "returns"
METADATA_DOC = REPO / "docs" / "metadata.md"
SESSION = "sess_1735460684_a1b2c3"

Report = dict[str, Any]


def check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Report]:
    """Run ``postflightd check-return ARGS --format json`` in-process."""
    code = main(["check-return", *args, "--format", "json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out)


def codes(report: Report) -> list[str]:
    return [f["code"] for f in report["findings"]]


def at(report: Report, code: str) -> list[str]:
    """Locations of the findings with ``code``."""
    return [f["location"] for f in report["findings"] if f["code"] == code]


def write(tmp_path: Path, text: str, name: str = "test_return.json") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def fixture(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((RETURNS / name).read_text(encoding="utf-8"))
    return doc


def create_artifacts(root: Path, doc: dict[str, Any]) -> None:
    for art in doc.get("artifacts", []):
        path = root / art["path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("content\n", encoding="utf-8")


def set_stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))


# --- the six classic cases an orchestrator's return validation is tested on ---------------


def test_plain_text_return_is_rejected(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Case 1: 'Research completed successfully' holds no JSON at all."""
    path = write(tmp_path, "Research completed successfully\n")
    code, report = check(capsys, path, "--root", str(tmp_path))
    assert code == 1
    assert report["valid"] is False
    assert codes(report) == ["PF700"]


def test_return_without_status_names_the_missing_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Case 2: no status field (and no metadata) is a missing required field."""
    path = write(tmp_path, '{"summary": "Done", "artifacts": []}\n')
    code, report = check(capsys, path, "--root", str(tmp_path))
    assert code == 1
    assert "status" in at(report, "PF200")
    assert "metadata" in at(report, "PF200")


def test_status_success_is_invalid_and_completed_is_suggested(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Case 3: status 'success' is not in the enum; the message names the likely one."""
    path = write(
        tmp_path, '{"status": "success", "summary": "Done", "artifacts": [], "metadata": {}}\n'
    )
    code, report = check(capsys, path, "--root", str(tmp_path))
    assert code == 1
    (status,) = [f for f in report["findings"] if f["code"] == "PF202"]
    assert status["location"] == "status"
    assert "'success'" in status["message"]
    assert '"completed"' in status["message"]


def test_completed_without_artifacts_is_a_phantom_operation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Case 4: completed with no artifacts is a phantom operation."""
    path = write(
        tmp_path,
        '{"status": "completed", "summary": "Done", "artifacts": [], '
        '"metadata": {"session_id": "test"}}\n',
    )
    code, report = check(capsys, path, "--root", str(tmp_path))
    assert code == 1
    assert at(report, "PF500") == ["artifacts"]


def test_artifact_missing_on_disk_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Case 5: an artifact path that does not exist on disk.

    The classic case has no project root: its whole file system is the root (``--root /``). Under a
    narrower root the same path is PF501, outside, whether or not it exists.
    """
    path = write(
        tmp_path,
        '{"status": "completed", "summary": "Done", '
        '"artifacts": [{"path": "/nonexistent/file.md"}], "metadata": {"session_id": "test"}}\n',
    )
    code, report = check(capsys, path, "--root", "/")
    assert code == 1
    assert at(report, "PF502") == ["artifacts[0].path"]
    (missing,) = [f for f in report["findings"] if f["code"] == "PF502"]
    assert "does not exist" in missing["message"]


def test_return_with_an_existing_artifact_is_valid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Case 6: an existing, non-empty artifact (an absolute path, as the classic case writes it)
    passes."""
    artifact = tmp_path / "test_artifact.md"
    artifact.write_text("Test content\n", encoding="utf-8")
    doc = {
        "status": "completed",
        "summary": "Done",
        "artifacts": [{"path": str(artifact)}],
        "metadata": {
            "session_id": "test",
            "agent_type": "researcher",
            "delegation_depth": 1,
            "delegation_path": ["orchestrator", "research", "researcher"],
        },
    }
    path = write(tmp_path, json.dumps(doc))
    code, report = check(capsys, path, "--root", str(tmp_path))
    assert code == 0
    assert report["valid"] is True
    assert report["status"] == "completed"
    # The classic valid case deviates from the contract in ways that do not matter:
    # a session id not of the sess_ form, an artifact without type and summary.
    assert {f["severity"] for f in report["findings"]} == {"warning"}
    assert set(codes(report)) == {"PF400", "PF207"}


# --- the contracts' own examples, meant to be valid ------------------------------------------

CONTRACT_EXAMPLES = sorted(
    p.name
    for pattern in ("subagent_return_*.json", "agent_output_*.json")
    for p in RETURNS.glob(pattern)
)


@pytest.mark.parametrize("name", CONTRACT_EXAMPLES)
def test_contract_examples_validate_cleanly(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every example the two contracts give validates with no finding at all (auto dialect)."""
    create_artifacts(tmp_path, fixture(name))
    code, report = check(capsys, str(RETURNS / name), "--root", str(tmp_path))
    assert report["findings"] == []
    assert code == 0
    assert report["valid"] is True
    expected = Dialect.AGENT_OUTPUT if name.startswith("agent_output_") else Dialect.SUBAGENT_RETURN
    assert report["dialect"] == expected.value
    assert report["extracted_from"] == "bare"


def test_contract_examples_cover_every_status_of_both_dialects() -> None:
    """The fixtures exercise completed/partial/failed and complete/partial/error."""
    statuses = {fixture(n).get("status") or fixture(n)["meta"]["status"] for n in CONTRACT_EXAMPLES}
    assert statuses == {"completed", "partial", "failed", "complete", "error"}


def test_partial_and_failed_returns_do_not_need_their_artifacts_on_disk(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The disk is checked only for completed: a partial run's artifacts may not be written yet."""
    name = "subagent_return_partial_implementation.json"
    code, report = check(capsys, str(RETURNS / name), "--root", str(tmp_path))
    assert (code, report["findings"]) == (0, [])


# --- one failing case per rule ---------------------------------------------------------------


def subagent_doc() -> dict[str, Any]:
    return fixture("subagent_return_completed_plan.json")


def output_doc() -> dict[str, Any]:
    return fixture("agent_output_research_agent.json")


def probe_all(state: ArtifactState) -> Callable[[str], ArtifactState]:
    return lambda _path: state


def validated(
    doc: object,
    *,
    expect_session: str | None = None,
    probe: Callable[[str], ArtifactState] | None = None,
    policy: Policy | None = None,
) -> Report:
    """check_bytes on a document, with every artifact present unless ``probe`` says otherwise."""
    raw = json.dumps(doc).encode()
    report = check_bytes(
        raw,
        "test",
        "auto",
        expect_session,
        probe or probe_all(ArtifactState.OK),
        policy,
    )
    return report.to_json()


def _set(doc: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    *parents, last = dotted.split(".")
    target: Any = out
    for part in parents:
        target = target[int(part)] if part.isdigit() else target[part]
    if value is _DELETE:
        del target[last]
    else:
        target[last] = value
    return out


_DELETE = object()

SUBAGENT_CASES = [
    # (field to change, new value, expected code, expected location)
    ("summary", _DELETE, "PF200", "summary"),
    ("metadata.delegation_path", _DELETE, "PF200", "metadata.delegation_path"),
    ("artifacts.0.path", _DELETE, "PF200", "artifacts[0].path"),
    ("metadata.delegation_depth", "1", "PF201", "metadata.delegation_depth"),
    ("artifacts", {"path": "x.md"}, "PF201", "artifacts"),
    ("next_steps", ["Run /implement 244"], "PF201", "next_steps"),
    ("status", "Completed", "PF202", "status"),
    ("artifacts.0.type", "diagram", "PF204", "artifacts[0].type"),
    ("confidence", 0.9, "PF205", "confidence"),
    ("metadata.model", "opus", "PF205", "metadata.model"),
    ("summary", "   ", "PF206", "summary"),
    ("artifacts.0.summary", _DELETE, "PF207", "artifacts[0].summary"),
    ("metadata.session_id", "session-42", "PF400", "metadata.session_id"),
    ("metadata.delegation_depth", 4, "PF401", "metadata.delegation_depth"),
    (
        "metadata.delegation_path",
        ["orchestrator", "plan", "planner", "plan", "planner"],
        "PF402",
        "metadata.delegation_path",
    ),
    ("metadata.delegation_depth", 2, "PF403", "metadata.delegation_depth"),
    ("metadata.agent_type", "researcher", "PF404", "metadata.agent_type"),
    ("metadata.duration_seconds", -5, "PF406", "metadata.duration_seconds"),
    ("artifacts", [], "PF500", "artifacts"),
    ("artifacts.0.path", "../elsewhere/plan.md", "PF501", "artifacts[0].path"),
    ("summary", "x" * 401, "PF701", "summary"),
    ("summary", "x" * 501, "PF702", "summary"),
    ("status", "blocked", "PF703", "errors"),
]


@pytest.mark.parametrize(("field", "value", "code", "loc"), SUBAGENT_CASES)
def test_subagent_return_rule_fails(field: str, value: Any, code: str, loc: str) -> None:
    """Each subagent-return rule reports its code at the field it is about."""
    report = validated(_set(subagent_doc(), field, value))
    assert loc in at(report, code), report["findings"]
    finding = next(f for f in report["findings"] if f["code"] == code)
    assert finding["severity"] == RULES[code].severity.value
    assert report["valid"] is (RULES[code].severity is Severity.WARNING)


OUTPUT_CASES = [
    ("meta.agent_name", _DELETE, "PF200", "meta.agent_name"),
    ("next_steps", _DELETE, "PF200", "next_steps"),
    ("meta.execution_time_ms", "15230", "PF201", "meta.execution_time_ms"),
    ("next_steps", "Research OAuth SDKs", "PF201", "next_steps"),
    ("artifacts.0.key_points", "JWT tokens", "PF201", "artifacts[0].key_points"),
    ("meta.status", "completed", "PF202", "meta.status"),
    ("artifacts.0.type", "report", "PF204", "artifacts[0].type"),
    ("meta.model", "sonnet", "PF205", "meta.model"),
    ("meta.agent_name", "", "PF206", "meta.agent_name"),
    ("artifacts.0.key_points", _DELETE, "PF207", "artifacts[0].key_points"),
    ("meta.execution_time_ms", -1, "PF406", "meta.execution_time_ms"),
    ("meta.status", "error", "PF704", "error"),
    ("artifacts.0.key_points", ["one", "two"], "PF705", "artifacts[0].key_points"),
    ("artifacts.0.key_points", ["1", "2", "3", "4", "5", "6"], "PF705", "artifacts[0].key_points"),
]


@pytest.mark.parametrize(("field", "value", "code", "loc"), OUTPUT_CASES)
def test_agent_output_rule_fails(field: str, value: Any, code: str, loc: str) -> None:
    """Each agent-output rule reports its code at the field it is about."""
    report = validated(_set(output_doc(), field, value))
    assert report["dialect"] == "agent-output"
    assert loc in at(report, code), report["findings"]
    assert report["valid"] is (RULES[code].severity is Severity.WARNING)


def test_agent_output_partial_without_next_steps() -> None:
    """Agent output: a partial status explains what is left in next_steps."""
    doc = _set(_set(output_doc(), "meta.status", "partial"), "next_steps", [])
    report = validated(doc)
    assert at(report, "PF706") == ["next_steps"]
    assert report["valid"] is True


def test_agent_output_status_suggestion_names_the_dialects_word() -> None:
    report = validated(_set(output_doc(), "meta.status", "completed"))
    (status,) = [f for f in report["findings"] if f["code"] == "PF202"]
    assert '"complete"' in status["message"]


def test_session_mismatch_with_expect_session() -> None:
    """--expect-session: a foreign session is PF405; the delegated one passes."""
    report = validated(subagent_doc(), expect_session="sess_1735460684_zzzzzz")
    assert at(report, "PF405") == ["metadata.session_id"]
    assert report["valid"] is False
    assert validated(subagent_doc(), expect_session=SESSION)["findings"] == []


def test_expect_session_from_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = subagent_doc()
    create_artifacts(tmp_path, doc)
    path = write(tmp_path, json.dumps(doc))
    code, report = check(capsys, path, "--root", str(tmp_path), "--expect-session", "sess_1_aaaaaa")
    assert code == 1
    assert codes(report) == ["PF405"]


@pytest.mark.parametrize(
    ("state", "code"),
    [
        (ArtifactState.MISSING, "PF502"),
        (ArtifactState.NOT_A_FILE, "PF502"),
        (ArtifactState.EMPTY, "PF503"),
        (ArtifactState.OUTSIDE, "PF501"),
    ],
)
def test_artifact_on_disk_rules_for_the_success_status(state: ArtifactState, code: str) -> None:
    """completed and complete: each artifact must exist inside the root and be non-empty."""
    for doc in (subagent_doc(), output_doc()):
        report = validated(doc, probe=probe_all(state))
        assert at(report, code) == ["artifacts[0].path"]
        assert report["valid"] is False


@pytest.mark.parametrize(
    ("doc", "status"),
    [
        (fixture("subagent_return_failed_research.json"), "failed"),
        (fixture("subagent_return_partial_timeout.json"), "partial"),
        (fixture("agent_output_verification_agent.json"), "partial"),
        (fixture("agent_output_error_response.json"), "error"),
    ],
)
def test_artifacts_are_not_probed_for_other_statuses(doc: dict[str, Any], status: str) -> None:
    assert validated(doc, probe=probe_all(ArtifactState.MISSING))["findings"] == []
    assert validated(doc)["status"] == status


def test_errors_required_for_each_status_but_completed() -> None:
    """Subagent return: partial, failed and blocked must say what went wrong."""
    for status in ("partial", "failed", "blocked"):
        report = validated(_set(subagent_doc(), "status", status))
        assert at(report, "PF703") == ["errors"]
        empty = validated(_set(_set(subagent_doc(), "status", status), "errors", []))
        assert at(empty, "PF703") == ["errors"]
    assert at(validated(subagent_doc()), "PF703") == []


def test_duplicate_artifact_path_is_reported() -> None:
    doc = subagent_doc()
    doc["artifacts"].append(dict(doc["artifacts"][0]))
    assert at(validated(doc), "PF504") == ["artifacts[1].path"]


def test_summary_limits_are_inclusive() -> None:
    """400 characters is fine, 500 only warns: orchestrators refuse a summary over 500."""
    assert validated(_set(subagent_doc(), "summary", "x" * 400))["findings"] == []
    report = validated(_set(subagent_doc(), "summary", "x" * 500))
    assert codes(report) == ["PF701"]


def test_absolute_artifact_outside_the_root_is_refused(tmp_path: Path) -> None:
    """An absolute path is accepted only when it lies inside --root."""
    root = tmp_path / "root"
    root.mkdir()
    outside = tmp_path / "elsewhere.md"
    outside.write_text("x", encoding="utf-8")
    inside = root / "specs" / "plan.md"
    inside.parent.mkdir()
    inside.write_text("x", encoding="utf-8")
    probe = return_probe(root)
    assert probe(str(outside)) is ArtifactState.OUTSIDE
    assert probe(str(inside)) is ArtifactState.OK
    assert probe("specs/plan.md") is ArtifactState.OK
    assert probe(str(root / "nope.md")) is ArtifactState.MISSING
    (root / "link.md").symlink_to(outside)
    assert probe(str(root / "link.md")) is ArtifactState.OUTSIDE


def test_absolute_path_outside_the_root_does_not_reveal_whether_it_exists(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An existing and a missing path outside --root get the same PF501, and no PF502."""
    root = tmp_path / "root"
    root.mkdir()
    secret = tmp_path / "secret.md"
    secret.write_text("x", encoding="utf-8")
    findings = []
    for artifact in (str(secret), str(tmp_path / "no-such-dir" / "file.md")):
        doc = {
            "status": "completed",
            "summary": "Done",
            "artifacts": [{"path": artifact}],
            "metadata": {"session_id": "test"},
        }
        code, report = check(capsys, write(tmp_path, json.dumps(doc)), "--root", str(root))
        assert code == 1
        assert at(report, "PF501") == ["artifacts[0].path"]
        assert at(report, "PF502") == []
        findings.append(
            [
                f["message"].replace(artifact, "P")
                for f in report["findings"]
                if f["code"] == "PF501"
            ]
        )
    assert findings[0] == findings[1]


def test_every_new_rule_is_registered_and_documented(capsys: pytest.CaptureFixture[str]) -> None:
    """PF700-PF706 live in the one registry, in `postflightd rules` (which the rules page is
    made from) and in the page that documents console returns."""
    assert main(["rules"]) == 0
    listed = capsys.readouterr().out.splitlines()
    page = METADATA_DOC.read_text(encoding="utf-8")
    for code in ("PF700", "PF701", "PF702", "PF703", "PF704", "PF705", "PF706"):
        assert code in RULES
        assert any(line.split()[:2] == [code, RULES[code].severity.value] for line in listed)
        assert code in page


# --- dialect detection -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("doc", "marked", "dialect"),
    [
        ({"meta": {}}, False, Dialect.AGENT_OUTPUT),
        ({"status": "completed"}, False, Dialect.SUBAGENT_RETURN),
        ({"status": "completed"}, True, Dialect.SUBAGENT_RETURN),
        ({"metadata": {}, "artifacts": []}, False, Dialect.SUBAGENT_RETURN),
        ({"artifacts": [], "next_steps": []}, False, Dialect.AGENT_OUTPUT),
        ({"artifacts": [{"key_points": []}]}, False, Dialect.AGENT_OUTPUT),
        ({"error": {"message": "x"}}, False, Dialect.AGENT_OUTPUT),
        ({}, False, Dialect.SUBAGENT_RETURN),
        ({}, True, Dialect.AGENT_OUTPUT),
        ([1, 2], False, Dialect.SUBAGENT_RETURN),
    ],
)
def test_auto_dialect_detection(doc: object, marked: bool, dialect: Dialect) -> None:
    assert detect_dialect(doc, marked) is dialect


def test_explicit_dialect_overrides_detection(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An agent output checked as a subagent return misses the subagent-return fields."""
    path = str(RETURNS / "agent_output_research_agent.json")
    code, report = check(capsys, path, "--root", str(tmp_path), "--dialect", "subagent-return")
    assert code == 1
    assert report["dialect"] == "subagent-return"
    assert {"status", "summary", "metadata"} <= set(at(report, "PF200"))


# --- extraction from an agent's final message ------------------------------------------------


def test_marked_block_in_a_realistic_final_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Prose, an earlier draft block and a closing remark around the marked block."""
    create_artifacts(tmp_path, output_doc())
    path = str(RETURNS / "final_message_agent_output.md")
    code, report = check(capsys, path, "--root", str(tmp_path))
    assert report["findings"] == []
    assert code == 0
    assert report["extracted_from"] == "markers"
    assert report["dialect"] == "agent-output"
    assert report["status"] == "complete"


def test_last_fenced_json_block_when_there_are_no_markers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The quoted schema earlier in the message is not the return; the last block is."""
    create_artifacts(tmp_path, subagent_doc())
    path = str(RETURNS / "final_message_subagent_return.md")
    code, report = check(capsys, path, "--root", str(tmp_path))
    assert report["findings"] == []
    assert code == 0
    assert report["extracted_from"] == "fence"
    assert report["dialect"] == "subagent-return"


def test_marked_block_without_a_fence_is_read_as_is() -> None:
    body = json.dumps(output_doc())
    raw = f"Done.\n<!-- AGENT_OUTPUT_START -->\n{body}\n<!-- AGENT_OUTPUT_END -->\n".encode()
    extracted = extract_return(raw)
    assert extracted.origin is Origin.MARKERS
    assert extracted.doc == output_doc()


def test_start_marker_without_end_marker_is_reported() -> None:
    raw = b'Here it is:\n<!-- AGENT_OUTPUT_START -->\n```json\n{"meta": {'
    report = check_bytes(raw, "msg").to_json()
    assert codes(report) == ["PF700"]
    assert "AGENT_OUTPUT_END" in report["findings"][0]["message"]
    assert report["dialect"] == "agent-output"


def test_invalid_json_inside_the_markers_is_a_parse_failure() -> None:
    raw = b'<!-- AGENT_OUTPUT_START -->\n```json\n{"meta": {,}}\n```\n<!-- AGENT_OUTPUT_END -->'
    report = check_bytes(raw, "msg").to_json()
    assert codes(report) == ["PF102"]
    assert "between the AGENT_OUTPUT markers" in report["findings"][0]["message"]


def test_json_fence_cut_off_before_its_closing_fence_reads_as_truncated() -> None:
    raw = b'All done.\n```json\n{"status": "completed", "summary": "Cre'
    report = check_bytes(raw, "msg").to_json()
    assert codes(report) == ["PF102"]
    assert "the block ends inside a string" in report["findings"][0]["message"]


def test_fences_inside_another_fence_are_content() -> None:
    """A quoted json example inside a four-backtick block is not the return."""
    raw = (
        b'````markdown\n```json\n{"meta": {}}\n```\n````\n'
        b'Return:\n```json\n{"status": "failed"}\n```\n'
    )
    assert extract_return(raw).doc == {"status": "failed"}


@pytest.mark.parametrize(
    "raw",
    [
        b"```json\n" * (MAX_RETURN_BYTES // 8),
        b"<!-- AGENT_OUTPUT_START -->" * (MAX_RETURN_BYTES // 27),
        b"```json\nx\n```\n" * (MAX_RETURN_BYTES // 14),
    ],
    ids=["unclosed-fences", "start-markers", "many-fences"],
)
def test_pathological_messages_of_the_maximum_size_are_answered(raw: bytes) -> None:
    """Extraction is linear: 1 MiB of markers or fences is answered, not backtracked on."""
    report = check_bytes(raw, "msg").to_json()
    assert report["valid"] is False
    assert codes(report)[0] in {"PF102", "PF700"}


def test_message_without_any_json_is_its_own_finding() -> None:
    raw = b"## Research Complete\n\nI looked at everything. ```python\nprint(1)\n```\n"
    assert codes(check_bytes(raw, "msg").to_json()) == ["PF700"]


def test_empty_input_is_reported() -> None:
    report = check_bytes(b"  \n", "msg").to_json()
    assert codes(report) == ["PF700"]
    assert "empty" in report["findings"][0]["message"]


# --- bad input: the same list as the metadata validator --------------------------------------


@pytest.mark.parametrize(
    ("raw", "code", "words"),
    [
        (b'{"status": "completed", "summary": "Do', "PF102", "ends inside a string"),
        (b'{"status": "completed",}', "PF102", "a key in double quotes was expected"),
        (b'{"status": NaN}', "PF102", "NaN"),
        (b'\xef\xbb\xbf{"status": "completed"}', "PF102", "byte-order mark"),
        (b'{"summary": "caf\xe9"}', "PF102", "not UTF-8"),
        (b"[" * 100_000 + b"]" * 100_000, "PF102", "nested too deeply"),
        (b'["status", "completed"]', "PF103", "not a JSON object"),
        (b'"completed"', "PF103", "a string"),
    ],
)
def test_bad_input_gets_one_clear_finding(raw: bytes, code: str, words: str) -> None:
    report = check_bytes(raw, "bad").to_json()
    assert codes(report) == [code]
    assert words in report["findings"][0]["message"]
    assert report["valid"] is False


def test_wrong_types_are_each_reported() -> None:
    doc = subagent_doc()
    doc["metadata"]["delegation_depth"] = True
    doc["metadata"]["delegation_path"] = "orchestrator/plan/planner"
    doc["artifacts"][0]["summary"] = 3
    report = validated(doc)
    assert set(at(report, "PF201")) == {
        "metadata.delegation_depth",
        "metadata.delegation_path",
        "artifacts[0].summary",
    }


def test_huge_input_on_stdin_is_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    set_stdin(monkeypatch, b" " * MAX_RETURN_BYTES + b"{}")
    code, report = check(capsys, "-")
    assert code == 1
    assert codes(report) == ["PF101"]
    assert report["source"] == "<stdin>"


def test_input_of_exactly_the_limit_is_read(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    data = b"{}"
    set_stdin(monkeypatch, data + b" " * (MAX_RETURN_BYTES - len(data)))
    _, report = check(capsys, "-")
    assert "PF101" not in codes(report)
    assert "status" in at(report, "PF200")


@settings(max_examples=200, deadline=None, database=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
        lambda children: (
            st.lists(children, max_size=4)
            | st.dictionaries(
                st.sampled_from(
                    [
                        *("status", "summary", "artifacts", "metadata", "meta", "errors"),
                        *("error", "next_steps", "path", "key_points", "session_id", "x"),
                    ]
                ),
                children,
                max_size=6,
            )
        ),
        max_leaves=30,
    ),
    st.sampled_from(["auto", "subagent-return", "agent-output"]),
)
def test_random_documents_never_raise(doc: object, dialect: str) -> None:
    report = check_bytes(json.dumps(doc).encode(), "random", dialect)
    errors = any(f.severity is Severity.ERROR for f in report.findings)
    assert report.valid is (isinstance(doc, dict) and not errors)
    assert all(f.code in RULES for f in report.findings)


# --- the command: options, output formats, usage errors --------------------------------------


def test_text_output_names_source_code_and_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, '{"status": "success", "summary": "Done", "artifacts": []}')
    code = main(["check-return", path, "--root", str(tmp_path)])
    out = capsys.readouterr().out.splitlines()
    assert code == 1
    assert f"{path}: PF202 error: status 'success'" in "\n".join(out)
    assert out[-1].startswith(f"{path}: invalid subagent return, status success; ")


def test_stdin_is_the_default_input(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    set_stdin(monkeypatch, (RETURNS / "subagent_return_failed_research.json").read_bytes())
    code = main(["check-return", "--root", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0
    assert out == "<stdin>: valid subagent return, status failed; 0 errors, 0 warnings\n"


def test_strict_makes_warnings_fail_and_ignore_drops_codes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = _set(fixture("subagent_return_failed_research.json"), "summary", "x" * 450)
    path = write(tmp_path, json.dumps(doc))
    assert check(capsys, path, "--root", str(tmp_path))[0] == 0
    code, report = check(capsys, path, "--root", str(tmp_path), "--strict")
    assert (code, codes(report)) == (1, ["PF701"])
    code, report = check(capsys, path, "--root", str(tmp_path), "--strict", "--ignore", "PF7")
    assert (code, codes(report)) == (0, [])


def test_ignoring_every_code_never_makes_non_json_valid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "no json here")
    code, report = check(capsys, path, "--ignore", "PF7")
    assert (code, report["valid"], report["findings"]) == (1, False, [])


@pytest.mark.parametrize(
    "args",
    [
        ["/nonexistent/return.json"],
        ["-", "--root", "/nonexistent/root"],
        ["-", "--select", "PF999"],
        ["-", "--dialect", "yaml"],
    ],
)
def test_usage_errors_exit_2(
    args: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    set_stdin(monkeypatch, b"{}")
    with pytest.raises(SystemExit) as exc:  # argparse exits by itself on a bad choice
        raise SystemExit(main(["check-return", *args]))
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(("postflightd: ", "usage: "))
    assert "Traceback" not in err


def test_directory_as_input_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check-return", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err


# --- real processes --------------------------------------------------------------------------


def run_cli(*args: str, stdin: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "postflightd", "check-return", *args],
        input=stdin,
        capture_output=True,
        check=False,
        timeout=60,
    )


def test_subprocess_reads_a_final_message_on_stdin(tmp_path: Path) -> None:
    create_artifacts(tmp_path, output_doc())
    message = (RETURNS / "final_message_agent_output.md").read_bytes()
    out = run_cli("--root", str(tmp_path), "--format", "json", stdin=message)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["valid"] is True
    assert report["source"] == "<stdin>"


def test_subprocess_refuses_huge_stdin(tmp_path: Path) -> None:
    out = run_cli("--root", str(tmp_path), stdin=b"x" * (4 * MAX_RETURN_BYTES))
    assert out.returncode == 1
    assert b"PF101" in out.stdout
    assert out.stderr == b""


def test_subprocess_non_utf8_on_stdin(tmp_path: Path) -> None:
    out = run_cli("--root", str(tmp_path), "--format", "json", stdin=b'{"summary": "\xff"}')
    assert out.returncode == 1
    assert [f["code"] for f in json.loads(out.stdout)["findings"]] == ["PF102"]
