"""What the two rule sets share: the metadata file's (``rules.metadata``) and check-return's
(``rules.console_return``).

Accessors that never raise, pydantic errors turned into findings (PF200/PF201), the
unknown-field (PF205), blank (PF206) and asked-field (PF207) checks over a table of object
kinds, status near-miss guessing (PF202), the session and delegation rules (PF4xx), the
root-escape check and the artifact rules (PF5xx). Where the two contracts differ (field
tables, allowed types, the wording of advice) the caller passes its table or its words; each
check is written once. Everything here is pure and never raises on any JSON value.

A *kind* names objects in a document the way ``models.terms.KNOWN_FIELDS`` does: ``""`` is the
document itself, ``"metadata"`` the object under that key, ``"artifacts[]"`` each object in
that list.

Why this module stays whole at a little over 500 lines: the session and artifact rules each
sit beside the conditions they declare (``rules.conditions``), which the quiet check is
written from; the accessors and the finding builders they use are here with them, shared by
both rule sets. Split, a rule and its condition would still have to stay together.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeGuard, TypeVar

from postflightd.inert import clip
from postflightd.models.terms import MAX_DELEGATION_DEPTH
from postflightd.rules.conditions import condition
from postflightd.rules.findings import Finding, Severity, finding
from postflightd.rules.probe import ArtifactProbe, ArtifactState
from postflightd.words import counted

# --- accessors that never raise -------------------------------------------------------------


def get_object(doc: Any, key: str) -> dict[str, Any] | None:
    value = doc.get(key) if isinstance(doc, dict) else None
    return value if isinstance(value, dict) else None


def get_list(doc: Any, key: str) -> list[Any] | None:
    value = doc.get(key) if isinstance(doc, dict) else None
    return value if isinstance(value, list) else None


def get_str(doc: Any, key: str) -> str | None:
    value = doc.get(key) if isinstance(doc, dict) else None
    return value if isinstance(value, str) else None


def get_int(doc: Any, key: str) -> int | None:
    value = doc.get(key) if isinstance(doc, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def get_number(doc: Any, key: str) -> float | None:
    value = doc.get(key) if isinstance(doc, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def is_blank(value: object) -> bool:
    return isinstance(value, str) and not value.strip()


def json_type(value: object) -> str:
    """The JSON name of a Python value's type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def location(loc: Sequence[str | int]) -> str:
    """('artifacts', 1, 'path') -> 'artifacts[1].path'."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


def objects_of(doc: dict[str, Any], kind: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(location, object) for each object ``kind`` names in ``doc``; non-objects are skipped."""
    if kind == "":
        yield "", doc
    elif kind.endswith("[]"):
        key = kind[:-2]
        for i, item in enumerate(get_list(doc, key) or []):
            if isinstance(item, dict):
                yield f"{key}[{i}]", item
    else:
        obj = get_object(doc, kind)
        if obj is not None:
            yield kind, obj


def _field(loc: str, key: str) -> str:
    return f"{loc}.{key}" if loc else key


# --- structure (PF103, PF200, PF201) --------------------------------------------------------


def not_an_object(doc: object, holder: str, advice: str) -> Finding:
    """PF103: ``{holder} holds an array, not a JSON object: {advice}``."""
    return finding("PF103", "", f"{holder} holds {json_type(doc)}, not a JSON object: {advice}")


#: pydantic error type -> what the field must be, for PF201 messages.
EXPECTED: Final = {
    "string_type": "a string",
    "int_type": "an integer",
    "int_from_float": "an integer",
    "int_parsing": "an integer",
    "float_type": "a number",
    "bool_type": "true or false",
    "list_type": "an array",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
}
_UNQUOTED: Final = frozenset({"an integer", "a number", "true or false"})

_Model = TypeVar("_Model")


def structure(
    validate: Callable[[Any], _Model],
    doc: dict[str, Any],
    whole: str,
    *,
    quote_hint: bool = False,
    on_status: Callable[[str], Finding] | None = None,
) -> tuple[list[Finding], _Model | None]:
    """What ``validate`` (a model's ``model_validate``, or a pydantic-core validator's
    ``validate_python``) makes of ``doc``, or every PF200 (missing) then every PF201 (wrong
    type) finding from the errors it raises.

    The missing fields first, as an orchestrator checks a return: a field that is absent
    is the more basic fault. ``whole`` names the document in a message
    that has no location; ``quote_hint`` adds "(write 5 without quotes)" to a number or
    boolean given as a string; ``on_status`` words the finding for a ``status`` string the
    model refuses (an enum the string is not one of).
    """
    from pydantic_core import ValidationError  # pydantic's own, which it re-exports

    try:
        return [], validate(doc)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
    missing: list[Finding] = []
    wrong: list[Finding] = []
    for err in errors:
        loc = location(err["loc"])
        kind = err["type"]
        value = err.get("input")
        if kind == "missing":
            missing.append(finding("PF200", loc, f"missing required field {clip(loc)!r}: add it"))
        elif on_status is not None and loc == "status" and isinstance(value, str):
            wrong.append(on_status(value))
        else:
            expected = EXPECTED.get(kind)
            if expected is None:
                msg = f"{clip(loc) or whole}: {err['msg']}"
            else:
                msg = f"{clip(loc)} must be {expected}, not {json_type(value)}"
                if quote_hint and isinstance(value, str) and expected in _UNQUOTED:
                    msg += f" (write {clip(value.strip())} without quotes)"
            wrong.append(finding("PF201", loc, msg))
    return missing + wrong, None


