"""The pure validation rules: one failing case or more per code, no disk, no clock."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from helpers.documents import SESSION, researched_doc, task_entry
from postflightd.config import TimeoutsConfig
from postflightd.models.terms import Status
from postflightd.rules.context import TaskContext
from postflightd.rules.findings import RULES, Finding, Severity
from postflightd.rules.metadata import RuleOptions, Validation, suggest_status, validate
from postflightd.rules.probe import ArtifactState
from postflightd.rules.toolkit import location

NOW = datetime(2026, 1, 28, 12, 0, tzinfo=UTC)
TASK_DIR = "259_prove_completeness"
OPTIONS = RuleOptions(timeouts=asdict(TimeoutsConfig()))


def ctx(
    *,
    task: Mapping[str, Any] | None = None,
    state_known: bool = False,
    marker_session: str | None = None,
    dir_name: str = TASK_DIR,
) -> TaskContext:
    number, _, slug = dir_name.partition("_")
    return TaskContext(
        dir_name=dir_name,
        number=int(number),
        slug=slug,
        state_known=state_known,
        task=task,
        marker_session=marker_session,
    )


def probe_of(states: Mapping[str, ArtifactState]) -> Any:
    """An artifact probe answering from a dict; unknown paths exist with content."""
    return lambda rel: states.get(rel, ArtifactState.OK)


def run(
    doc: object,
    context: TaskContext | None = None,
    *,
    now: datetime = NOW,
    options: RuleOptions = OPTIONS,
    disk: Mapping[str, ArtifactState] | None = None,
) -> Validation:
    return validate(doc, context or ctx(), now, options, probe_of(disk or {}))


def codes(result: Validation) -> list[str]:
    return [f.code for f in result.findings]


def only(result: Validation, code: str) -> Finding:
    found = [f for f in result.findings if f.code == code]
    assert len(found) == 1, result.findings
    return found[0]


def implemented_doc() -> dict[str, Any]:
    """The metadata format's 'Implementation Success (Non-Meta)' example."""
    return {
        "status": "implemented",
        "artifacts": [
            {"type": "implementation", "path": "nvim/lua/plugins/lsp.lua", "summary": "LSP"},
            {"type": "summary", "path": f"specs/{TASK_DIR}/summaries/s.md", "summary": "Sum"},
        ],
        "completion_data": {
            "completion_summary": "Configured LSP for 4 language servers.",
            "roadmap_items": ["Configure LSP for Neovim"],
        },
        "metadata": {
            "session_id": SESSION,
            "agent_type": "neovim-implementation-agent",
            "duration_seconds": 3600,
            "delegation_depth": 1,
            "delegation_path": ["orchestrator", "implement", "neovim-implementation-agent"],
            "phases_completed": 4,
            "phases_total": 4,
        },
    }


def in_progress_doc(started_at: str = "2026-01-28T11:30:00Z") -> dict[str, Any]:
    """The metadata format's 'Early Metadata' example (a research run)."""
    return {
        "status": "in_progress",
        "started_at": started_at,
        "artifacts": [],
        "partial_progress": {"stage": "initializing", "details": "Agent started"},
        "metadata": {
            "session_id": SESSION,
            "agent_type": "neovim-research-agent",
            "delegation_depth": 1,
            "delegation_path": ["orchestrator", "research", "neovim-research-agent"],
        },
    }


def trouble_doc(status: str) -> dict[str, Any]:
    doc = researched_doc()
    doc["status"] = status
    doc["errors"] = [
        {"type": "timeout", "message": "timed out", "recoverable": True, "recommendation": "Re"}
    ]
    if status == "partial":
        doc["partial_progress"] = {"stage": "phase_2", "details": "half done"}
    return doc


# --- the baseline ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "doc",
    [researched_doc(), implemented_doc(), in_progress_doc(), trouble_doc("partial")],
    ids=["researched", "implemented", "in_progress", "partial"],
)
def test_seed_examples_have_no_findings(doc: dict[str, Any]) -> None:
    """The baselines every failing case below mutates are clean."""
    result = run(doc)
    assert result.findings == []
    assert result.model is not None
    assert result.status is Status(doc["status"])


