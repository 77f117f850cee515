"""Adapter for an agent runtime's Stop/SubagentStop hook (``postflightd hook claude``).

The runtime sends a JSON object on stdin (``cwd``, ``stop_hook_active``, ``agent_type``, ...)
and reads a decision on stdout: ``{}`` lets the agent stop, ``{"decision": "block", "reason":
...}`` sends it back to repair its metadata: only files the agent wrote itself
(``hooks.ownership``); other runs' invalid files are told to the person once, in a
``systemMessage``. The runtime's protocol gives exit codes a meaning
of their own: exit 2 is "block and show stderr to the agent", so the hook never exits
2. A problem that is not the metadata's (configuration, a busy lock, state.json, the journal)
is a ``systemMessage`` for the person, exit 0; malformed stdin is exit 1, one line on stderr.
Stdout holds exactly one JSON object whatever happens (``commands.hook.run_hook`` writes it).
"""

from __future__ import annotations

import json
import os
import re
import select
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from postflightd.config import Config, policy_from
from postflightd.errors import MalformedInputError
from postflightd.fs.locks import LockTimeoutError
from postflightd.hooks.ownership import ownership, transcripts_of
from postflightd.hooks.reported import Reported, content_key
from postflightd.hooks.reported import default_path as default_reported_path
from postflightd.inert import inert
from postflightd.journal.database import Journal
from postflightd.pipeline.apply import apply_files
from postflightd.pipeline.check import check_file
from postflightd.pipeline.cleanup import clean_litter
from postflightd.pipeline.results import FileReport, Outcome
from postflightd.project.metafiles import MetaFileRef, find_metadata_files
from postflightd.project.root import Project
from postflightd.rules.findings import STATE_UNUSABLE, Finding, Severity
from postflightd.runs.lifecycle import operation_of, timeout_for

MAX_HOOK_INPUT: Final = 1024 * 1024
#: Findings listed in a block reason, per file; the agent needs the first few, not a wall.
MAX_REASONS_PER_FILE: Final = 8
#: How long the hook waits for the project lock: a commit takes milliseconds, so a lock held
#: longer belongs to something stuck; the runtime (and the person) must not wait 30 s for it.
HOOK_LOCK_WAIT_S: Final = 3.0
#: How long stdin may stay silent before a complete JSON object has arrived.
STDIN_IDLE_S: Final = 5.0
#: The longest the hook waits for a just-written metadata file to settle.
MAX_SETTLE_WAIT_S: Final = 1.0
#: Other runs' invalid files named in a systemMessage; the rest are counted.
MAX_OTHERS_NAMED: Final = 3
_READ_CHUNK: Final = 64 * 1024
_TOKENS: Final = re.compile(rb'["\\{}]')
_QUOTE, _BACKSLASH, _OPEN = ord('"'), ord("\\"), ord("{")


class HookInputError(MalformedInputError):
    """The hook's stdin is not the runtime's JSON object: a non-blocking error (exit 1)."""


@dataclass(frozen=True, slots=True)
class HookInput:
    cwd: Path
    stop_hook_active: bool
    agent_type: str | None
    event: str | None
    session_id: str | None = None
    transcript_path: str | None = None
    agent_transcript_path: str | None = None


class _ObjectEnd:
    """Where the top-level JSON object on a stream ends, found without parsing it.

    Only quotes, backslashes and braces matter: braces count outside strings, and a backslash
    inside a string hides the byte after it (possibly the first byte of the next chunk).
    """

    def __init__(self) -> None:
        self._depth = 0
        self._in_string = False
        self._escaped = False

    def feed(self, chunk: bytes) -> bool:
        """True once the object that opened first has closed within the bytes fed so far."""
        skip = 1 if self._escaped else 0
        self._escaped = False
        for match in _TOKENS.finditer(chunk):
            at = match.start()
            if at < skip:
                continue
            byte = chunk[at]
            if self._in_string:
                if byte == _BACKSLASH:
                    skip = at + 2
                    self._escaped = skip > len(chunk)
                elif byte == _QUOTE:
                    self._in_string = False
            elif byte == _QUOTE:
                self._in_string = True
            elif byte == _OPEN:
                self._depth += 1
            elif byte != _BACKSLASH:
                self._depth -= 1
                if self._depth == 0:
                    return True
        return False


