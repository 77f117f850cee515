"""What the stop hook decides, whichever runtime asked: the part that is not protocol.

A runtime's module (``claude``, ``codex``, ``gemini``, ``copilot``, ``cursor``, ``opencode``)
turns its stdin into a StopRequest: where the project is, whether its loop guard lets the
agent be sent back, and how to tell the agent's own files (``hooks.ownership``). ``answer``
post-flights the project's final files and returns a Verdict: what the agent must repair
(``reason``, only its own files) and what the person is told (``message``: a configuration or
lock problem, state.json, other runs' invalid files once). The runtime's module renders the
Verdict in its protocol (a Runtime); ``commands.hook.run_hook`` prints it.

Most stops find no metadata file, and the hook runs at every one: the pipeline's results,
check and apply (the metadata models, the rules, the postflight) are imported only where a
report exists, not at the top.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

from postflightd.config import Config, policy_from
from postflightd.fs.locks import LockTimeoutError
from postflightd.inert import inert
from postflightd.pipeline.cleanup import clean_litter
from postflightd.project.metafiles import MetaFileRef, find_metadata_files
from postflightd.project.root import Project, foreign_owner
from postflightd.runs.lifecycle import operation_of, timeout_for
from postflightd.words import counted

if TYPE_CHECKING:
    from postflightd.hooks.ownership import Ownership
    from postflightd.journal.database import Journal
    from postflightd.pipeline.results import FileReport
    from postflightd.rules.findings import Finding

#: Findings listed in a block reason, per file; the agent needs the first few, not a wall.
MAX_REASONS_PER_FILE: Final = 8
#: How long the hook waits for the project lock: a commit takes milliseconds, so a lock held
#: longer belongs to something stuck; the runtime (and the person) must not wait 30 s for it.
HOOK_LOCK_WAIT_S: Final = 3.0
#: The longest the hook waits for a just-written metadata file to settle.
MAX_SETTLE_WAIT_S: Final = 1.0
#: Other runs' invalid files named in the person's message; the rest are counted.
MAX_OTHERS_NAMED: Final = 3

#: The rule telling the agent's own files, given the operation's timeout and the time now.
Whose = Callable[[float, float], "Ownership"]


@dataclass(frozen=True, slots=True)
class StopRequest:
    """One stop, whatever the runtime: what ``answer`` needs."""

    #: where to look for the project, in order (``project_starts``: the runtime's project
    #: directory or workspace roots, the agent's cwd only within them)
    starts: tuple[Path, ...]
    #: False when the runtime's loop guard says the agent was already sent back
    may_block: bool
    #: the rule telling the agent's own files
    whose: Whose
    #: the subagent's type, whose words choose the operation's timeout
    agent_type: str | None = None
    #: the stop's own name, where the runtime may run the hook twice for one stop
    #: (``hooks.once``): the second run answers nothing
    stop: str | None = None
    #: the runtime's session (or conversation) id: postflightd's own bound counts per
    #: session and file (``hooks.bound``); None counts per file alone
    session: str | None = None


def project_starts(cwd: Path | None, project_dirs: Sequence[Path]) -> tuple[Path, ...]:
    """Where to look for the project that stopped (``StopRequest.starts``): the runtime's own
    project directories, and the agent's ``cwd`` first when it is inside one of them (a project
    within the runtime's). Where the runtime names none, the ``cwd``. An agent that ran ``cd``
    into another project never makes that project's files this run's."""
    if not project_dirs:
        return (cwd,) if cwd is not None else ()
    if cwd is not None and any(_inside(cwd, d) for d in project_dirs):
        return (cwd, *project_dirs)
    return tuple(project_dirs)


def _inside(path: Path, directory: Path) -> bool:
    return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(directory))


@dataclass(frozen=True, slots=True)
class Verdict:
    """The decision, before a runtime's protocol renders it."""

    #: what the agent must repair before stopping; None lets it stop
    reason: str | None = None
    #: one line for the person (``postflightd: ...``), never for the agent
    message: str | None = None


