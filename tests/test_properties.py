"""Property tests: whatever JSON or bytes an agent writes, validation never raises."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from postflightd.config import Config
from postflightd.findings import RULES, Finding, Policy, Severity
from postflightd.loader import META_NAME, MetaFileRef, parse_json
from postflightd.pipeline import Project, check_file
from postflightd.rules import ArtifactState, RuleOptions, TaskContext, validate

SEED004 = Path(__file__).parent / "fixtures" / "seed004"
EXAMPLES = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(SEED004.glob("*.json"))]
NOW = datetime(2026, 1, 28, 12, 0, tzinfo=UTC)
OPTIONS = RuleOptions(timeouts=Config().timeouts.as_mapping())
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


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside a JSON document."""
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def mutated_examples(draw: st.DrawFn) -> Any:
    """A seed 004 example with a few values replaced, deleted or added anywhere."""
    doc = copy.deepcopy(draw(st.sampled_from(EXAMPLES)))
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        paths = _paths(doc)
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
    project = Project.open(tmp_path, config)
    ref = MetaFileRef(task / META_NAME, task.name)
    report = check_file(project, ref, config, Policy(), NOW)
    _check(report.findings)
    assert report.valid == (
        report.validation is not None
        and report.validation.model is not None
        and not any(f.severity is Severity.ERROR for f in report.findings)
    )
