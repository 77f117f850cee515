"""Property tests: whatever JSON or bytes an agent writes, validation never raises."""

from __future__ import annotations

import copy
import json
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.documents import json_paths
from helpers.paths import FIXTURES
from postflightd.config import Config
from postflightd.models.files import META_NAME, parse_json
from postflightd.pipeline.check import check_file
from postflightd.project.metafiles import MetaFileRef
from postflightd.project.root import Project
from postflightd.rules.context import TaskContext
from postflightd.rules.findings import RULES, Finding, Policy, Severity
from postflightd.rules.metadata import RuleOptions, validate
from postflightd.rules.probe import ArtifactState

EXAMPLES = [
    json.loads(p.read_text(encoding="utf-8"))
    for p in sorted((FIXTURES / "metadata_examples").glob("*.json"))
]
NOW = datetime(2026, 1, 28, 12, 0, tzinfo=UTC)
OPTIONS = RuleOptions(timeouts=asdict(Config().timeouts))
PROPERTY_SETTINGS = settings(max_examples=200, deadline=None, database=None)

KEYS = (
    "status",
    "artifacts",
    "metadata",
    "session_id",
    "agent_type",
    "delegation_depth",
    "delegation_path",
    "duration_seconds",
    "phases_completed",
    "phases_total",
    "started_at",
    "partial_progress",
    "stage",
    "details",
    "completion_data",
    "completion_summary",
    "roadmap_items",
    "claudemd_suggestions",
    "errors",
    "message",
    "recoverable",
    "type",
    "path",
    "summary",
)
STATUSES = (
    "in_progress",
    "researched",
    "planned",
    "implemented",
    "partial",
    "failed",
    "blocked",
    "completed",
    "success",
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.sampled_from(STATUSES),
    st.sampled_from(("2026-01-28T10:30:00Z", "2099-01-01T00:00:00Z", "../../etc/passwd", "")),
)
keys = st.one_of(st.sampled_from(KEYS), st.text(max_size=8))
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=6)),
    max_leaves=40,
)
#: Documents shaped like the metadata file, with any value in any place.
shaped_docs = st.fixed_dictionaries(
    {},
    optional={
        "status": st.one_of(st.sampled_from(STATUSES), json_values),
        "artifacts": st.one_of(
            st.lists(st.dictionaries(keys, json_values, max_size=4), max_size=3), json_values
        ),
        "metadata": st.one_of(st.dictionaries(keys, json_values, max_size=8), json_values),
        "started_at": json_values,
        "partial_progress": json_values,
        "completion_data": json_values,
        "errors": st.one_of(st.lists(st.dictionaries(keys, json_values)), json_values),
    },
)


@st.composite
def mutated_examples(draw: st.DrawFn) -> Any:
    """A metadata example with a few values replaced, deleted or added anywhere."""
    doc = copy.deepcopy(draw(st.sampled_from(EXAMPLES)))
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        paths = json_paths(doc)
        path = draw(st.sampled_from(paths))
        if not path:
            doc = draw(st.one_of(json_values, st.just(doc)))
            continue
        parent = doc
        for part in path[:-1]:
            parent = parent[part]
        action = draw(st.sampled_from(("replace", "delete", "add")))
        if action == "replace":
            parent[path[-1]] = draw(json_values)
        elif action == "delete":
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(keys)] = draw(json_values)
        else:
            parent.append(draw(json_values))
    return doc


def contexts() -> st.SearchStrategy[TaskContext]:
    return st.builds(
        TaskContext,
        dir_name=st.just("259_prove_completeness"),
        number=st.just(259),
        slug=st.just("prove_completeness"),
        state_known=st.booleans(),
        task=st.one_of(
            st.none(),
            st.dictionaries(st.sampled_from(("language", "session_id", "project_name")), scalars),
        ),
        marker_session=st.one_of(st.none(), st.text(max_size=12)),
        marker_operation=st.one_of(st.none(), st.text(max_size=12)),
        marker_findings=st.just(()),
        # As the file's reader gives them: aware, in UTC (a naive time is never passed in).
        written=st.one_of(st.none(), st.datetimes(timezones=st.just(UTC))),
        first_seen=st.one_of(st.none(), st.datetimes(timezones=st.just(UTC))),
    )


artifact_states = st.sampled_from(list(ArtifactState))


def _check(findings: list[Finding]) -> None:
    for f in findings:
        assert f.code in RULES
        assert isinstance(f.severity, Severity)
        assert isinstance(f.location, str)
        assert f.message.strip()