def test_every_finding_uses_the_registry_severity_unless_a_rule_downgrades() -> None:
    """Findings carry a code from RULES and, except PF206/PF502/PF503, its default severity."""
    doc = researched_doc()
    doc["status"] = "partial"
    doc["artifacts"].append({"type": "bogus", "path": "missing.md"})
    doc["extra"] = 1
    result = run(doc, disk={"missing.md": ArtifactState.MISSING})
    assert result.findings
    for f in result.findings:
        assert f.code in RULES
        if f.code not in {"PF206", "PF502", "PF503"}:
            assert f.severity is RULES[f.code].severity


# --- PF103 / PF2xx: structure ---------------------------------------------------------------


@pytest.mark.parametrize("value", [[], [1, 2], "text", 3, 1.5, True, None])
def test_pf103_top_level_not_an_object(value: object) -> None:
    result = run(value)
    assert codes(result) == ["PF103"]
    assert result.model is None


@pytest.mark.parametrize(
    ("mutate", "loc"),
    [
        (lambda d: d.pop("status"), "status"),
        (lambda d: d.pop("artifacts"), "artifacts"),
        (lambda d: d.pop("metadata"), "metadata"),
        (lambda d: d["metadata"].pop("session_id"), "metadata.session_id"),
        (lambda d: d["artifacts"][0].pop("path"), "artifacts[0].path"),
        (lambda d: d.update(errors=[{"type": "x"}]), "errors[0].message"),
        (lambda d: d.update(partial_progress={"details": "x"}), "partial_progress.stage"),
        (lambda d: d.update(partial_progress={"stage": "x"}), "partial_progress.details"),
        (lambda d: d.update(completion_data={}), "completion_data.completion_summary"),
    ],
)
def test_pf200_missing_needed_field_names_its_location(mutate: Any, loc: str) -> None:
    doc = researched_doc()
    mutate(doc)
    result = run(doc)
    finding = [f for f in result.findings if f.code == "PF200"]
    assert [f.location for f in finding] == [loc]
    assert loc in finding[0].message
    assert result.model is None


@pytest.mark.parametrize(
    ("mutate", "loc", "hint"),
    [
        (lambda d: d["metadata"].update(delegation_depth="1"), "metadata.delegation_depth", "1"),
        (lambda d: d["metadata"].update(session_id=42), "metadata.session_id", "a string"),
        (lambda d: d.update(artifacts={"path": "x"}), "artifacts", "an array"),
        (lambda d: d["metadata"].update(delegation_path="a/b"), "metadata.delegation_path", ""),
        (
            lambda d: d.update(errors=[{"message": "m", "recoverable": 1}]),
            "errors[0].recoverable",
            "true or false",
        ),
        (
            lambda d: d.update(errors=[{"message": "m", "recoverable": "true"}]),
            "errors[0].recoverable",
            "without quotes",
        ),
        (lambda d: d.update(started_at=1736700000), "started_at", "a string"),
        (lambda d: d["metadata"].update(duration_seconds="180"), "metadata.duration_seconds", ""),
    ],
)
def test_pf201_wrong_type_is_an_error_at_the_field(mutate: Any, loc: str, hint: str) -> None:
    doc = researched_doc()
    mutate(doc)
    result = run(doc)
    finding = only(result, "PF201")
    assert finding.location == loc
    assert finding.severity is Severity.ERROR
    assert hint in finding.message


def test_pf201_quoted_integer_says_to_drop_the_quotes() -> None:
    doc = researched_doc()
    doc["metadata"]["delegation_depth"] = "1"
    assert "write 1 without quotes" in only(run(doc), "PF201").message


def test_pf201_does_not_hide_other_findings() -> None:
    """One wrong type still lets the raw-document rules report the rest."""
    doc = researched_doc()
    doc["metadata"]["delegation_depth"] = "1"
    doc["metadata"]["session_id"] = "not-a-session"
    doc["artifacts"] = []
    assert {"PF201", "PF400", "PF500"} <= set(codes(run(doc)))


@pytest.mark.parametrize(
    ("raw", "operation_path", "suggested"),
    [
        ("research_done", "research", "researched"),
        ("researchd", "research", "researched"),
        ("Planned!", "plan", "planned"),
        ("implementing", "implement", "implemented"),
        ("success", "research", "researched"),
        ("success", "implement", "implemented"),
        ("done", "plan", "planned"),
        ("in-progress", "research", "in_progress"),
        ("error", "research", "failed"),
    ],
)
def test_pf202_near_miss_status_suggests_the_probable_one(
    raw: str, operation_path: str, suggested: str
) -> None:
    doc = researched_doc()
    doc["status"] = raw
    doc["metadata"]["delegation_path"][1] = operation_path
    finding = only(run(doc), "PF202")
    assert finding.location == "status"
    assert f'did you mean "{suggested}"' in finding.message


