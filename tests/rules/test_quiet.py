"""The quiet shortcut (``rules.metadata._quiet``): a clean document it lets through gets from
``validate`` exactly what every rule would have given it. ``validate`` returns at once, with no
finding, for a clean document the shortcut calls quiet; everything else goes through the rules
(``_validate_all``). The shortcut is written from each rule's declared condition
(``rules.conditions``, ``rules.quiet_source``), over the fields of a clean document; it is only
safe if it never calls quiet a document some rule flags. Checked here on clean documents built
to sit on every rule's edge (statuses, start times, progress, completion data, errors, sessions,
delegation, artifacts) under random task contexts and artifact states, and on each single fault,
which must be worded by its rule.
"""

from __future__ import annotations

import ast
import copy
import inspect
import re
import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.documents import SESSION
from helpers.update_mode import rewritten, updating
from postflightd.models.terms import ARTIFACT_TYPES, Status
from postflightd.rules import metadata as rules
from postflightd.rules import toolkit
from postflightd.rules.clean import is_clean
from postflightd.rules.conditions import Condition, codes_of, registered
from postflightd.rules.context import TaskContext
from postflightd.rules.metadata import RuleOptions, Validation, validate
from postflightd.rules.probe import ArtifactState
from postflightd.rules.quiet_source import expression_of, generated_part, metadata_quiet

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
TIMEOUTS = {"research": 1800.0, "planning": 1800.0, "implementation": 7200.0, "default": 3600.0}
SCAN = RuleOptions(timeouts=TIMEOUTS, check_artifacts=True, model=False)


def _probe_of(states: dict[str, ArtifactState]) -> Any:
    return lambda path: states.get(path, ArtifactState.OK)


def _all_rules(doc: dict[str, Any], ctx: TaskContext, probe: Any) -> Validation:
    return rules._validate_all(doc, ctx, NOW, SCAN, probe, is_clean(doc))


def _same(doc: dict[str, Any], ctx: TaskContext, states: dict[str, ArtifactState]) -> Validation:
    """``validate`` (with its shortcut) and every rule agree on ``doc``; what they gave."""
    assert is_clean(doc), doc
    got = validate(copy.deepcopy(doc), ctx, NOW, SCAN, _probe_of(states))
    expected = _all_rules(copy.deepcopy(doc), ctx, _probe_of(states))
    assert got == expected
    return got


def _context(**fields: Any) -> TaskContext:
    base: dict[str, Any] = {
        "dir_name": "14_fix_it",
        "number": 14,
        "slug": "fix_it",
        "state_known": True,
        "task": {"project_number": 14, "project_name": "fix_it", "language": "python"},
    }
    return TaskContext(**{**base, **fields})


def _doc(status: str = "researched", **fields: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "status": status,
        "artifacts": [
            {"type": "report", "path": "specs/14_fix_it/reports/r.md", "summary": "Report"}
        ],
        "metadata": {
            "session_id": SESSION,
            "agent_type": "general-research-agent",
            "delegation_depth": 1,
            "delegation_path": ["orchestrator", "research", "general-research-agent"],
        },
        "next_steps": "Plan it",
    }
    doc.update(fields)
    return doc


def test_a_plain_clean_file_is_quiet_and_gets_what_the_rules_give() -> None:
    got = _same(_doc(), _context(), {})
    assert got.findings == [] and got.status is Status.RESEARCHED
    assert got.operation == "research" and got.timeout_s == 1800.0