@PROPERTY_SETTINGS
@given(doc=json_values, ctx=contexts(), disk=artifact_states)
def test_random_json_values_never_raise(doc: Any, ctx: TaskContext, disk: ArtifactState) -> None:
    result = validate(doc, ctx, NOW, OPTIONS, lambda _rel: disk)
    _check(result.findings)
    if not isinstance(doc, dict):
        assert [f.code for f in result.findings] == ["PF103"]


@PROPERTY_SETTINGS
@given(doc=shaped_docs, ctx=contexts(), disk=artifact_states)
def test_random_shaped_documents_never_raise(
    doc: dict[str, Any], ctx: TaskContext, disk: ArtifactState
) -> None:
    result = validate(doc, ctx, NOW, OPTIONS, lambda _rel: disk)
    _check(result.findings)
    # A document that fails the model always says why, at error severity.
    if result.model is None:
        assert any(f.severity is Severity.ERROR for f in result.findings)


@PROPERTY_SETTINGS
@given(doc=mutated_examples(), ctx=contexts(), disk=artifact_states)
def test_mutated_seed_examples_never_raise(doc: Any, ctx: TaskContext, disk: ArtifactState) -> None:
    result = validate(doc, ctx, NOW, OPTIONS, lambda _rel: disk)
    _check(result.findings)
    again = validate(copy.deepcopy(doc), ctx, NOW, OPTIONS, lambda _rel: disk)
    assert again.findings == result.findings


@PROPERTY_SETTINGS
@given(raw=st.one_of(st.binary(max_size=200), st.text(max_size=200).map(str.encode)))
def test_random_bytes_parse_or_say_why(raw: bytes) -> None:
    value, problem = parse_json(raw)
    assert problem is None or (value is None and problem)


@settings(
    max_examples=200,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    content=st.one_of(
        mutated_examples().map(lambda d: json.dumps(d).encode()),
        json_values.map(lambda d: json.dumps(d).encode()),
        st.binary(max_size=100),
    ),
    marker=st.one_of(st.none(), st.binary(max_size=40), json_values.map(json.dumps)),
)
def test_check_file_on_disk_never_raises(tmp_path: Path, content: bytes, marker: Any) -> None:
    """The whole read-validate path on a real file, marker and state.json included."""
    specs = tmp_path / "specs"
    task = specs / "259_prove_completeness"
    task.mkdir(parents=True, exist_ok=True)
    (specs / "state.json").write_text(
        json.dumps({"active_projects": [{"project_number": 259, "language": "meta"}]}),
        encoding="utf-8",
    )
    (task / META_NAME).write_bytes(content)
    marker_path = task / ".postflight-pending"
    if marker is None:
        marker_path.unlink(missing_ok=True)
    else:
        marker_path.write_bytes(marker if isinstance(marker, bytes) else marker.encode())
    config = Config()
    ref = MetaFileRef.at(task / META_NAME)
    with Project.open(tmp_path, config) as project:
        report = check_file(project, ref, config, Policy(), NOW)
    _check(report.findings)
    assert report.valid == (
        report.validation is not None
        and report.validation.model is not None
        and not any(f.severity is Severity.ERROR for f in report.findings)
    )


# --- links accumulate, like state.json's artifacts: any run of outcomes, any real TODO.md form --

_TASK_DIR = "specs/7_x"
#: every path keeps its type (as an object; as a plain string the folder gives the type)
_POOL: dict[str, str] = {
    "reports/r1.md": "report",
    "reports/r2.md": "research_report",
    "plans/p1.md": "plan",
    "plans/p2.md": "implementation_plan",
    "summaries/s1.md": "summary",
    "summaries/s2.md": "implementation_summary",
    "src/x.py": "implementation",
    "misc/notes.txt": "notes",
}
_LINKED_TYPES = frozenset(
    {"research", "plan", "summary", "research_report", "implementation_plan"}
    | {"implementation_summary"}
)
#: starting link lines, each with the linked artifacts state.json lists for them
_START_FORMS: list[tuple[str, list[dict[str, str]]]] = [
    ("", []),
    ("- **Research**: [n.md](specs/7_x/reports/n.md)\n", [{"type": "research", "path": "n"}]),
    (
        "- **Research**:\n  - [n.md](7_x/reports/n.md) \u2014 notes\n",
        [{"type": "research", "path": "n"}],
    ),
    ("- **Artifacts**:\n  - reports/n.md\n", [{"type": "research", "path": "n"}]),
    (
        "- **Research Report**: [specs/7_x/reports/n.md]\n- **Summaries**:\n",
        [{"type": "research", "path": "n"}],
    ),
    ("- **Implementation Plan**: TBD\n- **Summary**:\n", []),
]
_OUTCOME = st.tuples(
    st.sampled_from(["researched", "planned", "implemented", "partial", "failed", "blocked"]),
    st.lists(st.tuples(st.sampled_from(sorted(_POOL)), st.booleans()), max_size=4),
)