def test_pf202_unknown_status_without_a_guess_lists_the_seven() -> None:
    doc = researched_doc()
    doc["status"] = "zebra"
    message = only(run(doc), "PF202").message
    assert "did you mean" not in message
    for status in Status:
        assert status.value in message


def test_pf202_success_without_known_operation_has_no_guess() -> None:
    assert suggest_status("success", None) is None
    assert suggest_status("success", "research") is Status.RESEARCHED


def test_pf202_hides_no_other_finding() -> None:
    """A bad status is one finding among the others: the artifacts are still checked (an
    agent gets few tries at its stop, and each must show it everything), judged as the
    status the message suggests (``success`` on a research run: researched)."""
    doc = researched_doc()
    doc["status"] = "success"
    doc["artifacts"] = ["specs/1_x/reports/r.md", "specs/1_x/reports/gone.md"]
    doc["partial_progress"] = {"stage": "s", "details": "d"}
    result = run(doc, disk={"specs/1_x/reports/gone.md": ArtifactState.MISSING})
    assert codes(result) == ["PF202", "PF308", "PF208", "PF208", "PF502"]
    assert only(result, "PF502").severity is Severity.ERROR
    assert result.status is None


def test_pf202_judges_a_status_with_no_suggestion_as_a_success_for_the_artifacts() -> None:
    """With no status to suggest, the artifact rules judge it a success (a missing file is
    an error, no artifact a phantom operation), and the rules that need the very status say
    nothing."""
    doc = researched_doc()
    doc["status"] = "zebra"
    doc["artifacts"] = []
    doc["completion_data"] = {"completion_summary": "Done."}
    result = run(doc)
    assert codes(result) == ["PF202", "PF500"]
    assert "status 'zebra' with no artifacts" in only(result, "PF500").message


def test_pf202_on_a_status_judged_unfinished_makes_a_missing_artifact_a_warning() -> None:
    doc = researched_doc()
    doc["status"] = "failure"
    doc["errors"] = [{"message": "m", "type": "t", "recoverable": True, "recommendation": "r"}]
    result = run(doc, disk={doc["artifacts"][0]["path"]: ArtifactState.MISSING})
    assert codes(result) == ["PF202", "PF502"]
    assert only(result, "PF502").severity is Severity.WARNING


def test_findings_of_a_step_come_in_the_order_of_the_file() -> None:
    """Within a step, the findings follow the file, whichever rule found them."""
    doc = researched_doc()
    doc["next_steps"] = " "
    doc["metadata"]["agent_type"] = ""
    doc["artifacts"][0]["summary"] = ""
    doc["zz_unknown"] = 1
    doc["metadata"]["yy_unknown"] = 1
    result = run(doc)
    order = list(doc)
    assert order.index("artifacts") < order.index("next_steps") < order.index("metadata")
    assert [f.location for f in result.findings] == [
        "artifacts[0].summary",
        "next_steps",
        "metadata.agent_type",
        "metadata.yy_unknown",
        "zz_unknown",
    ]


@pytest.mark.parametrize(
    ("operation_path", "advice"),
    [("plan", '"planned"'), ("implement", '"implemented"'), ("review", '"researched", "planned"')],
)
def test_pf203_completed_is_forbidden_with_its_own_message(
    operation_path: str, advice: str
) -> None:
    doc = researched_doc()
    doc["status"] = "completed"
    doc["metadata"]["delegation_path"] = ["orchestrator", operation_path, "agent"]
    doc["metadata"]["agent_type"] = "agent"
    result = run(doc)
    finding = only(result, "PF203")
    assert "PF202" not in codes(result)
    assert "forbidden" in finding.message
    assert advice in finding.message


@pytest.mark.parametrize(("kind", "note"), [("research", "read as report"), ("notes", "linked")])
def test_pf204_unknown_artifact_type_is_a_warning(kind: str, note: str) -> None:
    doc = researched_doc()
    doc["artifacts"][0]["type"] = kind
    finding = only(run(doc), "PF204")
    assert finding.severity is Severity.WARNING
    assert finding.location == "artifacts[0].type"
    assert note in finding.message


@pytest.mark.parametrize("kind", ["report", "plan", "summary", "implementation"])
def test_the_four_artifact_types_of_the_format_are_known(kind: str) -> None:
    doc = researched_doc()
    doc["artifacts"][0]["type"] = kind
    assert "PF204" not in codes(run(doc))