#: One fault each on a clean document, by the rule that must word it.
FAULTS: dict[str, tuple[dict[str, Any], TaskContext, dict[str, ArtifactState], str]] = {
    "started_at unreadable": (_doc(started_at="yesterday"), _context(), {}, "PF301"),
    "started_at in the future": (
        _doc(started_at=(NOW + timedelta(hours=1)).isoformat()),
        _context(),
        {},
        "PF301",
    ),
    "in_progress without started_at": (
        _doc("in_progress", partial_progress={"stage": "s", "details": "d"}),
        _context(),
        {},
        "PF300",
    ),
    "in_progress without progress": (
        _doc("in_progress", started_at=NOW.isoformat()),
        _context(),
        {},
        "PF302",
    ),
    "progress left on success": (
        _doc(partial_progress={"stage": "s", "details": "d"}),
        _context(),
        {},
        "PF308",
    ),
    "implemented without completion": (_doc("implemented"), _context(), {}, "PF303"),
    "meta implemented without suggestions": (
        _doc("implemented", completion_data={"completion_summary": "Done."}),
        _context(task={"project_number": 14, "project_name": "fix_it", "language": "meta"}),
        {},
        "PF305",
    ),
    "completion on research": (
        _doc(completion_data={"completion_summary": "Done."}),
        _context(),
        {},
        "PF309",
    ),
    "roadmap items on a meta task": (
        _doc(
            "implemented",
            completion_data={
                "completion_summary": "Done.",
                "claudemd_suggestions": "none",
                "roadmap_items": ["x"],
            },
        ),
        _context(task={"project_number": 14, "project_name": "fix_it", "language": "meta"}),
        {},
        "PF306",
    ),
    "suggestions on a non-meta task": (
        _doc(
            "implemented",
            completion_data={"completion_summary": "Done.", "claudemd_suggestions": "none"},
        ),
        _context(),
        {},
        "PF306",
    ),
    "failed without errors": (_doc("failed", errors=[]), _context(), {}, "PF307"),
    "phases past the total": (
        _doc(
            "partial",
            partial_progress={
                "stage": "s",
                "details": "d",
                "phases_completed": 3,
                "phases_total": 2,
            },
            errors=[{"message": "m", "type": "t", "recoverable": True, "recommendation": "r"}],
        ),
        _context(),
        {},
        "PF310",
    ),
    "session of another form": (
        _doc(metadata={**_doc()["metadata"], "session_id": "session-1"}),
        _context(),
        {},
        "PF400",
    ),
    "another session than delegated": (
        _doc(),
        _context(marker_session="sess_1736700001_zzzzzz"),
        {},
        "PF405",
    ),
    "another session than state.json's": (
        _doc(),
        _context(
            task={
                "project_number": 14,
                "project_name": "fix_it",
                "session_id": "sess_1736700001_zzzzzz",
            }
        ),
        {},
        "PF405",
    ),
    "delegation too deep": (
        _doc(metadata={**_doc()["metadata"], "delegation_depth": 4}),
        _context(),
        {},
        "PF401",
    ),
    "a delegation cycle": (
        _doc(metadata={**_doc()["metadata"], "delegation_path": ["a", "b", "a"]}),
        _context(),
        {},
        "PF402",
    ),
    "depth against path": (
        _doc(metadata={**_doc()["metadata"], "delegation_depth": 2}),
        _context(),
        {},
        "PF403",
    ),
    "agent not last": (
        _doc(metadata={**_doc()["metadata"], "agent_type": "someone-else"}),
        _context(),
        {},
        "PF404",
    ),
    "negative duration": (
        _doc(metadata={**_doc()["metadata"], "duration_seconds": -1}),
        _context(),
        {},
        "PF406",
    ),
    "a broken marker": (
        _doc(),
        _context(marker_findings=(rules.finding("PF605", "", "marker"),)),
        {},
        "PF605",
    ),
    "success without artifacts": (_doc(artifacts=[]), _context(), {}, "PF500"),
    "unknown artifact type": (
        _doc(artifacts=[{"type": "notes", "path": "a.md", "summary": "s"}]),
        _context(),
        {},
        "PF204",
    ),
    "an artifact twice": (
        _doc(artifacts=[{"type": "report", "path": "a.md", "summary": "s"}] * 2),
        _context(),
        {},
        "PF504",
    ),
    "an artifact outside": (
        _doc(artifacts=[{"type": "report", "path": "../a.md", "summary": "s"}]),
        _context(),
        {},
        "PF501",
    ),
    "an artifact missing": (
        _doc(),
        _context(),
        {"specs/14_fix_it/reports/r.md": ArtifactState.MISSING},
        "PF502",
    ),
    "an artifact empty": (
        _doc(),
        _context(),
        {"specs/14_fix_it/reports/r.md": ArtifactState.EMPTY},
        "PF503",
    ),
    "a task not in state.json": (_doc(), _context(task=None), {}, "PF600"),
    "a slug against the name": (
        _doc(),
        _context(task={"project_number": 14, "project_name": "other"}),
        {},
        "PF601",
    ),
    "a stuck run": (
        _doc(
            "in_progress",
            started_at=(NOW - timedelta(days=1)).isoformat(),
            partial_progress={"stage": "s", "details": "d"},
        ),
        _context(),
        {},
        "PF602",
    ),
    "a leftover": (_doc(), _context(written=NOW - timedelta(days=200)), {}, "PF607"),
    "a leftover of a failed run": (
        _doc(
            "failed",
            errors=[{"message": "m", "type": "t", "recoverable": True, "recommendation": "r"}],
        ),
        _context(written=NOW - timedelta(days=3), first_seen=NOW - timedelta(days=1)),
        {},
        "PF607",
    ),
}