# --- fields (PF205, PF206, PF207) -----------------------------------------------------------


def unknown_fields(
    doc: dict[str, Any], known: Mapping[str, frozenset[str]], kept: str
) -> Iterator[Finding]:
    """PF205 for each key that ``known`` (kind -> field names) does not list, kinds in order.

    ``kept`` says what happens to the field: ``"kept as is"``.
    """
    for kind, names in known.items():
        for loc, obj in objects_of(doc, kind):
            if obj.keys() <= names:
                continue  # the usual case, judged in one set comparison
            for key in obj:
                if key not in names:
                    # What a file meant, imported by a finding that says it (a clean file,
                    # most of them, has none): here and in each rule below that gives a fix.
                    from postflightd.rules.fixes import misspelt_field

                    where = _field(loc, key)
                    message, fix = (
                        f"unknown field {clip(where)!r} ({kept})",
                        misspelt_field(key, obj[key], names),
                    )
                    yield finding("PF205", where, message, fix=fix)


def blank_fields(doc: dict[str, Any], needed: Sequence[tuple[str, str]]) -> Iterator[Finding]:
    """PF206 for each needed (kind, key) text field given blank."""
    for kind, key in needed:
        for loc, obj in objects_of(doc, kind):
            if is_blank(obj.get(key)):
                where = _field(loc, key)
                yield finding("PF206", where, f"{where} is blank: fill it in")


def asked_fields(
    obj: dict[str, Any],
    keys: Sequence[str],
    loc: str,
    missing: str,
    blank: str | None = None,
) -> Iterator[Finding]:
    """PF207 for each key of ``obj`` that the contract asks for and that is missing.

    ``missing`` and ``blank`` are the advice after "is missing; " and "is blank; "; without
    ``blank``, blank text is not reported here.
    """
    for key in keys:
        value = obj.get(key)
        if value is None:
            where = _field(loc, key)
            yield finding("PF207", where, f"{where} is missing; {missing}")
        elif blank is not None and is_blank(value):
            where = _field(loc, key)
            yield finding("PF207", where, f"{where} is blank; {blank}")


# --- status (PF202) -------------------------------------------------------------------------


def status_finding(
    raw: str, loc: str, statuses: Sequence[str], guess: str | None, note: str = ""
) -> Finding:
    """PF202: ``raw`` is not one of ``statuses``; ``note`` follows the list, then the guess."""
    from postflightd.rules.fixes import member

    hint = f'; did you mean "{guess}"?' if guess else ""
    fix = member(loc.rsplit(".", 1)[-1], guess) if guess else None
    message = f"{loc} {clip(raw)!r} is not one of {', '.join(statuses)}{note}{hint}"
    return finding("PF202", loc, message, fix=fix)


# --- session and delegation (PF4xx) ---------------------------------------------------------

SESSION_RE: Final = re.compile(r"sess_\d+_[a-z0-9]{6}")


def _session_message(sid: str, expected: str, source: str) -> str:
    if source == "state.json":
        # The usual cause is not a foreign agent but a pre-flight that did not record the run.
        return (
            f"session_id {clip(sid)!r} is not {clip(expected)!r}, the session state.json "
            "records for this task: state.json's session is the one the task was last "
            "delegated with, so a run "
            "whose pre-flight did not record its session (no .postflight-pending marker, "
            "state.json not updated) looks foreign; return the session_id you were given, or "
            "have the workflow write the marker before delegating"
        )
    return (
        f"session_id {clip(sid)!r} is not the delegated session {clip(expected)!r} "
        f"(from {source}): return the session_id you were given"
    )


@condition("PF400", sid="metadata.session_id")
def session_misformed(sid: str | None) -> TypeGuard[str]:
    return bool(sid and not SESSION_RE.fullmatch(sid))


@condition("PF405", sid="metadata.session_id")
def session_not_expected(sid: str | None, expected: tuple[str, str] | None) -> TypeGuard[str]:
    return bool(sid and expected is not None and sid != expected[0])


