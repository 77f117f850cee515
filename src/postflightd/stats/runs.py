"""Journal rows into runs, as they stream by: the hot loop of ``postflightd report``.

A **run** is one session's work on one task directory of one root: the journal rows with the
same (root, file, session); a session reused after its run was applied starts a new run. Its
outcome is the status of its last ``postflighted`` row; else ``stuck`` / ``interrupted`` when
such a row exists; else ``running`` while its file still says ``in_progress``; else
``invalid`` (a final status that was never applied).

Only ``postflighted`` rows carry the file's content, so the operation, ``started_at`` and
``duration_seconds`` of a run are known only when some row of its session was applied. The
agent type is on every row since journal version 3, so a run never applied (invalid, stuck,
interrupted) is counted under its agent; its operation is then inferred from the agent's name
as the stuck detector does. Rows journalled before version 3 count under ``unknown``, and the
report says how many runs are.

Per row (``fold``: 300,000 rows at 100,000 runs) and per run (``outcome_of``, ``duration_of``,
``operation_of_run``); the figures over the runs are ``report``'s. Pure: rows in, runs out.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from postflightd.inert import utf8_safe
from postflightd.models.terms import Status
from postflightd.runs.lifecycle import operation_of
from postflightd.timestamps import parse_timestamp

if TYPE_CHECKING:
    from postflightd.journal.rows import Observation

UNKNOWN: Final = "unknown"
MAX_DURATION_S: Final = 10 * 365 * 86400.0
_VALID_STATUSES: Final = frozenset(s.value for s in Status)


class JournalRow(NamedTuple):
    """One journal row, as the report reads it (``source.stream_rows``). A named tuple, not a
    dataclass: it is the row SQLite gives, which ``fold`` unpacks by position, 300,000 a report.

    The last four fields are facts from a postflighted row's content, each None unless it is
    of the right JSON type (SQLite extracts them in bulk; ``facts_of`` is the same in Python).
    """

    ts: str
    kind: str
    root: str
    file: str
    task: int | None
    session: str | None
    status: str | None
    #: the ``findings`` JSON of a validated row; None when it holds none.
    findings: str | None
    agent: str | None = None
    #: ``metadata.delegation_path[1]``
    step: str | None = None
    started_at: str | None = None
    duration_s: float | None = None
    #: the row is of a leftover (PF607, journal version 5): its run has no known duration
    leftover: bool | None = None
    #: a leftover's outcome time, when its agent wrote the file (history's rows only)
    outcome_ts: str | None = None


Facts = tuple[str | None, str | None, str | None, float | None]


def facts_of(content: str | None) -> Facts:
    """(agent_type, delegation_path[1], started_at, duration_seconds) of a file's content."""
    doc: object = None
    if content is not None:
        try:
            doc = json.loads(content)
        except ValueError:
            doc = None
    if not isinstance(doc, dict):
        return (None, None, None, None)
    raw_meta = doc.get("metadata")
    meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
    path = meta.get("delegation_path")
    step = path[1] if isinstance(path, list) and len(path) > 1 else None
    agent, started, duration = (
        meta.get("agent_type"),
        doc.get("started_at"),
        meta.get("duration_seconds"),
    )
    seconds = (
        float(duration)
        if isinstance(duration, int | float) and not isinstance(duration, bool)
        else None
    )
    return (
        utf8_safe(agent) if isinstance(agent, str) else None,
        utf8_safe(step) if isinstance(step, str) else None,
        utf8_safe(started) if isinstance(started, str) else None,
        seconds,
    )