@pytest.mark.parametrize("name", list(FAULTS))
def test_each_fault_is_worded_by_its_rule(name: str) -> None:
    doc, ctx, states, code = FAULTS[name]
    got = _same(doc, ctx, states)
    assert code in {f.code for f in got.findings}


# --- random clean documents on the rules' edges --------------------------------------------

texts = st.sampled_from(("x", "fix_it", "Plan it", "research", "a b"))
paths = st.sampled_from(
    (
        "specs/14_fix_it/reports/r.md",
        "specs/14_fix_it/plans/p.md",
        "docs/a.md",
        "../a.md",
        "/etc/passwd",
        "~/a.md",
        "C:/a.md",
        "https://example.com/a",
        "a/../../b.md",
        "a\x1fb.md",
        "a" * 5000,
    )
)
sessions = st.sampled_from((SESSION, "sess_1736700001_zzzzzz", "session-1", "sess_1_ABCDEF"))
agents = st.sampled_from(
    ("general-research-agent", "planner-agent", "general-implementation-agent", "orchestrator")
)
starts = st.one_of(
    st.sampled_from(("yesterday", "2026-13-01T00:00:00Z", " 2026-11-26T11:00:00 ")),
    st.timedeltas(min_value=timedelta(days=-3), max_value=timedelta(hours=1)).map(
        lambda d: (NOW + d).isoformat()
    ),
)
written_times = st.timedeltas(min_value=timedelta(days=-300), max_value=timedelta(hours=1)).map(
    lambda d: NOW + d
)
phases = st.one_of(st.none(), st.integers(min_value=-1, max_value=4))
ERROR = {"message": "m", "type": "t", "recoverable": True, "recommendation": "r"}


def _quiet_pair(status: Status, meta_task: bool) -> tuple[dict[str, Any], TaskContext]:
    """A clean document of ``status`` and a context that no rule has anything to say about."""
    doc = _doc(status.value)
    if status is Status.IN_PROGRESS:
        doc["started_at"] = (NOW - timedelta(minutes=1)).isoformat()
    if status in {Status.IN_PROGRESS, Status.PARTIAL}:
        doc["partial_progress"] = {"stage": "s", "details": "d"}
    if status in {Status.PARTIAL, Status.FAILED, Status.BLOCKED}:
        doc["errors"] = [dict(ERROR)]
    language = "meta" if meta_task else "python"
    if status is Status.IMPLEMENTED:
        completion: dict[str, Any] = {"completion_summary": "Done."}
        if meta_task:
            completion["claudemd_suggestions"] = "none"
        doc["completion_data"] = completion
    task = {"project_number": 14, "project_name": "fix_it", "language": language}
    return doc, _context(task=task)


def _set_phases(draw: st.DrawFn, obj: dict[str, Any]) -> None:
    for key in ("phases_completed", "phases_total"):
        value = draw(phases)
        if value is None:
            obj.pop(key, None)
        else:
            obj[key] = value