def test_pf205_unknown_fields_are_warnings_and_kept() -> None:
    doc = researched_doc()
    doc["reviewer"] = "x"
    doc["metadata"]["phase_count"] = 4
    doc["artifacts"][0]["lines"] = 10
    doc["errors"] = [{"message": "m", "type": "t", "recoverable": True, "recommendation": "r"}]
    doc["errors"][0]["code"] = 7
    result = run(doc)
    found = {f.location for f in result.findings if f.code == "PF205"}
    assert found == {"reviewer", "metadata.phase_count", "artifacts[0].lines", "errors[0].code"}
    assert all(f.severity is Severity.WARNING for f in result.findings)
    assert result.model is not None
    # Kept where the models keep them; the value is the stored schema's, with no model_extra.
    assert result.model.__pydantic_extra__ == {"reviewer": "x"}


@pytest.mark.parametrize(
    ("mutate", "loc"),
    [
        (lambda d: d["metadata"].update(session_id="  "), "metadata.session_id"),
        (lambda d: d["artifacts"][0].update(path=""), "artifacts[0].path"),
        (
            lambda d: d.update(
                errors=[{"message": " ", "type": "t", "recoverable": True, "recommendation": "r"}]
            ),
            "errors[0].message",
        ),
        (
            lambda d: d.update(partial_progress={"stage": "", "details": "x"}),
            "partial_progress.stage",
        ),
    ],
)
def test_pf206_blank_needed_text_is_an_error(mutate: Any, loc: str) -> None:
    doc = researched_doc()
    mutate(doc)
    finding = only(run(doc), "PF206")
    assert finding.location == loc
    assert finding.severity is Severity.ERROR


@pytest.mark.parametrize(
    ("mutate", "loc"),
    [
        (lambda d: d["metadata"].pop("agent_type"), "metadata.agent_type"),
        (lambda d: d["metadata"].pop("delegation_depth"), "metadata.delegation_depth"),
        (lambda d: d["metadata"].update(delegation_path=None), "metadata.delegation_path"),
        (lambda d: d["artifacts"][0].pop("type"), "artifacts[0].type"),
        (lambda d: d["artifacts"][0].pop("summary"), "artifacts[0].summary"),
        (
            lambda d: d.update(errors=[{"message": "m", "type": "t", "recommendation": "r"}]),
            "errors[0].recoverable",
        ),
    ],
)
def test_pf207_schema_field_postflight_can_spare_is_a_warning(mutate: Any, loc: str) -> None:
    doc = researched_doc()
    mutate(doc)
    result = run(doc)
    finding = only(result, "PF207")
    assert finding.location == loc
    assert finding.severity is Severity.WARNING
    assert result.model is not None


@pytest.mark.parametrize(
    ("mutate", "loc"),
    [
        (lambda d: d["metadata"].update(agent_type="   "), "metadata.agent_type"),
        (lambda d: d["artifacts"][0].update(summary=""), "artifacts[0].summary"),
        (lambda d: d["artifacts"][0].update(type=" "), "artifacts[0].type"),
        (
            lambda d: d.update(
                errors=[{"message": "m", "type": "\t", "recoverable": True, "recommendation": "r"}]
            ),
            "errors[0].type",
        ),
        (
            lambda d: d.update(
                errors=[{"message": "m", "type": "t", "recoverable": True, "recommendation": ""}]
            ),
            "errors[0].recommendation",
        ),
    ],
)
def test_pf207_blank_text_postflight_can_spare_counts_as_missing(mutate: Any, loc: str) -> None:
    """Blank schema-asked text that postflight does not need: a PF207 warning, applied."""
    doc = researched_doc()
    mutate(doc)
    result = run(doc)
    finding = only(result, "PF207")
    assert finding.location == loc
    assert "blank" in finding.message
    assert finding.severity is Severity.WARNING
    assert result.model is not None
    assert "PF206" not in codes(result)


@pytest.mark.parametrize(
    ("mutate", "loc"),
    [
        (lambda d: d.update(next_steps="  "), "next_steps"),
        (
            lambda d: d["metadata"].update(delegation_path=["orchestrator", "", "a"]),
            "metadata.delegation_path[1]",
        ),
    ],
)
def test_pf206_blank_optional_text_is_a_warning(mutate: Any, loc: str) -> None:
    """Optional text given blank: PF206 at warning severity (postflight does not need it)."""
    doc = researched_doc()
    mutate(doc)
    result = run(doc)
    finding = only(result, "PF206")
    assert finding.location == loc
    assert finding.severity is Severity.WARNING