class Run:
    """What the rows of one run say, folded as they stream by."""

    __slots__ = (
        "agent",
        "duration_s",
        "final_ts",
        "findings",
        "first_ts",
        "incomplete",
        "interrupted_ts",
        "last_status",
        "leftover",
        "near_misses",
        "op_word",
        "order",
        "outcome_status",
        "outcome_ts",
        "progress_ts",
        "started_at",
        "stuck_ts",
        "task",
        "validated",
    )

    def __init__(self, order: int, ts: str, task: int | None) -> None:
        self.order = order
        self.first_ts = ts
        self.task = task
        self.final_ts: str | None = None
        self.progress_ts: str | None = None
        self.last_status: str | None = None
        self.outcome_status: str | None = None
        self.stuck_ts: str | None = None
        self.interrupted_ts: str | None = None
        self.findings: set[str] | None = None
        self.validated = False
        self.near_misses: set[str] | None = None
        self.agent: str | None = None
        self.op_word: str | None = None
        self.started_at: str | None = None
        self.duration_s: float | None = None
        #: first seen final long after it was written (PF607): when it ended is not known
        self.leftover = False
        #: a leftover's outcome time (its agent's write), which its first sight is not
        self.outcome_ts: str | None = None
        #: applied to state.json but not every file of the outcome written (PF606), and not
        #: completed since: the findings text of that row ("[]" without one)
        self.incomplete: str | None = None


RunKey = tuple[str, str, str | None]


@dataclass(slots=True)
class Runs:
    """Every run of the rows read, with its (root, file, session), in order of first sight."""

    runs: list[tuple[RunKey, Run]] = field(default_factory=list)
    first_ts: str | None = None
    last_ts: str | None = None

    @property
    def roots(self) -> list[str]:
        return sorted({k[0] for k, _ in self.runs})


def no_runs_recorded(scope: str = "") -> str:
    """What ``history`` and ``report`` both say, on stderr, when the journal holds no run
    (``scope``: for what they were asked, `` for that filter``)."""
    return (
        f"no runs recorded{scope}. The journal records a run when `postflightd watch`, the stop "
        "hook, `process` or `scan --apply` handles its metadata file"
    )


def fold(rows: Iterable[Sequence[Any]]) -> Runs:
    """Group journal rows (oldest first) into runs, keeping only what the report needs.

    Written for speed (``report`` over 100,000 runs, about 300,000 rows, answers in 2 s): one
    dict lookup and a few attribute writes per row; everything else waits for ``build_report``.
    """
    out = Runs()
    runs = out.runs
    current: dict[RunKey, Run] = {}
    valid = _VALID_STATUSES
    ts = ""
    for (
        ts,
        kind,
        root,
        file,
        task,
        session,
        status,
        findings,
        agent,
        step,
        started,
        secs,
        left,
        dated,
    ) in rows:
        key = (root, file, session)
        run = current.get(key)
        if run is None or (
            # Applied, and now the same task directory and session report something else: a
            # workflow that reuses the task's session for its next step (research, then plan).
            run.outcome_status is not None and kind == "validated" and status != run.outcome_status
        ):
            run = current[key] = Run(len(runs), ts, task)
            runs.append((key, run))
        if kind == "validated":
            run.validated = True
            if status == "in_progress":
                if run.progress_ts is None:
                    run.progress_ts = ts
            elif status is not None:
                if run.final_ts is None:
                    # The first sight of the final write: where the run's duration ends.
                    run.final_ts = ts
                if status not in valid:
                    if run.near_misses is None:
                        run.near_misses = set()
                    run.near_misses.add(status)
            if findings is not None:
                if run.findings is None:
                    run.findings = set()
                # A daemon re-validating the same content records the same text: once.
                run.findings.add(findings)
        elif kind == "postflighted":
            run.outcome_status = status
            if run.final_ts is None:
                run.final_ts = ts
            _read_facts(run, agent, step, started, secs)
        elif kind == "stuck":
            run.stuck_ts = run.stuck_ts or ts
        elif kind == "interrupted":
            run.interrupted_ts = run.interrupted_ts or ts
        elif kind == "incomplete":
            # Only history reads these rows (and "deleted"): report's query selects neither.
            run.incomplete = findings or "[]"
        elif kind == "deleted":
            run.incomplete = None  # the postflight was completed and the file deleted
        if agent and run.agent is None:
            # A row without content (journal version 3): the agent of a run never applied.
            run.agent = agent
        if status is not None:
            run.last_status = status
        if left:
            run.leftover = True
            if dated is not None:
                run.outcome_ts = dated
    if runs:
        out.first_ts, out.last_ts = runs[0][1].first_ts, ts
    return out