@dataclass(frozen=True, slots=True)
class Runtime:
    """A runtime's protocol: its stdin parsed, the Verdict rendered, its exit codes."""

    name: str
    parse: Callable[[Mapping[str, Any], Mapping[str, str]], StopRequest]
    render: Callable[[Verdict], dict[str, Any]]
    #: the exit code of malformed stdin: a non-blocking error in that runtime
    malformed_exit: int = 1
    #: where the person's message goes: in the answer, on stderr (the runtime's answer has
    #: no field for it), or both (the field is not known to reach the person everywhere)
    person: Literal["answer", "stderr", "both"] = "answer"


def decision_answer(verdict: Verdict, word: str = "block") -> dict[str, Any]:
    """The answer in Claude Code's shape, which most runtimes share: ``{}``, ``{"decision":
    word, "reason": ...}`` to send the agent on, and ``systemMessage`` for the person."""
    out: dict[str, Any] = {}
    if verdict.reason is not None:
        out.update(decision=word, reason=verdict.reason)
    if verdict.message is not None:
        out["systemMessage"] = verdict.message
    return out


def message_of(problems: Sequence[str]) -> str:
    """The person's message: one line."""
    return "postflightd: " + "; ".join(inert(p) for p in problems)


def find_root(start: Path, specs_dir: str) -> Path | None:
    """The nearest directory at or above ``start`` that holds the specs directory."""
    try:
        here = start.resolve()
    except (OSError, RuntimeError):
        return None
    for candidate in (here, *here.parents):
        if (candidate / specs_dir).is_dir():
            return candidate
    return None


def _young(refs: Iterable[MetaFileRef], settle_s: float) -> set[Path]:
    """The files modified less than ``settle_s`` ago: another agent may still be writing them."""
    now = time.time()
    out: set[Path] = set()
    for ref in refs:
        try:
            age = now - os.lstat(ref.path).st_mtime
        except OSError:
            continue
        # A negative age is a clock skew or a planted future date, not a write in progress.
        if 0 <= age < settle_s:
            out.add(ref.path)
    return out


def settled_split(
    refs: Sequence[MetaFileRef], settle_s: float
) -> tuple[list[MetaFileRef], list[MetaFileRef]]:
    """(settled, still being written): waits once, briefly, for just-written files to settle.

    The agent that is stopping wrote its own file a moment ago; a short wait lets the hook
    still block on it when it is wrong, while a file that keeps changing is never blocked on.
    """
    young = _young(refs, settle_s)
    if young and settle_s > 0:
        time.sleep(min(settle_s, MAX_SETTLE_WAIT_S))
        young = _young([r for r in refs if r.path in young], settle_s)
    return [r for r in refs if r.path not in young], [r for r in refs if r.path in young]


def _blocking_errors(report: FileReport) -> list[Finding]:
    from postflightd.rules.findings import STATE_UNUSABLE  # with a report only (module docstring)

    # PF604 is about state.json, which the agent must not be told to "fix": a systemMessage.
    return [f for f in report.findings if f.code != STATE_UNUSABLE]


def _to_repair(report: FileReport, skip: set[Path]) -> bool:
    """Invalid (applied or only checked), settled, and with findings an agent can fix."""
    from postflightd.pipeline.results import Outcome  # with a report only (module docstring)

    invalid = report.outcome is Outcome.INVALID or (report.outcome is None and not report.valid)
    return invalid and report.path not in skip and bool(_blocking_errors(report))


