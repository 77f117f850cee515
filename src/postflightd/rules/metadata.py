"""The metadata file's validation rules, as a pure function of a parsed document.

``validate`` takes the parsed JSON value, what is known of the task (``TaskContext``), the
clock and an artifact probe, and returns findings plus the typed model when the document's
structure allows one. It never raises on any JSON value: rules read the raw document through
type-checking accessors, so one wrong type does not hide the rest of the findings.

The rules run in the order an agent's file is read: required fields, status, session,
artifacts; then the project checks. Every step runs whatever an earlier one found (a bad
status hides nothing: ``_judged``), and the findings of a step come in the order of their
place in the file (``in_file_order``). The checks check-return shares are in ``toolkit``; what
is left here is one contract's rule set, read top to bottom in that order. What validation is
told of the project is ``context``'s (``TaskContext``) and ``probe``'s (``ArtifactProbe``).

Each rule returns what it found: findings, and where the caller needs more (when the run
started, whether it is stuck) a small value beside them; ``validate`` assembles the
``Validation`` from those values once.

Why this module stays whole at under 1,000 lines: it is one contract's rule set, read top to
bottom in the order its findings come out, each rule beside the condition it declares
(``rules.conditions``); split, that order would be spread over several files. About 150 of
the lines are the quiet check, which is generated from those conditions
(``rules.quiet_source``) and belongs with them: it runs among this module's names.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Final, Literal

from postflightd.durations import format_duration
from postflightd.inert import CONTROL_OR_LINE_SEPARATOR, clip
from postflightd.models.terms import (
    ARTIFACT_TYPES,
    KNOWN_FIELDS,
    MAX_DELEGATION_DEPTH,
    TROUBLE_STATUSES,
    Status,
    type_from_folder,
)
from postflightd.models.todo_link import MAX_LINK_CHARS, link_too_long
from postflightd.rules.clean import is_clean, is_clean_but_for_extras
from postflightd.rules.conditions import condition
from postflightd.rules.context import TaskContext
from postflightd.rules.findings import Finding, Severity, finding
from postflightd.rules.probe import ArtifactProbe, ArtifactState
from postflightd.rules.toolkit import (
    SESSION_RE,
    ArtifactContract,
    artifact_rules,
    asked_fields,
    blank_fields,
    get_int,
    get_list,
    get_object,
    get_str,
    is_blank,
    not_an_object,
    outside_root,
    session_rules,
    status_finding,
    structure,
    unknown_fields,
)
from postflightd.rules.typed import typed_value
from postflightd.runs.lifecycle import operation_of, timeout_for
from postflightd.timestamps import parse_timestamp
from postflightd.words import article, counted

if TYPE_CHECKING:
    from postflightd.models.metadata import MetadataFile

FUTURE_TOLERANCE: Final = timedelta(minutes=5)


def _model() -> type[MetadataFile]:
    """The metadata model, imported with pydantic by the first document that needs it."""
    from postflightd.models.metadata import MetadataFile

    return MetadataFile


def _type_check() -> Callable[[Any], Any]:
    """What checks a document's types and builds its typed value: the models' own
    pydantic-core schema, stored (``models.metadata_core``), which gives the models' very
    errors and the same fields (read by attribute, as postflight reads them) without
    pydantic; the models where this pydantic-core cannot build it."""
    from postflightd.models.metadata_core import validator

    checker = validator()
    return _model().model_validate if checker is None else checker.validate_python


def prepare_type_check(options: RuleOptions) -> None:
    """Load what checks a document that is not clean (the stored schema's validator, or the
    models), ahead of the first such document; ``options`` need not say which."""
    del options  # one checker serves both: with the typed value wanted or not
    _type_check()


@dataclass(frozen=True, slots=True)
class RuleOptions:
    """What the configuration tells the rules: each operation's timeout, whether artifacts are
    looked at on disk, and whether the typed value is wanted."""

    timeouts: Mapping[str, float]
    check_artifacts: bool = True
    #: the typed value of a valid document is wanted (postflight applies it); a plain scan,
    #: which only reports, does without it, and a clean document then skips the type check.
    model: bool = True


@dataclass(slots=True)
class Validation:
    """What validating one document found."""

    findings: list[Finding] = field(default_factory=list)
    #: the valid document typed: built by the stored schema's validator (``_type_check``), or
    #: for a clean one by ``rules.typed``, it has the models' fields and values, read by
    #: attribute, but none of pydantic's methods
    model: MetadataFile | None = None
    status: Status | None = None
    operation: str | None = None
    started_at: datetime | None = None
    timeout_s: float | None = None
    stuck: bool = False
    #: a final file written longer than its operation's timeout before it was first seen
    #: (PF607, whether shown or not): when its run ended is not known, so it has no duration.
    leftover: bool = False


# --- status suggestions ---------------------------------------------------------------------

_SUCCESS_BY_OPERATION: Final = {
    "research": Status.RESEARCHED,
    "planning": Status.PLANNED,
    "implementation": Status.IMPLEMENTED,
}
_SUCCESS_WORDS: Final = frozenset(
    {"success", "succeeded", "successful", "done", "complete", "completed", "finished", "ok"}
)
#: (stem, status): a word holding the stem probably means the status (``research_done``).
_STATUS_STEMS: Final = (
    ("research", Status.RESEARCHED),
    ("plan", Status.PLANNED),
    ("implement", Status.IMPLEMENTED),
    ("progress", Status.IN_PROGRESS),
    ("running", Status.IN_PROGRESS),
    ("start", Status.IN_PROGRESS),
    ("partial", Status.PARTIAL),
    ("fail", Status.FAILED),
    ("error", Status.FAILED),
    ("block", Status.BLOCKED),
)
_STATUS_VALUES: Final = tuple(s.value for s in Status)
_STATUS_BY_VALUE: Final = {s.value: s for s in Status}


def suggest_status(raw: str, operation: str | None) -> Status | None:
    """The status a near-miss such as ``research_done`` or ``success`` probably means."""
    # What a file meant (rules.fixes) is imported by a finding that says it: a clean file,
    # most of them, has none.
    from postflightd.rules.fixes import guess_status, status_word

    guess = guess_status(raw, _STATUS_VALUES, stems=_STATUS_STEMS)
    if guess is not None:
        return Status(guess)
    # A plain "success" means the success status of the run's operation, when that is known.
    word = status_word(raw)
    if word in _SUCCESS_WORDS or any(w in word.split("_") for w in _SUCCESS_WORDS):
        return _SUCCESS_BY_OPERATION.get(operation or "")
    return None


def _success_hint(operation: str | None) -> str:
    status = _SUCCESS_BY_OPERATION.get(operation or "")
    if status is not None:
        return f'this is {article(operation or "")} run, so write "status": "{status.value}"'
    return 'write "researched", "planned" or "implemented", whichever the run did'


# --- structure and fields (PF2xx) ---------------------------------------------------------

#: PF206: text fields postflight needs, which must not be blank.
_NEEDED_TEXT: Final = (
    ("metadata", "session_id"),
    ("partial_progress", "stage"),
    ("partial_progress", "details"),
)


def _status_finding(value: str, operation: str | None) -> Finding:
    if value.strip().lower() == "completed":
        from postflightd.rules.fixes import member  # with a finding only (suggest_status)

        status = _SUCCESS_BY_OPERATION.get(operation or "")
        return finding(
            "PF203",
            "status",
            '"completed" is forbidden in the metadata file (it triggers the agent runtime\'s '
            f"stop behaviour): {_success_hint(operation)}",
            fix=member("status", status.value) if status is not None else None,
        )
    guess = suggest_status(value, operation)
    return status_finding(value, "status", _STATUS_VALUES, guess.value if guess else None)


#: Kinds in the order PF205 reports them: the objects first, then the lists' items.
_KNOWN_IN_ORDER: Final = {
    kind: KNOWN_FIELDS[kind]
    for kind in ("", "metadata", "partial_progress", "completion_data", "artifacts[]", "errors[]")
}

#: Schema-asked text that postflight can do without: blank counts as missing (PF207).
_SPARE_METADATA: Final = ("agent_type", "delegation_depth", "delegation_path")
_SPARE_ARTIFACT: Final = ("type", "summary")
_SPARE_ERROR: Final = ("type", "recoverable", "recommendation")


def _spare(obj: dict[str, Any], keys: Sequence[str], prefix: str) -> Iterator[Finding]:
    """PF207 for each schema-asked key of ``obj`` that is missing, or blank text."""
    return asked_fields(obj, keys, prefix, "add it", "fill it in (the schema asks)")


def _optional_blank(doc: dict[str, Any]) -> Iterator[Finding]:
    """PF206 at warning severity: optional text given but blank (postflight does not need it)."""
    if is_blank(doc.get("next_steps")):
        yield finding(
            "PF206",
            "next_steps",
            "next_steps is blank: say what comes next, or leave it out",
            Severity.WARNING,
        )
    lists = (
        ("metadata", "delegation_path", get_list(get_object(doc, "metadata"), "delegation_path")),
        (
            "completion_data",
            "roadmap_items",
            get_list(get_object(doc, "completion_data"), "roadmap_items"),
        ),
    )
    for parent, key, items in lists:
        for i, item in enumerate(items or []):
            if is_blank(item):
                loc = f"{parent}.{key}[{i}]"
                yield finding(
                    "PF206", loc, f"{loc} is blank: fill it in or remove it", Severity.WARNING
                )


def _schema_fields(doc: dict[str, Any]) -> Iterator[Finding]:
    """PF206 (blank text) and PF207 (schema field missing or blank that postflight can spare).

    Blank text is judged like a missing field: an error where postflight needs the field
    (PF206), a PF207 warning where the schema asks for it but postflight can do without, and
    a PF206 warning for optional text given blank.
    """
    yield from blank_fields(doc, _NEEDED_TEXT)
    meta = get_object(doc, "metadata")
    if meta is not None:
        yield from _spare(meta, _SPARE_METADATA, "metadata")
    for i, art in enumerate(get_list(doc, "artifacts") or []):
        if isinstance(art, str):
            # A plain path string (PF208): its missing type and summary are said there.
            if is_blank(art):
                yield finding("PF206", f"artifacts[{i}]", "artifact path is blank")
            continue
        if not isinstance(art, dict):
            continue
        if is_blank(art.get("path")):
            yield finding("PF206", f"artifacts[{i}].path", "artifact path is blank")
        yield from _spare(art, _SPARE_ARTIFACT, f"artifacts[{i}]")
    for i, err in enumerate(get_list(doc, "errors") or []):
        if not isinstance(err, dict):
            continue
        if is_blank(err.get("message")):
            yield finding(
                "PF206", f"errors[{i}].message", "error message is blank: say what failed"
            )
        yield from _spare(err, _SPARE_ERROR, f"errors[{i}]")
    yield from _optional_blank(doc)


# --- status-dependent rules (PF3xx) --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunStart:
    """What ``started_at`` says: when the run started (None: unknown or unusable), and what is
    wrong with it."""

    findings: list[Finding]
    at: datetime | None


@condition("PF301", raw="started_at")
def _start_unusable(raw: str | None, started: datetime | None, now: datetime) -> bool:
    return raw is not None and (started is None or started - now > FUTURE_TOLERANCE)


@condition("PF300", raw="started_at")
def _start_missing(status: Status | None, raw: object) -> bool:
    return status is Status.IN_PROGRESS and raw is None


def _run_start(doc: dict[str, Any], status: Status | None, now: datetime) -> RunStart:
    found: list[Finding] = []
    at = None
    started_raw = doc.get("started_at")
    if isinstance(started_raw, str):
        started = parse_timestamp(started_raw)
        if not _start_unusable(started_raw, started, now):
            at = started
        elif started is None:
            found.append(
                finding(
                    "PF301",
                    "started_at",
                    f"started_at {clip(started_raw)!r} is not ISO 8601; "
                    'write e.g. "2026-01-28T10:30:00Z"',
                )
            )
        else:
            found.append(
                finding(
                    "PF301",
                    "started_at",
                    f"started_at {started_raw} lies in the future: "
                    "write when the run started (UTC)",
                )
            )
    if _start_missing(status, started_raw):
        found.append(
            finding(
                "PF300",
                "started_at",
                "in_progress metadata needs started_at (ISO 8601) so a stuck run can be detected",
            )
        )
    return RunStart(found, at)


@condition("PF302", progress="partial_progress")
def _progress_missing(status: Status | None, progress: object) -> bool:
    return (status is Status.IN_PROGRESS or status is Status.PARTIAL) and progress is None


@condition("PF308", progress="partial_progress")
def _progress_left(success: bool, progress: object) -> bool:
    return success and progress is not None


@condition("PF303")
def _completion_missing(status: Status, given: bool) -> bool:
    return status is Status.IMPLEMENTED and not given


@condition("PF304", never_clean="a clean document's completion_summary is never blank")
def _summary_blank(status: Status, completion: dict[str, Any] | None) -> bool:
    return (
        status is Status.IMPLEMENTED
        and completion is not None
        and is_blank(completion.get("completion_summary"))
    )


@condition(
    "PF305", completion="completion_data", suggestions="completion_data.claudemd_suggestions"
)
def _suggestions_missing(
    status: Status, is_meta: bool | None, completion: object, suggestions: str | None
) -> bool:
    return (
        status is Status.IMPLEMENTED
        and is_meta is True
        and completion is not None
        and not (suggestions or "").strip()
    )


@condition("PF309")
def _completion_ignored(status: Status, given: bool) -> bool:
    return status is not Status.IMPLEMENTED and given


@condition("PF307", errors="errors")
def _errors_missing(status: Status, errors: list[Any] | None) -> bool:
    return status in TROUBLE_STATUSES and not errors


@condition("PF306", completion="completion_data")
def _roadmap_on_meta(is_meta: bool | None, completion: dict[str, Any] | None) -> bool:
    return completion is not None and is_meta is True and "roadmap_items" in completion


@condition("PF306", completion="completion_data")
def _suggestions_off_meta(is_meta: bool | None, completion: dict[str, Any] | None) -> bool:
    return completion is not None and is_meta is False and "claudemd_suggestions" in completion


@condition("PF310", done="metadata.phases_completed", total="metadata.phases_total")
@condition("PF310", done="partial_progress.phases_completed", total="partial_progress.phases_total")
def _phases_out_of_range(done: int | None, total: int | None) -> bool:
    return done is not None and (done < 0 or (total is not None and done > total))


def _status_specific(doc: dict[str, Any], status: Status, ctx: TaskContext) -> Iterator[Finding]:
    """The rules that ask which status the file has (PF302-PF305, PF307-PF309)."""
    progress = get_object(doc, "partial_progress")
    if _progress_missing(status, progress):
        yield finding(
            "PF302",
            "partial_progress",
            f"{status.value} metadata should carry partial_progress (stage, details) "
            "so the run can be resumed",
        )
    if _progress_left(status.is_success, progress):
        yield finding(
            "PF308",
            "partial_progress",
            f"partial_progress is left over on {article(status.value)} file; remove it",
        )

    completion = get_object(doc, "completion_data")
    given = "completion_data" in doc
    if _completion_missing(status, given):
        yield finding(
            "PF303",
            "completion_data",
            "implemented needs completion_data with a 1-3 sentence completion_summary",
        )
    elif _summary_blank(status, completion):
        yield finding(
            "PF304",
            "completion_data.completion_summary",
            "completion_summary is empty: say in 1-3 sentences what was accomplished",
        )
    if _suggestions_missing(
        status, ctx.is_meta, completion, get_str(completion, "claudemd_suggestions")
    ):
        yield finding(
            "PF305",
            "completion_data.claudemd_suggestions",
            "meta task implemented without claudemd_suggestions: describe the agent-system "
            'files changed, or write "none"',
        )
    if _completion_ignored(status, given):
        yield finding(
            "PF309",
            "completion_data",
            f"completion_data is only read for implemented, not {status.value}; it is ignored",
        )
    if _errors_missing(status, get_list(doc, "errors")):
        yield finding(
            "PF307",
            "errors",
            f"{status.value} with no errors entry: say what went wrong "
            "(postflight records a generic error instead)",
        )


def _status_rules(
    doc: dict[str, Any], status: Status | None, ctx: TaskContext
) -> Iterator[Finding]:
    """PF302-PF310. ``status`` None: the status is unknown and suggests none (``_judged``);
    only the rules that do not ask which status it is run (PF306, PF310)."""
    if status is not None:
        yield from _status_specific(doc, status, ctx)
    completion = get_object(doc, "completion_data")
    is_meta = ctx.is_meta
    if _roadmap_on_meta(is_meta, completion):
        yield finding(
            "PF306",
            "completion_data.roadmap_items",
            "roadmap_items is for non-meta tasks; this is a meta task",
        )
    if _suggestions_off_meta(is_meta, completion):
        yield finding(
            "PF306",
            "completion_data.claudemd_suggestions",
            "claudemd_suggestions is for meta tasks; this task's language is not meta",
        )

    for parent in ("partial_progress", "metadata"):
        obj = get_object(doc, parent)
        done, total = get_int(obj, "phases_completed"), get_int(obj, "phases_total")
        if _phases_out_of_range(done, total):
            yield finding(
                "PF310",
                f"{parent}.phases_completed",
                f"phases_completed {done} must lie between 0 and phases_total ({total})"
                if total is not None
                else f"phases_completed {done} is negative",
            )


# --- artifacts (PF5xx) ----------------------------------------------------------------------


def _plain_path(loc: str, art: str) -> Finding:
    kind = type_from_folder(art)
    return finding(
        "PF208",
        loc,
        f'artifact {clip(art)!r} is a plain path string: read as {{"path": ...}}'
        + (f' of type "{kind}" (from its folder)' if kind else " with no type (not linked)")
        + '; write {"type": ..., "path": ..., "summary": ...}',
    )


def _type_note(kind: str) -> str:
    return " (read as report)" if kind == "research" else " (linked as written)"


def _path_problem(path: str) -> str | None:
    unsafe = unsafe_path(path)
    return None if unsafe is None else f"artifact path {_shown(path)} {unsafe}"


_ARTIFACTS: Final = ArtifactContract(
    types=ARTIFACT_TYPES,
    path_problem=_path_problem,
    phantom="report",
    outside="(through a symlink)",
    write_it="write it",
    type_note=_type_note,
    plain_path=_plain_path,
)

#: ``javascript:``, ``file:``, ``https:``, ... (a drive letter is caught as absolute first)
_SCHEME_RE: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


def unsafe_path(path: str) -> str | None:
    """Why an artifact path cannot be linked safely (PF501), or None.

    Checked on the text alone, before the disk is asked: a path that escapes the root, holds
    a control character (it could break a TODO.md line), names a URI scheme (a link to
    ``javascript:`` is not a file) or makes a link longer than ``MAX_LINK_CHARS``.
    """
    if CONTROL_OR_LINE_SEPARATOR.search(path):
        return "holds a control character (CR, LF, NUL, ...): name the file plainly"
    if outside_root(path, absolute_allowed=False):
        return "must be relative to the project root and stay inside it"
    if _SCHEME_RE.match(path):
        return "is a URI, not a path relative to the project root"
    if link_too_long(path):
        return f"is too long: a TODO.md link is at most {MAX_LINK_CHARS:,} characters"
    return None


def _shown(path: str) -> str:
    """``path`` quoted for a message, cut short when long (control characters escaped)."""
    return repr(clip(path))


# --- the project (PF6xx) --------------------------------------------------------------------


@condition("PF600")
def _task_missing(ctx: TaskContext) -> bool:
    return ctx.state_known and ctx.number is not None and ctx.task is None


@condition("PF601")
def _task_renamed(ctx: TaskContext) -> bool:
    return (
        ctx.state_known
        and ctx.number is not None
        and ctx.task is not None
        and isinstance(project_name := ctx.task.get("project_name"), str)
        and ctx.slug is not None
        and project_name != ctx.slug
    )


@condition("PF605")
def _marker_found(ctx: TaskContext) -> bool:
    """The pending marker's own findings (``TaskContext.marker_findings``), which ``validate``
    reports beside the session's: the marker's reader words them."""
    return bool(ctx.marker_findings)


def _task_rules(ctx: TaskContext) -> Iterator[Finding]:
    if _task_missing(ctx):
        yield finding(
            "PF600",
            "",
            f"task {ctx.number} is not in state.json active_projects: "
            "create the task first, or fix the directory name",
        )
    elif _task_renamed(ctx) and ctx.task is not None and ctx.slug is not None:
        # (``task`` and ``slug`` said again for the type checker)
        yield finding(
            "PF601",
            "",
            f"directory slug {clip(ctx.slug)!r} differs from the task's project_name "
            f"{clip(ctx.task['project_name'])!r}",
        )


def _stuck(
    status: Status | None,
    started_at: datetime | None,
    operation: str | None,
    timeout_s: float | None,
    now: datetime,
) -> Finding | None:
    """PF602 when an in_progress run has gone past its operation's timeout (it is stuck)."""
    if status is not Status.IN_PROGRESS or started_at is None or not timeout_s:
        return None
    elapsed = (now - started_at).total_seconds()
    if elapsed <= timeout_s:
        return None
    # format_duration: the one duration format of every output (`status` shows it too).
    return finding(
        "PF602",
        "started_at",
        f"agent stuck: in_progress for {format_duration(elapsed)}, past the "
        f"{operation} timeout of {format_duration(timeout_s)}; the agent "
        "probably died: resume or restart the run",
    )