def _read_facts(
    run: Run, agent: str | None, step: str | None, started: str | None, seconds: float | None
) -> None:
    # The types are the JournalRow's (SQL and facts_of guarantee them): values only checked.
    if agent:
        run.agent = agent
    if step is not None:
        run.op_word = step
    if started is not None:
        run.started_at = started
    # 1e999 in JSON is infinity to SQLite; NaN is not JSON. Ten years bounds a real run.
    if seconds is not None and 0 <= seconds < MAX_DURATION_S:
        run.duration_s = float(seconds)


def operation_of_run(run: Run) -> str:
    """The stuck detector's inference (lifecycle.operation_of); ``unknown`` without content."""
    if run.agent is None and run.op_word is None:
        return UNKNOWN
    return operation_of(["", run.op_word], run.agent)


def outcome_of(run: Run) -> str:
    if run.outcome_status is not None:
        return run.outcome_status if run.outcome_status in _VALID_STATUSES else "invalid"
    if run.stuck_ts is not None:
        return "stuck"
    if run.interrupted_ts is not None:
        return "interrupted"
    if run.last_status == "in_progress":
        return "running"
    return "invalid"


def duration_of(run: Run) -> float | None:
    """From the start to the first sight of the final write, else ``duration_seconds``.

    The start is the final file's ``started_at``, else the first time the run was seen
    ``in_progress`` (agents often drop ``started_at`` from the final file, and the journal
    keeps the content of the final file only). A leftover (PF607: first seen final long
    after it was written) has none: when it ended is not known, and its first sight would
    make a run of months.
    """
    if run.leftover:
        return None
    end = parse_timestamp(run.final_ts) if run.final_ts is not None else None
    for start_text in (run.started_at, run.progress_ts):
        start = parse_timestamp(start_text) if start_text is not None else None
        if start is not None and end is not None:
            seconds = (end - start).total_seconds()
            if seconds >= 0:
                return seconds
    return run.duration_s


def observation_row(o: Observation) -> JournalRow:
    """A journal row as ``Journal.history`` returns it, in the form ``fold`` reads (what
    ``source.stream_rows`` selects in SQL: findings as text, facts from the content)."""
    agent, step, started, seconds = facts_of(o.content) if o.kind == "postflighted" else _NO_FACTS
    findings = (
        json.dumps(o.findings, sort_keys=True)
        if o.kind in ("validated", "incomplete") and o.findings
        else None
    )
    return JournalRow(
        *(o.ts, o.kind, o.root, o.file, o.task, o.session, o.status, findings),
        agent=o.agent or agent,
        step=step,
        started_at=started,
        duration_s=seconds,
        leftover=o.leftover or None,
        outcome_ts=o.outcome_ts,
    )


_NO_FACTS: Final[Facts] = (None, None, None, None)


def error_codes(run: Run) -> list[str]:
    """The codes of the errors any validation of the run found, in the order found (a file
    that was invalid shows why, even once fixed and applied)."""
    codes: dict[str, None] = {}
    for text in sorted(run.findings or ()):
        try:
            items = json.loads(text)
        except ValueError:
            continue
        for item in items if isinstance(items, list) else ():
            if (
                isinstance(item, dict)
                and item.get("severity") == "error"
                and isinstance(item.get("code"), str)
            ):
                codes[utf8_safe(item["code"])] = None
    return list(codes)


def ended_of(run: Run) -> str | None:
    """When the run ended: a leftover's outcome time, else the first sight of its final
    write, else its interruption; None while it is running or stuck."""
    if run.outcome_ts is not None:
        return run.outcome_ts
    return run.final_ts if run.final_ts is not None else run.interrupted_ts


def started_of(run: Run) -> str:
    """When the run started: the file's ``started_at`` when it is a time, else the first
    sight of it ``in_progress``, else its first row."""
    if run.started_at is not None and parse_timestamp(run.started_at) is not None:
        return run.started_at
    return run.progress_ts if run.progress_ts is not None else run.first_ts