def block_reason(
    reports: Sequence[FileReport], may_block: bool, unsettled: Iterable[Path] = ()
) -> str | None:
    """None, or the reason naming each invalid, settled file and exactly what to fix."""
    from postflightd.rules.findings import Severity  # with a report only (module docstring)

    skip = set(unsettled)
    invalid = [r for r in reports if _to_repair(r, skip)]
    if not invalid or not may_block:
        return None
    lines = ["postflightd: metadata to repair before stopping:"]
    for report in invalid:
        lines.append(f"{inert(report.rel_path)}:")
        findings = _blocking_errors(report)
        shown = [f for f in findings if f.severity is Severity.ERROR] or findings
        for f in shown[:MAX_REASONS_PER_FILE]:
            where = f" ({inert(f.location)})" if f.location else ""
            lines.append(f"  - {f.code}{where}: {inert(f.message)}")
        if len(shown) > MAX_REASONS_PER_FILE:
            lines.append(f"  - ... and {len(shown) - MAX_REASONS_PER_FILE} more")
    lines.append(
        "Rewrite the file with these fixed; postflightd applies it when it validates."
        if len(invalid) == 1
        else "Rewrite the files with these fixed; postflightd applies each when it validates."
    )
    return "\n".join(lines)


def _state_problem(reports: Sequence[FileReport]) -> str | None:
    from postflightd.pipeline.results import Outcome  # with a report only (module docstring)
    from postflightd.rules.findings import STATE_UNUSABLE

    kept = [r for r in reports if r.outcome is Outcome.STATE_UNUSABLE]
    if not kept:
        return None
    problem = next(
        (f.message for f in kept[0].findings if f.code == STATE_UNUSABLE), STATE_UNUSABLE
    )
    return f"{counted(len(kept), 'valid metadata file')} not applied and kept: {problem}"


def _incomplete_problem(reports: Sequence[FileReport]) -> str | None:
    """PF606: applied to state.json, but TODO.md or errors.json could not be written. Not the
    agent's to fix, so said to the person; the file is kept and the next run completes it."""
    from postflightd.pipeline.results import Outcome  # with a report only (module docstring)

    kept = [r for r in reports if r.outcome is Outcome.INCOMPLETE]
    if not kept:
        return None
    problem = next((f.message for f in kept[0].findings if f.code == "PF606"), "PF606")
    written = f"{counted(len(kept), 'outcome')} only partly written"
    return f"{written} and kept for the next run: {problem}"


def answer(
    request: StopRequest,
    load_config: Callable[[Path], Config],
    open_journal: Callable[[Config], Journal],
) -> Verdict:
    """Post-flight the final files of the project that stopped: the Verdict.

    The project is the nearest one holding the first of ``request.starts`` that is in one.
    Raises PostflightError for a problem that is not the metadata's (``commands.hook.run_hook``
    turns it into the person's message).
    """
    root: Path | None = None
    for start in request.starts:
        config = load_config(start)
        root = find_root(start, config.specs_dir)
        if root is not None:
            break
    if root is None:
        return Verdict()
    if root != start:
        # The root is above the start (or the start is spelt otherwise): its own
        # configuration, as the root's path names it. At the root itself it was just read.
        config = load_config(root)
    foreign = foreign_owner(root, config)
    if foreign is not None:
        # Nothing done to another user's project (nothing to do, in the runtime's protocol);
        # why, for the record, on stderr.
        print(f"postflightd: {inert(foreign)}", file=sys.stderr)
        return Verdict()
    with Project.open(root, config) as project:
        return _postflight(project, config, request, open_journal)