def test_pf206_blank_roadmap_item_is_a_warning() -> None:
    doc = implemented_doc()
    doc["completion_data"]["roadmap_items"] = ["Configure LSP", ""]
    finding = only(run(doc), "PF206")
    assert finding.location == "completion_data.roadmap_items[1]"
    assert finding.severity is Severity.WARNING


# --- PF208: plain-string artifacts ----------------------------------------------------------


@pytest.mark.parametrize(
    ("folder", "kind"),
    [("reports", "report"), ("plans", "plan"), ("summaries", "summary"), ("notes", None)],
)
def test_pf208_plain_string_artifact_is_read_with_its_folder_type(
    folder: str, kind: str | None
) -> None:
    """A plain path string is a PF208 warning, read as {path} with the type from its folder."""
    doc = researched_doc()
    path = f"specs/{TASK_DIR}/{folder}/r.md"
    doc["artifacts"] = [path]
    result = run(doc)
    finding = only(result, "PF208")
    assert finding.location == "artifacts[0]"
    assert finding.severity is Severity.WARNING
    assert codes(result) == ["PF208"], "no PF207 on top: PF208 says it"
    assert result.model is not None
    artifact = result.model.artifacts[0]
    assert (artifact.path, artifact.type, artifact.summary) == (path, kind, None)


@pytest.mark.parametrize(
    ("path", "code", "disk"),
    [
        ("../outside.md", "PF501", None),
        ("javascript:alert(1)", "PF501", None),
        ("specs/x/r\n### 1. X.md", "PF501", None),
        ("specs/259_prove_completeness/reports/gone.md", "PF502", ArtifactState.MISSING),
        ("specs/259_prove_completeness/reports/empty.md", "PF503", ArtifactState.EMPTY),
    ],
)
def test_pf208_every_pf5xx_rule_still_checks_the_path(
    path: str, code: str, disk: ArtifactState | None
) -> None:
    doc = researched_doc()
    doc["artifacts"] = [path]
    result = run(doc, disk={path: disk} if disk is not None else {})
    assert only(result, code).location == "artifacts[0]"
    assert only(result, code).severity is Severity.ERROR


def test_pf208_blank_string_and_duplicates() -> None:
    doc = researched_doc()
    first = doc["artifacts"][0]["path"]
    doc["artifacts"] += [first, " "]
    result = run(doc)
    assert only(result, "PF504").location == "artifacts[1]"
    blank = only(result, "PF206")
    assert (blank.location, blank.severity) == ("artifacts[2]", Severity.ERROR)


def test_pf201_artifact_neither_object_nor_string() -> None:
    doc = researched_doc()
    doc["artifacts"] = [3]
    assert only(run(doc), "PF201").location == "artifacts[0]"


# --- PF3xx: status-dependent ----------------------------------------------------------------


def test_pf300_in_progress_needs_started_at() -> None:
    doc = in_progress_doc()
    del doc["started_at"]
    assert only(run(doc), "PF300").location == "started_at"


@pytest.mark.parametrize(
    ("started_at", "why"),
    [("yesterday", "not ISO 8601"), ("2026-01-28T12:10:00Z", "future")],
)
def test_pf301_started_at_unparseable_or_in_the_future(started_at: str, why: str) -> None:
    finding = only(run(in_progress_doc(started_at)), "PF301")
    assert why in finding.message


def test_pf301_tolerates_clock_skew_under_five_minutes() -> None:
    assert run(in_progress_doc("2026-01-28T12:04:00Z")).findings == []


@pytest.mark.parametrize("status", ["in_progress", "partial"])
def test_pf302_in_progress_or_partial_without_partial_progress(status: str) -> None:
    doc = in_progress_doc() if status == "in_progress" else trouble_doc("partial")
    del doc["partial_progress"]
    finding = only(run(doc), "PF302")
    assert finding.severity is Severity.WARNING


def test_pf303_implemented_without_completion_data() -> None:
    doc = implemented_doc()
    del doc["completion_data"]
    assert only(run(doc), "PF303").location == "completion_data"


def test_pf304_blank_completion_summary() -> None:
    doc = implemented_doc()
    doc["completion_data"]["completion_summary"] = "   "
    assert only(run(doc), "PF304").location == "completion_data.completion_summary"