def _outcome_doc(status: str, artifacts: list[tuple[str, bool]]) -> dict[str, Any]:
    listed: list[Any] = []
    for path, as_string in artifacts:
        full = f"{_TASK_DIR}/{path}"
        listed.append(full if as_string else {"type": _POOL[path], "path": full, "summary": "s"})
    doc: dict[str, Any] = {
        "status": status,
        "artifacts": listed,
        "metadata": {"session_id": "sess_1770000000_abc123", "agent_type": "a"},
    }
    if status == "implemented":
        doc["completion_data"] = {"completion_summary": "done"}
    return doc


@settings(max_examples=300, deadline=None, database=None)
@given(
    start=st.sampled_from(_START_FORMS),
    status=st.sampled_from(["not_started", "researching", "planned", "implementing", "blocked"]),
    outcomes=st.lists(_OUTCOME, max_size=6),
    crlf=st.booleans(),
)
def test_links_accumulate_and_match_state(
    start: tuple[str, list[dict[str, str]]],
    status: str,
    outcomes: list[tuple[str, list[tuple[str, bool]]]],
    crlf: bool,
) -> None:
    """No outcome drops a link or links a path twice; TODO.md links exactly state.json's
    linked artifacts; the batch (fast) path equals the one-by-one path; statuses never go
    back along the line."""
    from postflightd.models.metadata import MetadataFile
    from postflightd.postflight.todo_edit import _apply_one_by_one, apply_todo_edits, section_links
    from postflightd.postflight.transform import STATUS_LINE, apply_outcome

    lines, artifacts = start
    eol = "\r\n" if crlf else "\n"
    todo = (
        "# TODO\n\n### 8. Before\n- **Status**: [PLANNED]\n\n"
        f"### 7. Task\n- **Status**: [{status.upper()}]\n- **Language**: python\n{lines}\n"
        "Description.\n\n### 6. After\n- **Plan**: [p.md](specs/6_y/plans/p.md)\n"
    ).replace("\n", eol)
    known = [{**a, "path": f"{_TASK_DIR}/reports/n.md"} for a in artifacts]
    state: dict[str, Any] = {
        "active_projects": [{"project_number": 7, "status": status, "artifacts": known}]
    }
    initial = todo
    edits = []
    for outcome_status, listed in outcomes:
        meta = MetadataFile.model_validate(_outcome_doc(outcome_status, listed))
        before_links = section_links(todo, 7, _TASK_DIR)
        before_status = state["active_projects"][0]["status"]
        applied = apply_outcome(
            state, meta, task=7, file=f"{_TASK_DIR}/.return-meta.json", now=NOW, status_map={}
        )
        state = applied.state
        after_status = state["active_projects"][0]["status"]
        if before_status in STATUS_LINE and after_status in STATUS_LINE:
            assert STATUS_LINE.index(after_status) >= STATUS_LINE.index(before_status)
        if applied.todo is not None:
            edits.append(applied.todo)
            todo, missing = apply_todo_edits(todo, [applied.todo])
            assert missing == []
        links = section_links(todo, 7, _TASK_DIR)
        assert before_links is not None
        assert links is not None
        for link in before_links:
            assert link in links, "a link was dropped"
        paths = [
            a["path"]
            for a in state["active_projects"][0]["artifacts"]
            if a.get("type") in _LINKED_TYPES
        ]
        assert len(links) == len(paths)
        for path in paths:
            assert sum(path in link for link in links) == 1, path
        assert todo.startswith(f"# TODO{eol}{eol}### 8. Before{eol}- **Status**: [PLANNED]{eol}")
        assert todo.endswith(
            f"Description.{eol}{eol}### 6. After{eol}- **Plan**: [p.md](specs/6_y/plans/p.md){eol}"
        )
    # The whole run in one batch (the group commit's fast path) gives the same bytes as the
    # edits one by one, and as applying them as they came.
    assert apply_todo_edits(initial, edits) == _apply_one_by_one(initial, edits) == (todo, [])