def _leftover(
    status: Status | None,
    ctx: TaskContext,
    operation: str | None,
    timeout_s: float | None,
    now: datetime,
) -> Finding | None:
    """PF607 when a final file was written longer than its operation's timeout before it was
    first seen: a leftover, whose outcome is dated when it was written, not when applied."""
    written = ctx.written
    if status is None or not status.is_final or written is None or not timeout_s:
        return None
    age = ((ctx.first_seen or now) - written).total_seconds()
    if age <= timeout_s:
        return None
    days = int(age // 86400)
    left = counted(days, "day") if days else format_duration(age)
    return finding(
        "PF607",
        "",
        f"a final file left {left} ago; applying it records that date "
        f"({written.date().isoformat()}), when the agent wrote it, not today (a leftover: "
        f"older than the {operation} timeout of {format_duration(timeout_s)} when first seen)",
        Severity.WARNING,
    )


# --- a clean document the rules have nothing to say about ---------------------------------------

#: The conditions' arguments that read no field of the document, as the quiet check gives
#: them: expressions over its own arguments (``doc``, ``status``, ``ctx``, ``now``, ``probe``)
#: and the fields of a clean document (``{started_at}``). ``started`` is what it returns.
QUIET_NAMES: Final = {
    "started": "parse_timestamp({started_at}) if {started_at} is not None else None",
    "given": "{completion_data} is not None",
    "is_meta": "ctx.is_meta",
    "expected": "ctx.expected_session",
    "success": "status.is_success",
    "contract": "_ARTIFACTS",
    "state": "probe({artifacts[].path}) if probe is not None else None",
}


# BEGIN the quiet check, generated by ``rules.quiet_source`` from the conditions above: do not
# edit. ``tests/rules/test_quiet.py`` fails when it is not what the conditions give, and
# rewrites it with POSTFLIGHTD_UPDATE_CORE_SCHEMA=1.
def _quiet(
    doc: dict[str, Any],
    status: Status,
    ctx: TaskContext,
    now: datetime,
    probe: ArtifactProbe | None,
) -> datetime | Literal[False] | None:
    """For a clean document (``rules.clean``): when the run started (None: not said) if no
    rule's condition holds, else False.

    Most files of a scan are clean and get no finding at all. Said of a clean document, whose
    every value is of its type and no text blank, each rule's condition
    (``rules.conditions``) comes down to a comparison or two, asked here in one pass without
    building a finding; a document any of them holds for gets False and goes through the
    rules, which word what they find. Written by ``rules.quiet_source`` from the conditions.
    """
    status_in_progress = Status.IN_PROGRESS
    status_implemented = Status.IMPLEMENTED
    started_at = doc.get("started_at")
    if status is status_in_progress and started_at is None:  # PF300
        return False
    started = parse_timestamp(started_at) if started_at is not None else None
    if started_at is not None and (started is None or started - now > FUTURE_TOLERANCE):  # PF301
        return False
    partial_progress = doc.get("partial_progress")
    if (
        status is status_in_progress or status is Status.PARTIAL
    ) and partial_progress is None:  # PF302
        return False
    completion_data = doc.get("completion_data")
    given = completion_data is not None
    if status is status_implemented and (not given):  # PF303
        return False
    is_meta = ctx.is_meta
    if (
        status is status_implemented
        and is_meta is True
        and (completion_data is not None)
        and (
            not (
                (
                    completion_data.get("claudemd_suggestions")
                    if completion_data is not None
                    else None
                )
                or ""
            ).strip()
        )
    ):  # PF305
        return False
    if (
        completion_data is not None and is_meta is True and ("roadmap_items" in completion_data)
    ):  # PF306
        return False
    if (
        completion_data is not None
        and is_meta is False
        and ("claudemd_suggestions" in completion_data)
    ):  # PF306
        return False
    errors = doc.get("errors")
    if status in TROUBLE_STATUSES and (not errors):  # PF307
        return False
    success = status.is_success
    if success and partial_progress is not None:  # PF308
        return False
    if status is not status_implemented and given:  # PF309
        return False
    if partial_progress is not None:
        partial_progress_phases_completed = partial_progress.get("phases_completed")
        partial_progress_phases_total = partial_progress.get("phases_total")
        if partial_progress_phases_completed is not None and (
            partial_progress_phases_completed < 0
            or (
                partial_progress_phases_total is not None
                and partial_progress_phases_completed > partial_progress_phases_total
            )
        ):  # PF310
            return False
    metadata = doc["metadata"]
    metadata_phases_completed = metadata.get("phases_completed")
    metadata_phases_total = metadata.get("phases_total")
    if metadata_phases_completed is not None and (
        metadata_phases_completed < 0
        or (metadata_phases_total is not None and metadata_phases_completed > metadata_phases_total)
    ):  # PF310
        return False
    metadata_session_id = metadata["session_id"]
    if not SESSION_RE.fullmatch(metadata_session_id):  # PF400
        return False
    metadata_delegation_depth = metadata["delegation_depth"]
    if not 0 <= metadata_delegation_depth <= MAX_DELEGATION_DEPTH:  # PF401
        return False
    metadata_delegation_path = metadata["delegation_path"]
    if len(set(metadata_delegation_path)) != len(metadata_delegation_path):  # PF402
        return False
    if (
        len(metadata_delegation_path) >= 2
        and metadata_delegation_depth != len(metadata_delegation_path) - 2
    ):  # PF403
        return False
    if metadata_delegation_path and metadata_delegation_path[-1] != metadata["agent_type"]:  # PF404
        return False
    expected = ctx.expected_session
    if expected is not None and metadata_session_id != expected[0]:  # PF405
        return False
    metadata_duration_seconds = metadata.get("duration_seconds")
    if metadata_duration_seconds is not None and metadata_duration_seconds < 0:  # PF406
        return False
    artifacts = doc["artifacts"]
    contract = _ARTIFACTS
    if success and (not artifacts) and (contract.phantom is not None):  # PF500
        return False
    if ctx.state_known and ctx.number is not None and (ctx.task is None):  # PF600
        return False
    if (
        ctx.state_known
        and ctx.number is not None
        and (ctx.task is not None)
        and isinstance((project_name := ctx.task.get("project_name")), str)
        and (ctx.slug is not None)
        and (project_name != ctx.slug)
    ):  # PF601
        return False
    if ctx.marker_findings:  # PF605
        return False
    artifacts_path_before: set[object] = set()
    for item in artifacts:
        if item["type"] not in contract.types:  # PF204
            return False
        artifacts_path = item["path"]
        if artifacts_path in artifacts_path_before:  # PF504
            return False
        if contract.path_problem(artifacts_path) is not None:  # PF501
            return False
        state = probe(artifacts_path) if probe is not None else None
        if state is not None and state is not ArtifactState.OK:  # PF501-PF503
            return False
        artifacts_path_before.add(artifacts_path)
    return started


# END the quiet check.


# --- an unknown status, and the order of the findings ------------------------------------------


def _judged(raw: object, operation: str | None) -> Status | None:
    """What the rules that ask which status a file has take an unknown status for: the one
    its PF202 or PF203 finding suggests (``done`` on a research run: researched), else None,
    which those rules read as a success status where they only ask success or not (the
    artifacts: a missing file is an error), and skip where they need the very status (PF300,
    PF302-PF305, PF307-PF309): no finding is made up from a status nobody wrote."""
    if not isinstance(raw, str):
        return None
    if raw.strip().lower() == "completed":
        return _SUCCESS_BY_OPERATION.get(operation or "")
    return suggest_status(raw, operation)


def _shown_status(raw: object) -> str:
    """An unknown status, as a message names it."""
    return repr(clip(raw)) if isinstance(raw, str) else "unknown"


def _rank(doc: dict[str, Any], location: str) -> tuple[int, ...]:
    """Where ``location`` lies in ``doc``, as the index of each key (in the file's order, which
    the parsed object keeps) and item on the way to it. A location that is not there ranks
    as the nearest value holding it, where its finding's line is: before what that holds."""
    rank: list[int] = []
    value: Any = doc
    for key, index in _LOCATION_PART.findall(location):
        if key and isinstance(value, dict) and key in value:
            rank.append(list(value).index(key))
            value = value[key]
        elif index and isinstance(value, list) and int(index) < len(value):
            rank.append(int(index))
            value = value[int(index)]
        else:
            break
    return tuple(rank)


#: A key (``metadata``, ``.session_id``) or an item (``[2]``) of a location.
_LOCATION_PART: Final = re.compile(r"\.?([^.\[\]]+)|\[(\d+)\]")


def in_file_order(doc: dict[str, Any], findings: list[Finding]) -> list[Finding]:
    """``findings`` of one step in the order of their place in the file (the file as a whole
    first); findings at one place keep the order their rules gave them."""
    if len(findings) < 2:
        return findings
    return sorted(findings, key=lambda f: _rank(doc, f.location))


# --- entry point ----------------------------------------------------------------------------


def validate(
    doc: object,
    ctx: TaskContext,
    now: datetime,
    options: RuleOptions,
    probe: ArtifactProbe | None = None,
) -> Validation:
    """Every finding of the metadata file's rules (PF103-PF602) for one parsed document."""
    if not isinstance(doc, dict):
        return Validation(
            [
                not_an_object(
                    doc,
                    "the file",
                    'write one object {"status": ..., "artifacts": [...], "metadata": {...}}',
                )
            ]
        )
    # A clean document (``rules.clean``) gets nothing from the model's type check or the
    # blank and asked-for fields, nor from the unknown fields when it has none: those passes
    # are skipped, the rest run. The model, when wanted, is still built through ``structure``,
    # which turns any refusal into findings rather than an exception.
    clean = is_clean(doc)
    if clean and not options.model:
        # Clean, and most often nothing for the rules to say: then no finding is built.
        status = _STATUS_BY_VALUE[doc["status"]]
        meta = doc["metadata"]
        operation = operation_of(meta["delegation_path"], meta["agent_type"], ctx.marker_operation)
        timeout_s = timeout_for(operation, options.timeouts)
        at = _quiet(doc, status, ctx, now, probe if options.check_artifacts else None)
        if (
            at is not False
            and _stuck(status, at, operation, timeout_s, now) is None
            and _leftover(status, ctx, operation, timeout_s, now) is None  # PF607
        ):
            return Validation([], None, status, operation, at, timeout_s)
    return _validate_all(doc, ctx, now, options, probe, clean)


def _validate_all(
    doc: dict[str, Any],
    ctx: TaskContext,
    now: datetime,
    options: RuleOptions,
    probe: ArtifactProbe | None,
    clean: bool,
) -> Validation:
    """Every rule, each wording what it finds (``validate`` without the quiet shortcut)."""
    meta = get_object(doc, "metadata") or {}
    operation = operation_of(
        meta.get("delegation_path"), meta.get("agent_type"), ctx.marker_operation
    )
    timeout_s = timeout_for(operation, options.timeouts)
    raw_status = doc.get("status")
    status = _STATUS_BY_VALUE.get(raw_status) if isinstance(raw_status, str) else None
    quick = clean or is_clean_but_for_extras(doc)

    def on_status(value: str) -> Finding:
        return _status_finding(value, operation)

    model: MetadataFile | None = None
    if options.model and clean:
        # Of the models' shape exactly: its typed value needs no validator (``rules.typed``).
        fields: list[Finding] = []
        model = typed_value(doc)
    elif options.model:
        fields, model = structure(
            _type_check(), doc, "the document", quote_hint=True, on_status=on_status
        )
    elif quick:
        fields = []
    else:
        fields, _ = structure(
            _type_check(), doc, "the document", quote_hint=True, on_status=on_status
        )
    if not quick:
        fields.extend(_schema_fields(doc))
    # Every step runs whatever the status is: a bad status does not hide the other findings.
    # A rule that asks which status it is judges an unknown one as ``_judged`` says.
    judged = status if status is not None else _judged(raw_status, operation)
    start = _run_start(doc, judged, now)
    run = [*start.findings, *_status_rules(doc, judged, ctx)]
    session = [*session_rules(doc.get("metadata"), ctx.expected_session), *ctx.marker_findings]
    artifacts = list(
        artifact_rules(
            doc,
            status.value if status is not None else _shown_status(raw_status),
            judged is None or judged.is_success,
            _ARTIFACTS,
            probe if options.check_artifacts else None,
            f"{ctx.specs_dir}/{ctx.dir_name}",
        )
    )
    project = list(_task_rules(ctx))
    # Stuck is said of a file that is in_progress, never of one judged so.
    at = start.at if status is not None else None
    stuck = _stuck(status, at, operation, timeout_s, now)
    if stuck is not None:
        project.append(stuck)
    leftover = _leftover(status, ctx, operation, timeout_s, now)
    if leftover is not None:
        project.append(leftover)
    unknown = [] if clean else list(unknown_fields(doc, _KNOWN_IN_ORDER, "kept as is"))
    out = [
        f
        for step in (fields, run, session, artifacts, project, unknown)
        for f in in_file_order(doc, step)
    ]
    return Validation(
        out, model, status, operation, at, timeout_s, stuck is not None, leftover is not None
    )