def test_pf305_meta_task_implemented_without_claudemd_suggestions() -> None:
    doc = implemented_doc()
    del doc["completion_data"]["roadmap_items"]
    meta = ctx(task=task_entry(259, "prove_completeness", language="meta"), state_known=True)
    finding = only(run(doc, meta), "PF305")
    assert '"none"' in finding.message
    doc["completion_data"]["claudemd_suggestions"] = "none"
    assert run(doc, meta).findings == []


def test_pf305_needs_to_know_the_task() -> None:
    """Without state.json the task's language is unknown: no PF305, no PF306."""
    doc = implemented_doc()
    doc["completion_data"]["claudemd_suggestions"] = "x"
    assert run(doc, ctx()).findings == []


def test_pf306_roadmap_items_on_a_meta_task() -> None:
    doc = implemented_doc()
    doc["completion_data"]["claudemd_suggestions"] = "none"
    meta = ctx(task=task_entry(259, "prove_completeness", language="meta"), state_known=True)
    finding = only(run(doc, meta), "PF306")
    assert finding.location == "completion_data.roadmap_items"
    assert finding.severity is Severity.WARNING


def test_pf306_claudemd_suggestions_on_a_non_meta_task() -> None:
    doc = implemented_doc()
    doc["completion_data"]["claudemd_suggestions"] = "Added X to CLAUDE.md"
    plain = ctx(task=task_entry(259, "prove_completeness", language="lean4"), state_known=True)
    result = run(doc, plain)
    assert codes(result) == ["PF306"]
    assert result.findings[0].location == "completion_data.claudemd_suggestions"


@pytest.mark.parametrize("status", ["partial", "failed", "blocked"])
def test_pf307_trouble_status_without_errors(status: str) -> None:
    doc = trouble_doc(status)
    del doc["errors"]
    assert only(run(doc), "PF307").severity is Severity.WARNING


def test_pf308_partial_progress_left_on_a_success_status() -> None:
    doc = researched_doc()
    doc["partial_progress"] = {"stage": "done", "details": "x"}
    assert codes(run(doc)) == ["PF308"]


def test_pf309_completion_data_on_a_status_other_than_implemented() -> None:
    doc = researched_doc()
    doc["completion_data"] = {"completion_summary": "x"}
    assert codes(run(doc)) == ["PF309"]


@pytest.mark.parametrize(
    ("parent", "done", "total"),
    [("partial_progress", 5, 4), ("partial_progress", -1, None), ("metadata", 3, 2)],
)
def test_pf310_phases_completed_out_of_range(parent: str, done: int, total: int | None) -> None:
    doc = in_progress_doc()
    doc[parent]["phases_completed"] = done
    if total is not None:
        doc[parent]["phases_total"] = total
    assert only(run(doc), "PF310").location == f"{parent}.phases_completed"


# --- PF4xx: session and delegation ----------------------------------------------------------


@pytest.mark.parametrize("sid", ["test", "sess_abc_abc123", "sess_1736700000_ABC123", "sess_1_ab"])
def test_pf400_session_id_format(sid: str) -> None:
    doc = researched_doc()
    doc["metadata"]["session_id"] = sid
    assert only(run(doc), "PF400").severity is Severity.WARNING


@pytest.mark.parametrize("depth", [-1, 4])
def test_pf401_delegation_depth_outside_0_to_3(depth: int) -> None:
    doc = researched_doc()
    doc["metadata"]["delegation_depth"] = depth
    result = run(doc)
    assert only(result, "PF401").severity is Severity.ERROR


def test_pf402_delegation_cycle() -> None:
    doc = researched_doc()
    doc["metadata"]["delegation_path"] = ["orchestrator", "research", "orchestrator"]
    doc["metadata"]["agent_type"] = "orchestrator"
    assert "'orchestrator' twice" in only(run(doc), "PF402").message


def test_pf403_depth_does_not_match_path() -> None:
    doc = researched_doc()
    doc["metadata"]["delegation_depth"] = 2
    assert codes(run(doc)) == ["PF403"]


def test_pf404_agent_type_not_last_in_path() -> None:
    doc = researched_doc()
    doc["metadata"]["agent_type"] = "someone-else"
    assert codes(run(doc)) == ["PF404"]


def test_pf405_marker_session_is_expected() -> None:
    finding = only(run(researched_doc(), ctx(marker_session="sess_1_zzzzzz")), "PF405")
    assert ".postflight-pending" in finding.message
    assert finding.severity is Severity.ERROR