def read_hook_input(fd: int, limit: int = MAX_HOOK_INPUT, idle_s: float = STDIN_IDLE_S) -> bytes:
    """The hook's JSON object from ``fd``, read no further than needed.

    Reading stops at EOF, as soon as the object is complete (a runtime that leaves stdin open
    must not hang the hook), past ``limit`` bytes (memory stays bounded whatever is piped in),
    or after ``idle_s`` without a byte.
    """
    chunks: list[bytes] = []
    size = 0
    end = _ObjectEnd()
    started = False
    while True:
        try:
            ready, _, _ = select.select([fd], [], [], idle_s)
            if not ready:
                raise HookInputError(
                    f"no complete JSON object on stdin after {idle_s:g} s of silence; "
                    "expected the hook's JSON object"
                )
            chunk = os.read(fd, _READ_CHUNK)
        except (OSError, ValueError) as exc:
            raise HookInputError(f"cannot read stdin: {exc}") from None
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise HookInputError(
                f"hook input on stdin is larger than {limit // 1024} KiB; "
                "expected the hook's JSON object"
            )
        if not started:
            head = b"".join(chunks).lstrip()
            if not head:
                continue
            started = True
            if not head.startswith(b"{"):
                break  # not an object: no need to read the rest to say so
            if end.feed(b"".join(chunks)):
                break
        elif end.feed(chunk):
            break
    return b"".join(chunks)


def parse_hook_input(raw: bytes) -> HookInput:
    """The hook's stdin as a HookInput; malformed input is a HookInputError (exit 1)."""
    if len(raw) > MAX_HOOK_INPUT:
        raise HookInputError(
            "hook input on stdin is larger than 1 MiB; expected the hook's JSON object"
        )
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise HookInputError(
            f"hook input on stdin is not JSON ({exc}); expected the hook's JSON object"
        ) from None
    if not isinstance(doc, dict):
        raise HookInputError('hook input on stdin must be a JSON object with at least "cwd"')
    cwd = doc.get("cwd")
    if not isinstance(cwd, str) or not cwd or "\0" in cwd:
        raise HookInputError('hook input has no "cwd" string: cannot tell which project stopped')
    active = doc.get("stop_hook_active", False)
    if not isinstance(active, bool):
        raise HookInputError('hook input "stop_hook_active" must be true or false')
    return HookInput(
        cwd=Path(cwd),
        stop_hook_active=active,
        agent_type=_text(doc, "agent_type"),
        event=_text(doc, "hook_event_name"),
        session_id=_text(doc, "session_id"),
        transcript_path=_text(doc, "transcript_path"),
        agent_transcript_path=_text(doc, "agent_transcript_path"),
    )


def _text(doc: Mapping[str, Any], key: str) -> str | None:
    """An optional string field; anything else (absent, not a string, empty, with a NUL) is
    None: the runtime's optional fields change between versions, so they are read leniently."""
    value = doc.get(key)
    return value if isinstance(value, str) and value and "\0" not in value else None


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
    # PF604 is about state.json, which the agent must not be told to "fix": a systemMessage.
    return [f for f in report.findings if f.code != STATE_UNUSABLE]


def _to_repair(report: FileReport, skip: set[Path]) -> bool:
    """Invalid (applied or only checked), settled, and with findings an agent can fix."""
    invalid = report.outcome is Outcome.INVALID or (report.outcome is None and not report.valid)
    return invalid and report.path not in skip and bool(_blocking_errors(report))


def decision(
    reports: Sequence[FileReport],
    stop_hook_active: bool,
    unsettled: Iterable[Path] = (),
) -> dict[str, Any]:
    """``{}`` or a block naming each invalid, settled file and exactly what to fix."""
    skip = set(unsettled)
    invalid = [r for r in reports if _to_repair(r, skip)]
    if not invalid or stop_hook_active:
        return {}
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
        "Rewrite the file(s) with these fixed; postflightd applies them when they validate."
    )
    return {"decision": "block", "reason": "\n".join(lines)}


def _state_problem(reports: Sequence[FileReport]) -> str | None:
    kept = [r for r in reports if r.outcome is Outcome.STATE_UNUSABLE]
    if not kept:
        return None
    problem = next(
        (f.message for f in kept[0].findings if f.code == STATE_UNUSABLE), STATE_UNUSABLE
    )
    return f"{len(kept)} valid metadata file(s) not applied and kept: {problem}"


def _incomplete_problem(reports: Sequence[FileReport]) -> str | None:
    """PF606: applied to state.json, but TODO.md or errors.json could not be written. Not the
    agent's to fix, so said to the person; the file is kept and the next run completes it."""
    kept = [r for r in reports if r.outcome is Outcome.INCOMPLETE]
    if not kept:
        return None
    problem = next((f.message for f in kept[0].findings if f.code == "PF606"), "PF606")
    return f"{len(kept)} outcome(s) only partly written and kept for the next run: {problem}"