def _postflight(
    project: Project,
    config: Config,
    request: StopRequest,
    open_journal: Callable[[Config], Journal],
) -> Verdict:
    """``answer`` for the open project: its final files applied (or, with ``[hook] apply =
    false``, only checked), and the runtime's answer: a block over the agent's own invalid
    files, a ``systemMessage`` naming other runs' invalid files once."""
    refs = list(find_metadata_files(project.require_specs()))
    now_s = time.time()
    own: set[Path] = set()
    if refs:  # whose files they are: asked only of files found (it may read transcripts)
        operation = operation_of(None, request.agent_type)
        rule = request.whose(timeout_for(operation, asdict(config.timeouts)), now_s)
        own = {r.path for r in refs if rule.owns(r.task_dir, _mtime(r.path), now_s)}
    settled, young = settled_split(refs, config.watch.settle_ms / 1000)
    problems: list[str] = []
    if config.hook.apply:
        applied = _apply(project, config, settled, young, open_journal, problems)
        if applied is None:
            return Verdict(message=message_of(problems))
        reports = applied
    else:
        # Validator mode: the file stays for the workflow's own stages (and its `process`).
        reports = _check_found(project, config, refs)
    if not reports:
        # No metadata file (most stops): nothing to block on or to tell about one.
        return Verdict(None, message_of(problems) if problems else None)
    for report in reports:
        for note in report.notes:
            # For the record, not for the runtime: stdout holds the answer alone.
            print(f"postflightd: {inert(report.rel_path)}: {inert(note)}", file=sys.stderr)
    state = _state_problem(reports)
    if state is not None:
        problems.append(state)
    incomplete = _incomplete_problem(reports)
    if incomplete is not None:
        problems.append(incomplete)
    unsettled = {r.path for r in young}
    theirs = [r for r in reports if r.path not in own]
    others = _others_problem(project.root, theirs, unsettled)
    if others is not None:
        problems.append(others)
    reason, held = _bounded(project.root, [r for r in reports if r.path in own], request, unsettled)
    if held is not None:
        problems.append(held)
    return Verdict(reason, message_of(problems) if problems else None)


def _bounded(
    root: Path, reports: Sequence[FileReport], request: StopRequest, unsettled: set[Path]
) -> tuple[str | None, str | None]:
    """(the block reason, what the person is told): the agent's own invalid files send it
    back while the runtime's guard allows it and postflightd's bound (``hooks.bound``) is not
    reached; the others are said to the person, who is otherwise never told that the agent
    stopped with its file still invalid."""
    # With a file of the agent's own only (module docstring): most stops have none.
    from postflightd.hooks.bound import MAX_BLOCKS, Blocks, block_key
    from postflightd.hooks.bound import default_path as default_blocks_path

    if not reports:
        return None, None
    blocks = Blocks(default_blocks_path())
    invalid = [r for r in reports if _to_repair(r, set())]
    if not invalid and not blocks.kept:
        # Nothing to send back and no count to clear: no file's key is needed (hashing them
        # loads OpenSSL, a fortieth of a stop that applies the agent's files).
        return None, None
    keys = {r.path: block_key(root, request.session, r.rel_path) for r in reports}
    repair = [r for r in invalid if r.path not in unsettled]
    wanted = [keys[r.path] for r in repair] if request.may_block else []
    # A file that validates starts again at 0; one still being written says nothing yet.
    cleared = [keys[r.path] for r in reports if r not in invalid and r.path not in unsettled]
    granted, problem = blocks.claim(wanted, cleared, MAX_BLOCKS)
    sent = [r for r in repair if keys[r.path] in granted]
    held = [r for r in repair if r not in sent]
    if problem is not None:
        print(f"postflightd: {inert(problem)}", file=sys.stderr)
    told = [_held_line(r, blocks.count(keys[r.path])) for r in held]
    return block_reason(sent, True, unsettled), "; ".join(told) if told else None


def _held_line(report: FileReport, times: int) -> str:
    """The person's line for an own invalid file the agent was let stop with."""
    first = _blocking_errors(report)[0]
    why = f"{first.code}: {first.message}"
    fix = f"repair it, then run `postflightd process {report.rel_path}`"
    if times == 0:
        # The runtime let it stop first: its loop guard after another hook's block, or an
        # agent the person aborted (Cursor's status).
        stopped = "the agent stopped without repairing it"
        return f"{report.rel_path} is invalid ({why}) and {stopped}: {fix}"
    sent = "once" if times == 1 else counted(times, "time")
    return (
        f"{report.rel_path} is still invalid after the agent was sent back {sent} to repair "
        f"it ({why}); it was let stop: {fix}"
    )