def test_pf405_state_json_session_when_no_marker() -> None:
    task = task_entry(259, "prove_completeness", session_id="sess_2_yyyyyy")
    finding = only(run(researched_doc(), ctx(task=task, state_known=True)), "PF405")
    assert "state.json" in finding.message


def test_pf405_marker_takes_precedence_over_state_json() -> None:
    task = task_entry(259, "prove_completeness", session_id="sess_2_yyyyyy")
    context = ctx(task=task, state_known=True, marker_session=SESSION)
    assert run(researched_doc(), context).findings == []


def test_pf405_no_check_without_marker_or_state() -> None:
    doc = researched_doc()
    doc["metadata"]["session_id"] = "sess_9_qqqqqq"
    assert run(doc, ctx()).findings == []


def test_pf406_negative_duration() -> None:
    doc = researched_doc()
    doc["metadata"]["duration_seconds"] = -1.5
    assert codes(run(doc)) == ["PF406"]


# --- PF5xx: artifacts -----------------------------------------------------------------------


@pytest.mark.parametrize("status", ["researched", "planned", "implemented"])
def test_pf500_success_with_no_artifacts_is_a_phantom(status: str) -> None:
    doc = implemented_doc() if status == "implemented" else researched_doc()
    doc["status"] = status
    doc["artifacts"] = []
    assert "phantom" in only(run(doc), "PF500").message


def test_pf500_not_for_non_success_statuses() -> None:
    doc = trouble_doc("failed")
    doc["artifacts"] = []
    assert run(doc).findings == []


@pytest.mark.parametrize(
    "path", ["../../etc/passwd", "/etc/passwd", "specs/../../x", "~/x", "C:\\x", "\\\\srv\\x"]
)
def test_pf501_path_outside_the_root_lexically(path: str) -> None:
    doc = researched_doc()
    doc["artifacts"][0]["path"] = path
    finding = only(run(doc), "PF501")
    assert finding.location == "artifacts[0].path"
    assert "PF502" not in codes(run(doc))


@pytest.mark.parametrize(
    "char", ["\r", "\n", "\x00", "\x1b", "\t", "\x7f", "\x85", "\x9b", "\u2028"]
)
def test_pf501_control_character_in_the_path(char: str) -> None:
    """CR, LF, NUL, any C0/C1, DEL (and the Unicode line separators) could break TODO.md."""
    doc = researched_doc()
    doc["artifacts"][0]["path"] = f"specs/{TASK_DIR}/reports/a{char}b.md"
    finding = only(run(doc), "PF501")
    assert "control character" in finding.message
    assert "\n" not in finding.message


@pytest.mark.parametrize(
    "path", ["javascript:alert(1)", "file:///etc/passwd", "https://x.org/r.md", "data:text/html,x"]
)
def test_pf501_uri_scheme(path: str) -> None:
    doc = researched_doc()
    doc["artifacts"][0]["path"] = path
    assert "URI" in only(run(doc), "PF501").message


def test_pf501_link_longer_than_4096_characters() -> None:
    """The path's TODO.md link may be 4,096 characters, not one more."""
    doc = researched_doc()
    stem = f"specs/{TASK_DIR}/reports/"
    # [name](path): the name is the last component, so the link is 4 + len(name) + len(path).
    name_len = (4096 - 4 - len(stem)) // 2
    ok = stem + "r" * name_len
    assert 4 + 2 * name_len + len(stem) <= 4096
    doc["artifacts"][0]["path"] = ok
    assert "PF501" not in codes(run(doc))
    doc["artifacts"][0]["path"] = ok + "rr"
    finding = only(run(doc), "PF501")
    assert "4,096" in finding.message
    assert len(finding.message) < 400, "the message quotes only the start of the path"


def test_pf501_colon_later_in_a_path_is_fine() -> None:
    doc = researched_doc()
    doc["artifacts"][0]["path"] = f"specs/{TASK_DIR}/reports/a:b.md"
    assert "PF501" not in codes(run(doc))


def test_pf501_inner_dotdot_that_stays_inside_is_fine() -> None:
    doc = researched_doc()
    doc["artifacts"][0]["path"] = "specs/x/../259_prove_completeness/r.md"
    assert run(doc).findings == []


def test_pf501_probe_says_the_path_resolves_outside() -> None:
    doc = researched_doc()
    rel = doc["artifacts"][0]["path"]
    finding = only(run(doc, disk={rel: ArtifactState.OUTSIDE}), "PF501")
    assert "symlink" in finding.message