def system_message(problems: Sequence[str]) -> dict[str, str]:
    """The runtime's message for the person (never the agent): one line."""
    return {"systemMessage": "postflightd: " + "; ".join(inert(p) for p in problems)}


def answer(
    hook_input: HookInput,
    load_config: Callable[[Path], Config],
    open_journal: Callable[[Config], Journal],
    env: Mapping[str, str],
) -> dict[str, Any]:
    """Post-flight the final files of the project that stopped; the runtime's answer.

    The project is the one holding ``cwd``, else ``$CLAUDE_PROJECT_DIR`` (an agent that ran
    ``cd /tmp`` still belongs to its project). Raises PostflightError for a problem that is not
    the metadata's (``commands.hook.run_hook`` turns it into a ``systemMessage``).
    """
    starts = [hook_input.cwd]
    project_dir = env.get("CLAUDE_PROJECT_DIR")
    if project_dir:
        starts.append(Path(project_dir))
    root: Path | None = None
    for start in starts:
        config = load_config(start)
        root = find_root(start, config.specs_dir)
        if root is not None:
            break
    if root is None:
        return {}
    config = load_config(root)
    with Project.open(root, config) as project:
        return _postflight(project, config, hook_input, open_journal)


def _postflight(
    project: Project,
    config: Config,
    hook_input: HookInput,
    open_journal: Callable[[Config], Journal],
) -> dict[str, Any]:
    """``answer`` for the open project: its final files applied (or, with ``[hook] apply =
    false``, only checked), and the runtime's answer: a block over the agent's own invalid
    files, a ``systemMessage`` naming other runs' invalid files once."""
    refs = list(find_metadata_files(project.require_specs()))
    now_s = time.time()
    operation = operation_of(None, hook_input.agent_type)
    rule = ownership(
        transcripts_of(
            hook_input.event,
            hook_input.transcript_path,
            hook_input.agent_transcript_path,
            hook_input.session_id,
        ),
        timeout_for(operation, config.timeouts.as_mapping()),
        now_s,
    )
    own = {r.path for r in refs if rule.owns(r.task_dir, _mtime(r.path), now_s)}
    settled, young = settled_split(refs, config.watch.settle_ms / 1000)
    problems: list[str] = []
    if config.hook.apply:
        applied = _apply(project, config, settled, young, open_journal, problems)
        if applied is None:
            return system_message(problems)
        reports = applied
    else:
        # Validator mode: the file stays for the workflow's own stages (and its `process`).
        now = datetime.now(UTC)
        policy = policy_from(config)
        reports = [check_file(project, ref, config, policy, now) for ref in refs]
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
    others = _others_problem(project.root, theirs, unsettled, Reported(default_reported_path()))
    if others is not None:
        problems.append(others)
    out = decision([r for r in reports if r.path in own], hook_input.stop_hook_active, unsettled)
    if problems:
        out.update(system_message(problems))
    return out


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
    policy = policy_from(config)
    reports: list[FileReport] = []
    with closing(open_journal(config)) as journal:
        if not journal.enabled:
            problems.append(
                f"the journal is unavailable ({journal.error}); postflight went on without it"
            )
        now = datetime.now(UTC)
        try:
            for note in clean_litter(project, config, journal):
                print(f"postflightd: {inert(note)}", file=sys.stderr)
            if settled:
                reports += apply_files(
                    project, settled, config, policy, journal, now, lock_timeout_s=HOOK_LOCK_WAIT_S
                )
            if young:
                # Like the daemon before a file settles: one that does not parse yet is left
                # alone, unrecorded; one that validates is applied.
                reports += apply_files(
                    project,
                    young,
                    config,
                    policy,
                    journal,
                    now,
                    report_unparsed=False,
                    lock_timeout_s=HOOK_LOCK_WAIT_S,
                )
        except LockTimeoutError as exc:
            problems.append(f"{exc}; the metadata files are kept for the next run")
            return None
    return reports


def _others_problem(
    root: Path, reports: Sequence[FileReport], unsettled: set[Path], reported: Reported
) -> str | None:
    """Other runs' invalid files, for the person: each content said once, never again."""
    fresh: list[tuple[str, FileReport]] = []
    for report in reports:
        if not _to_repair(report, unsettled):
            continue
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
        f"{len(fresh)} invalid metadata file(s) not written by this agent, so not blocked "
        f"on (said once; `postflightd scan` lists them): " + ", ".join(named) + tail
    )