@condition("PF401", depth="metadata.delegation_depth")
def too_deep(depth: int | None) -> bool:
    return depth is not None and not 0 <= depth <= MAX_DELEGATION_DEPTH


@condition("PF402", names="metadata.delegation_path")
def names_repeat(names: list[str]) -> bool:
    return len(set(names)) != len(names)


@condition("PF403", path="metadata.delegation_path", depth="metadata.delegation_depth")
def depth_against_path(path: list[Any] | None, depth: int | None) -> TypeGuard[list[Any]]:
    return path is not None and depth is not None and len(path) >= 2 and depth != len(path) - 2


@condition("PF404", agent="metadata.agent_type", names="metadata.delegation_path")
def agent_not_last(agent: str | None, names: list[str]) -> TypeGuard[str]:
    return bool(agent and names and names[-1] != agent)


@condition("PF406", duration="metadata.duration_seconds")
def negative_duration(duration: float | None) -> bool:
    return duration is not None and duration < 0


def session_rules(meta: object, expected: tuple[str, str] | None) -> Iterator[Finding]:
    """PF400-PF406 for a ``metadata`` object; ``expected`` is (session, where it came from)."""
    if not isinstance(meta, dict):
        return
    sid = get_str(meta, "session_id")
    if session_misformed(sid):
        yield finding(
            "PF400",
            "metadata.session_id",
            f"session_id {clip(sid)!r} is not of the form sess_{{unix seconds}}_{{6 lower-case "
            "letters or digits}, e.g. sess_1736700000_abc123",
        )
    if session_not_expected(sid, expected) and expected is not None:  # (for the type checker)
        from postflightd.rules.fixes import member

        fix = member("session_id", expected[0])
        yield finding("PF405", "metadata.session_id", _session_message(sid, *expected), fix=fix)
    depth = get_int(meta, "delegation_depth")
    if too_deep(depth):
        yield finding(
            "PF401",
            "metadata.delegation_depth",
            f"delegation_depth {depth} is outside 0..{MAX_DELEGATION_DEPTH}: the delegation "
            "chain is too deep; return to the caller instead of delegating further",
        )
    path = get_list(meta, "delegation_path")
    names = [p for p in path or [] if isinstance(p, str)]
    if names_repeat(names):
        twice = next(name for i, name in enumerate(names) if name in names[:i])
        yield finding(
            "PF402",
            "metadata.delegation_path",
            f"delegation_path names {clip(twice)!r} twice: a delegation cycle",
        )
    if depth_against_path(path, depth):
        yield finding(
            "PF403",
            "metadata.delegation_depth",
            f"delegation_depth {depth} does not match delegation_path "
            f"({counted(len(path), 'entry')} means depth {len(path) - 2})",
        )
    agent = get_str(meta, "agent_type")
    if agent_not_last(agent, names):
        yield finding(
            "PF404",
            "metadata.agent_type",
            f"agent_type {clip(agent)!r} is not the last entry of delegation_path "
            f"({clip(names[-1])!r})",
        )
    if negative_duration(get_number(meta, "duration_seconds")):
        yield finding(
            "PF406",
            "metadata.duration_seconds",
            "duration_seconds is negative: give the run's length in seconds",
        )


# --- artifacts (PF5xx) ----------------------------------------------------------------------

_DRIVE_RE: Final = re.compile(r"[A-Za-z]:[\\/]")
_SEPARATORS_RE: Final = re.compile(r"[\\/]+")


def outside_root(path: str, *, absolute_allowed: bool) -> bool:
    """Whether ``path``, read as text, leaves the project root: ``~``, or ``..`` climbing out.

    An absolute path (``/``, ``\\``, a drive letter) is outside too, unless
    ``absolute_allowed``: then it is the probe's to judge (the console return's own
    workflow checks absolute paths with ``[ -f "$path" ]``).
    """
    if absolute_allowed and Path(path).is_absolute():
        return False
    if path.startswith("~"):
        return True
    if not absolute_allowed and (path.startswith(("/", "\\")) or _DRIVE_RE.match(path)):
        return True
    if ".." not in path:
        return False  # nothing climbs: the usual case, without splitting the path
    depth = 0
    for part in _SEPARATORS_RE.split(path):
        if part == "..":
            depth -= 1
            if depth < 0:
                return True
        elif part not in {"", "."}:
            depth += 1
    return False


def _no_note(kind: str) -> str:
    return ""