def _mutate(draw: st.DrawFn, doc: dict[str, Any], ctx: TaskContext) -> TaskContext:
    """One change, drawn from those that sit on a rule's edge (the change may keep it quiet)."""
    meta = doc["metadata"]
    what = draw(st.integers(min_value=0, max_value=17))
    if what == 0:
        doc["started_at"] = draw(starts)
    elif what == 1:
        doc.pop("started_at", None)
    elif what == 2:
        doc["partial_progress"] = {"stage": "s", "details": "d"}
        _set_phases(draw, doc["partial_progress"])
    elif what == 3:
        doc.pop("partial_progress", None)
    elif what == 4:
        completion: dict[str, Any] = {"completion_summary": "Done."}
        for key, value in (("roadmap_items", ["x"]), ("claudemd_suggestions", "none")):
            if draw(st.booleans()):
                completion[key] = value
        doc["completion_data"] = completion
    elif what == 5:
        doc.pop("completion_data", None)
    elif what == 6:
        doc["errors"] = [dict(ERROR)] * draw(st.integers(min_value=0, max_value=2))
    elif what == 7:
        _set_phases(draw, meta)
    elif what == 8:
        meta["session_id"] = draw(sessions)
    elif what == 9:
        meta["delegation_depth"] = draw(st.integers(min_value=-1, max_value=4))
    elif what == 10:
        meta["delegation_path"] = draw(st.lists(agents, max_size=4))
    elif what == 11:
        meta["agent_type"] = draw(agents)
    elif what == 12:
        meta["duration_seconds"] = draw(st.sampled_from((-1, 0, 12.5)))
    elif what == 13:
        doc["artifacts"] = draw(
            st.lists(
                st.fixed_dictionaries(
                    {
                        "type": st.sampled_from((*ARTIFACT_TYPES, "notes")),
                        "path": paths,
                        "summary": texts,
                    }
                ),
                max_size=3,
            )
        )
    elif what == 14:
        doc["status"] = draw(st.sampled_from([s.value for s in Status]))
    elif what == 15:
        task = draw(
            st.one_of(
                st.none(),
                st.fixed_dictionaries(
                    {"project_number": st.just(14)},
                    optional={
                        "project_name": st.sampled_from(("fix_it", "other", 3)),
                        "language": st.sampled_from(("meta", "python", None)),
                        "session_id": st.one_of(sessions, st.just(""), st.none()),
                    },
                ),
            )
        )
        return replace(ctx, task=task)
    elif what == 16:
        return replace(
            ctx,
            number=draw(st.sampled_from((14, None))),
            slug=draw(st.sampled_from(("fix_it", "other", None))),
            state_known=draw(st.booleans()),
            # PF607: a final file written long before its first sight (or now) is a leftover.
            written=draw(st.one_of(st.none(), written_times)),
            first_seen=draw(st.one_of(st.none(), written_times)),
        )
    else:
        return replace(
            ctx,
            marker_session=draw(st.one_of(st.none(), sessions)),
            marker_operation=draw(st.sampled_from((None, "research", "implementation"))),
            marker_findings=draw(st.sampled_from(((), (rules.finding("PF605", "", "m"),)))),
        )
    return ctx


@st.composite
def cases(draw: st.DrawFn) -> tuple[dict[str, Any], TaskContext, dict[str, ArtifactState]]:
    """A quiet clean document and its context, then zero to three changes on the rules' edges,
    and the disk's answer for some artifact paths."""
    doc, ctx = _quiet_pair(draw(st.sampled_from(list(Status))), draw(st.booleans()))
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        ctx = _mutate(draw, doc, ctx)
    states = draw(st.dictionaries(paths, st.sampled_from(list(ArtifactState)), max_size=2))
    return doc, ctx, states


def _says_quiet(doc: dict[str, Any], ctx: TaskContext, states: dict[str, ArtifactState]) -> bool:
    """The shortcut's own verdict on ``doc``: quiet (validate returns at once) or not."""
    status = Status(doc["status"])
    return rules._quiet(doc, status, ctx, NOW, _probe_of(states)) is not False


#: Each verdict of the shortcut must come up at least this often among the random cases: a
#: shortcut that always says "not quiet" (or always "quiet") would otherwise pass unseen.
VERDICT_FLOOR = 0.2