def _check_found(project: Project, config: Config, refs: list[MetaFileRef]) -> list[FileReport]:
    """Each file checked, none applied (``[hook] apply = false``)."""
    if not refs:
        return []
    from postflightd.pipeline.check import check_file  # with a file only (module docstring)

    now = datetime.now(UTC)
    policy = policy_from(config)
    return [check_file(project, ref, config, policy, now) for ref in refs]


def _mtime(path: Path) -> float | None:
    try:
        return os.lstat(path).st_mtime
    except OSError:
        return None


def _apply(
    project: Project,
    config: Config,
    settled: list[MetaFileRef],
    young: list[MetaFileRef],
    open_journal: Callable[[Config], Journal],
    problems: list[str],
) -> list[FileReport] | None:
    """Every valid final file applied; None when the project lock stayed busy (said in
    ``problems``: the files are kept for the next run)."""
    reports: list[FileReport] = []
    opened: list[Journal] = []

    def journal() -> Journal:
        # Opened when first needed: most stops have nothing to record.
        if not opened:
            opened.append(open_journal(config))
            if not opened[0].enabled:
                problems.append(
                    f"the journal is unavailable ({opened[0].error}); postflight went on without it"
                )
        return opened[0]

    now = datetime.now(UTC)
    try:
        for note in clean_litter(project, config, journal):
            print(f"postflightd: {inert(note)}", file=sys.stderr)
        if settled or young:
            reports += _apply_found(project, config, settled, young, journal(), now)
    except LockTimeoutError as exc:
        problems.append(f"{exc}; the metadata files are kept for the next run")
        return None
    finally:
        for each in opened:
            each.close()
    return reports


def _apply_found(
    project: Project,
    config: Config,
    settled: list[MetaFileRef],
    young: list[MetaFileRef],
    journal: Journal,
    now: datetime,
) -> list[FileReport]:
    """The settled files applied, then the young ones as the daemon treats a file before it
    settles: one that does not parse yet is left alone, unrecorded; one that validates is
    applied. Raises LockTimeoutError."""
    # with a file only (module docstring): apply_files brings the whole postflight
    from postflightd.pipeline.apply import apply_files

    policy = policy_from(config)
    wait = HOOK_LOCK_WAIT_S
    reports: list[FileReport] = []
    if settled:
        reports += apply_files(project, settled, config, policy, journal, now, lock_timeout_s=wait)
    if young:
        reports += apply_files(
            project, young, config, policy, journal, now, report_unparsed=False, lock_timeout_s=wait
        )
    return reports


def _others_problem(root: Path, reports: Sequence[FileReport], unsettled: set[Path]) -> str | None:
    """Other runs' invalid files, for the person: each content said once, never again (what
    was said is the user's own record, ``hooks.reported``, read only when there is such a
    file)."""
    invalid = [r for r in reports if _to_repair(r, unsettled)]
    if not invalid:
        return None
    from postflightd.hooks.reported import Reported, content_key, default_path

    reported = Reported(default_path())
    fresh: list[tuple[str, FileReport]] = []
    for report in invalid:
        first = _blocking_errors(report)[0]
        key = content_key(root, report.rel_path, report.loaded.raw, first.message)
        if key not in reported:
            fresh.append((key, report))
    if not fresh:
        return None
    reported.remember(key for key, _ in fresh)
    named = []
    for _, report in fresh[:MAX_OTHERS_NAMED]:
        first = _blocking_errors(report)[0]
        named.append(f"{report.rel_path} ({first.code}: {first.message})")
    more = len(fresh) - MAX_OTHERS_NAMED
    tail = f", and {more} more" if more > 0 else ""
    return (
        f"{counted(len(fresh), 'invalid metadata file')} not written by this agent, so not "
        "blocked on (said once; `postflightd scan` lists every invalid file): "
        + ", ".join(named)
        + tail
    )