@pytest.mark.parametrize(
    ("status", "severity"),
    [
        ("researched", Severity.ERROR),
        ("partial", Severity.WARNING),
        ("failed", Severity.WARNING),
        ("blocked", Severity.WARNING),
        ("in_progress", Severity.WARNING),
    ],
)
@pytest.mark.parametrize(
    ("state", "code"),
    [
        (ArtifactState.MISSING, "PF502"),
        (ArtifactState.NOT_A_FILE, "PF502"),
        (ArtifactState.EMPTY, "PF503"),
    ],
)
def test_pf502_pf503_error_for_success_warning_otherwise(
    status: str, severity: Severity, state: ArtifactState, code: str
) -> None:
    doc = in_progress_doc() if status == "in_progress" else trouble_doc(status)
    doc["status"] = status
    doc["artifacts"] = copy.deepcopy(researched_doc()["artifacts"])
    if status == "researched":
        doc.pop("errors", None)
    rel = doc["artifacts"][0]["path"]
    finding = only(run(doc, disk={rel: state}), code)
    assert finding.severity is severity
    assert finding.location == "artifacts[0].path"


def test_pf502_not_checked_when_check_artifacts_is_off() -> None:
    doc = researched_doc()
    rel = doc["artifacts"][0]["path"]
    options = RuleOptions(timeouts=OPTIONS.timeouts, check_artifacts=False)
    assert run(doc, options=options, disk={rel: ArtifactState.MISSING}).findings == []


def test_pf504_duplicate_artifact_path() -> None:
    doc = researched_doc()
    doc["artifacts"].append(dict(doc["artifacts"][0]))
    finding = only(run(doc), "PF504")
    assert finding.location == "artifacts[1].path"


# --- PF6xx: the project ---------------------------------------------------------------------


def test_pf600_task_not_in_state_json() -> None:
    finding = only(run(researched_doc(), ctx(state_known=True)), "PF600")
    assert "259" in finding.message


def test_pf600_skipped_without_state_json() -> None:
    assert run(researched_doc(), ctx(state_known=False)).findings == []


def test_pf601_slug_differs_from_project_name() -> None:
    task = task_entry(259, "something_else")
    assert codes(run(researched_doc(), ctx(task=task, state_known=True))) == ["PF601"]


@pytest.mark.parametrize(
    ("path_step", "elapsed", "stuck"),
    [
        ("research", timedelta(minutes=59), False),
        ("research", timedelta(minutes=61), True),
        ("plan", timedelta(minutes=31), True),
        ("implement", timedelta(hours=1, minutes=59), False),
        ("implement", timedelta(hours=2, minutes=1), True),
        ("something", timedelta(minutes=61), True),
    ],
)
def test_pf602_stuck_against_the_operation_timeout_and_the_given_clock(
    path_step: str, elapsed: timedelta, stuck: bool
) -> None:
    doc = in_progress_doc("2026-01-28T10:00:00Z")
    doc["metadata"]["delegation_path"][1] = path_step
    doc["metadata"]["agent_type"] = "agent"
    doc["metadata"]["delegation_path"][2] = "agent"
    now = datetime(2026, 1, 28, 10, 0, tzinfo=UTC) + elapsed
    result = run(doc, now=now)
    assert result.stuck is stuck
    assert ("PF602" in codes(result)) is stuck


def test_pf602_uses_configured_timeouts() -> None:
    doc = in_progress_doc("2026-01-28T11:55:00Z")
    timeouts = {**OPTIONS.timeouts, "research": 60.0}
    result = run(doc, options=RuleOptions(timeouts=timeouts))
    finding = only(result, "PF602")
    assert "research timeout of 1m00s" in finding.message


def test_pf602_only_for_in_progress() -> None:
    doc = trouble_doc("partial")
    doc["started_at"] = "2020-01-01T00:00:00Z"
    assert not run(doc).stuck


def test_marker_findings_are_passed_through() -> None:
    """PF605 comes from the loader; validate reports it with the rest."""
    from postflightd.rules.findings import finding

    marker = finding("PF605", "", "marker is not JSON")
    context = TaskContext(dir_name=TASK_DIR, number=259, slug="x", marker_findings=(marker,))
    assert codes(run(researched_doc(), context)) == ["PF605"]


def test_location_formats_indexes_in_brackets() -> None:
    assert location(("artifacts", 2, "path")) == "artifacts[2].path"
    assert location(()) == ""