@dataclass(frozen=True, slots=True)
class ArtifactContract:
    """Where one contract's artifact rules differ from the other's."""

    #: the artifact types the contract lists (PF204 for any other).
    types: Sequence[str]
    #: the whole PF501 message for a path unusable as written (judged before the disk), or None.
    path_problem: Callable[[str], str | None]
    #: ends the PF500 advice "..., or {phantom} partial/failed"; None: no PF500 in this contract.
    phantom: str | None
    #: why a probe found the path outside the root, after "resolves outside the project root".
    outside: str
    #: the PF502 advice before ", or fix the path".
    write_it: str
    #: what PF204 adds after the list of types, given the type found.
    type_note: Callable[[str], str] = _no_note
    #: PF208 for an artifact given as a plain path string at a location; None: such an item
    #: is skipped (the structure rules already refuse it).
    plain_path: Callable[[str, str], Finding] | None = None


@condition("PF208", never_clean="a clean document's artifacts are objects, never plain paths")
def plain_path(art: object) -> TypeGuard[str]:
    return isinstance(art, str)


@condition("PF500", artifacts="artifacts")
def phantom(success: bool, artifacts: list[Any], contract: ArtifactContract) -> bool:
    return success and not artifacts and contract.phantom is not None


@condition("PF204", kind="artifacts[].type")
def unknown_type(kind: str | None, contract: ArtifactContract) -> TypeGuard[str]:
    return kind is not None and kind not in contract.types


@condition("PF504", path="artifacts[].path", seen="artifacts[<].path")
def listed_twice(path: str, seen: AbstractSet[str]) -> bool:
    return path in seen


@condition("PF501", path="artifacts[].path")
def path_unsafe(path: str, contract: ArtifactContract) -> bool:
    return contract.path_problem(path) is not None


@condition("PF501-PF503")
def not_on_disk(state: ArtifactState | None) -> bool:
    return state is not None and state is not ArtifactState.OK


def artifact_rules(
    doc: dict[str, Any],
    status: str,
    success: bool,
    contract: ArtifactContract,
    probe: ArtifactProbe | None,
    task_dir: str | None = None,
) -> Iterator[Finding]:
    """PF500-PF504 (and PF204, PF208) for ``doc``'s artifacts; the disk is asked only through
    ``probe`` (None: not at all). A missing or empty artifact is an error on a success status
    and a warning otherwise, where an unfinished run may list files not written yet. PF501's
    fix puts the file in ``task_dir`` (this task's directory: ``specs/949_x``)."""
    artifacts = get_list(doc, "artifacts")
    if artifacts is None:
        return
    if phantom(success, artifacts, contract):
        yield finding(
            "PF500",
            "artifacts",
            f"status {status} with no artifacts: a phantom operation; list the files "
            f"the run created, or {contract.phantom} partial/failed",
        )
    disk_severity = Severity.ERROR if success else Severity.WARNING
    seen: set[str] = set()
    for i, art in enumerate(artifacts):
        loc = f"artifacts[{i}]"
        if contract.plain_path is not None and plain_path(art):
            yield contract.plain_path(loc, art)
            path: str | None = art
        elif isinstance(art, dict):
            kind = get_str(art, "type")
            if unknown_type(kind, contract):
                yield finding(
                    "PF204",
                    f"{loc}.type",
                    f"artifact type {clip(kind)!r} is not one of {', '.join(contract.types)}"
                    + contract.type_note(kind),
                )
            path = get_str(art, "path")
            loc = f"{loc}.path"
        else:
            continue
        if not path or not path.strip():
            continue
        if listed_twice(path, seen):
            yield finding("PF504", loc, f"artifact {clip(path)!r} is listed twice")
        seen.add(path)
        if path_unsafe(path, contract):
            from postflightd.rules.fixes import fix_path

            problem = contract.path_problem(path) or ""
            yield finding("PF501", loc, problem, fix=fix_path(path, art, task_dir, contract))
            continue
        state = None if probe is None else probe(path)
        if not not_on_disk(state):
            continue
        if state is ArtifactState.OUTSIDE:
            from postflightd.rules.fixes import fix_path

            yield finding(
                "PF501",
                loc,
                f"artifact path {clip(path)!r} resolves outside the project root "
                f"{contract.outside}",
                fix=fix_path(path, art, task_dir, contract),
            )
        elif state is ArtifactState.MISSING:
            yield finding(
                "PF502",
                loc,
                f"artifact {clip(path)!r} does not exist: {contract.write_it}, or fix the path "
                "(relative to the project root)",
                disk_severity,
            )
        elif state is ArtifactState.NOT_A_FILE:
            yield finding(
                "PF502", loc, f"artifact {clip(path)!r} is not a regular file", disk_severity
            )
        elif state is ArtifactState.EMPTY:
            yield finding(
                "PF503", loc, f"artifact {clip(path)!r} is empty: write its content", disk_severity
            )
        elif state is ArtifactState.UNNAMEABLE:
            yield finding(
                "PF501",
                loc,
                f"artifact path {clip(path)!r} cannot name a file: it holds a character the "
                "system cannot encode (a lone surrogate); write the character itself (both "
                "halves of a pair), or name the file plainly",
            )