def test_validate_with_the_shortcut_gives_what_every_rule_gives() -> None:
    """On each random case validate gives what every rule gives; and the cases are worth
    it: the shortcut says quiet on some of them and not quiet on others, each above a floor."""
    verdicts: list[bool] = []

    @settings(max_examples=2000, deadline=None, database=None)
    @given(case=cases())
    def same(case: tuple[dict[str, Any], TaskContext, dict[str, ArtifactState]]) -> None:
        _same(*case)
        verdicts.append(_says_quiet(*case))

    same()
    quiet = sum(verdicts) / len(verdicts)
    assert VERDICT_FLOOR < quiet < 1 - VERDICT_FLOOR, (
        f"the shortcut said quiet on {sum(verdicts)} of {len(verdicts)} cases"
    )


@pytest.mark.parametrize("status", list(Status))
@pytest.mark.parametrize("meta_task", [False, True])
def test_the_quiet_base_of_each_status_is_quiet(status: Status, meta_task: bool) -> None:
    """Where the random cases start: quiet, so that a change that keeps it so is tried too."""
    doc, ctx = _quiet_pair(status, meta_task)
    assert _same(doc, ctx, {}).findings == []
    assert rules._quiet(doc, status, ctx, NOW, _probe_of({})) is not False


# --- the shortcut is the rules' own conditions -------------------------------------------------

UPDATE_ENV = "POSTFLIGHTD_UPDATE_CORE_SCHEMA"
RULES = Path(rules.__file__)


def _same_code(one: str, other: str) -> bool:
    """The same code, however it is laid out (the file is formatted, the comments aside)."""
    return ast.dump(ast.parse(one)) == ast.dump(ast.parse(other))


def test_the_shortcut_is_what_the_rules_conditions_give() -> None:
    """The shortcut is written from the conditions the rules declare (``rules.quiet_source``);
    a condition changed, added or removed without running the generator fails here."""
    text = RULES.read_text(encoding="utf-8")
    start, end = generated_part(text)
    wanted = metadata_quiet()
    current = _same_code(text[start:end], wanted)
    if updating(UPDATE_ENV) and not current:
        RULES.write_text(text[:start] + wanted + text[end:], encoding="utf-8")
        subprocess.run([sys.executable, "-m", "ruff", "format", "-q", str(RULES)], check=True)
        rewritten(RULES, UPDATE_ENV)
    assert current, (
        f"the rules' conditions changed: run {UPDATE_ENV}=1 pytest {Path(__file__).name}"
    )


def _codes_in(*functions: Any) -> set[str]:
    """The codes the source of ``functions`` names."""
    return {
        code
        for function in functions
        for code in re.findall(r'"(PF\d{3})"', inspect.getsource(function))
    }


def _declared() -> list[Condition]:
    return [*registered(toolkit.__name__), *registered(rules.__name__)]


def test_every_rule_the_shortcut_stands_for_declares_its_condition() -> None:
    """A rule added to one of the steps the shortcut stands for, with no condition declared,
    fails here, whatever the random cases happen to reach; a condition the shortcut leaves out
    says why no clean document meets it."""
    given = _codes_in(
        rules._run_start,
        rules._status_rules,
        toolkit.session_rules,
        toolkit.artifact_rules,
        rules._task_rules,
    )
    declared = {code for found in _declared() for code in codes_of(found)}
    assert given <= declared, "a rule without its condition (rules.conditions)"
    # PF605 comes with the task's marker, not from a rule's source: it is declared too.
    assert "PF605" in declared
    left_out = {found.codes for found in _declared() if found.never_clean}
    assert left_out == {"PF208", "PF304"}
    # Every condition asked is in the shortcut, named beside its test.
    shortcut = inspect.getsource(rules._quiet)
    for found in _declared():
        if not found.never_clean:
            assert f"# {found.codes}" in shortcut, found.codes


def test_a_condition_that_is_not_one_return_is_refused() -> None:
    """The generator inlines each condition's one expression: a body it cannot inline (here,
    two statements) is refused rather than copied in part."""

    def two_steps(duration: float | None) -> bool:
        if duration is None:
            return False
        return duration < 0

    with pytest.raises(TypeError, match="one return"):
        expression_of(Condition("PF406", two_steps, {"duration": "metadata.duration_seconds"}))
