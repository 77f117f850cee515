"""``postflightd report``: what the journal says about the runs, as figures.

Pure: runs in (``runs.fold`` of the journal rows), a ``Report`` out. Reading the database,
the configuration and the clock happens in ``source``; rendering in ``reporters.report`` and
``reporters.report_html``, which share the figures' words (``outcome_mix``,
``success_rate``, ``human``) from here.

Why this module stays whole at ~650 lines: it is one step, runs into figures. Each figure type
(``Group``, ``TimeoutAdvice``, ``CodeFigure``, ``NearMiss``, ``Incident``) is filled by one part
of ``tally`` and ordered by ``build_report``, and ``Tally.merge`` must know every one of them
(the forked half of a large report comes back as a ``Tally``); split along the figures, each
piece would import the others' types back. The seam that exists (rows into runs, the hot
loop, per row rather than per run) is ``runs``.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any, Final

from postflightd.durations import format_duration
from postflightd.inert import utf8_safe
from postflightd.models.terms import SUCCESS_STATUSES
from postflightd.rules.metadata import suggest_status
from postflightd.runs.lifecycle import DEFAULT_OPERATION, timeout_for
from postflightd.stats.runs import (
    UNKNOWN,
    Run,
    RunKey,
    Runs,
    duration_of,
    operation_of_run,
    outcome_of,
)
from postflightd.words import counted

#: Outcome columns, in the order they are shown (the JSON report has every key, always).
OUTCOMES: Final = (
    "researched",
    "planned",
    "implemented",
    "partial",
    "failed",
    "blocked",
    "stuck",
    "invalid",
    "interrupted",
    "running",
)
SUCCESS: Final = frozenset(s.value for s in SUCCESS_STATUSES)
#: Outcomes counted as trouble in the timeline (a run that did not do its job).
TROUBLE: Final = frozenset({"partial", "failed", "blocked", "stuck", "invalid", "interrupted"})
#: Below this many timed runs an operation's timeout gets no advice: p95 of 3 runs is noise.
MIN_RUNS_FOR_ADVICE: Final = 5
#: A timeout above this multiple of the longest successful run leaves dead agents unnoticed.
LOOSE_FACTOR: Final = 3.0
TOP_AGENTS: Final = 3
# A status the rules' own PF202/PF203 message suggests ('did you mean "planned"?',
# 'write "status": "planned"'): used only when the run's operation is unknown.
_HINTED: Final = re.compile(
    r'"(researched|planned|implemented|partial|failed|blocked|in_progress)"'
)


# --- the figures ------------------------------------------------------------------------------


@dataclass(slots=True)
class Group:
    """Runs of one operation or one agent type."""

    name: str
    runs: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    durations: list[float] = field(default_factory=list)

    @property
    def median_s(self) -> float | None:
        return median(self.durations)

    @property
    def p95_s(self) -> float | None:
        return percentile(self.durations, 95)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "runs": self.runs,
            "outcomes": {o: self.outcomes.get(o, 0) for o in OUTCOMES},
            "timed_runs": len(self.durations),
            "median_s": _round(self.median_s),
            "p95_s": _round(self.p95_s),
        }


@dataclass(frozen=True, slots=True)
class TimeoutAdvice:
    """One operation of one root: its configured timeout against the measured durations."""

    root: str
    operation: str
    timeout_s: float
    timed_runs: int
    p95_s: float | None
    longest_success_s: float | None
    #: "raise", "lower", "ok" or "too_few_runs"
    verdict: str
    suggested_s: float | None
    advice: str

    def to_json(self) -> dict[str, Any]:
        return {
            "root": self.root,
            "operation": self.operation,
            "timeout_s": self.timeout_s,
            "timed_runs": self.timed_runs,
            "p95_s": _round(self.p95_s),
            "longest_success_s": _round(self.longest_success_s),
            "verdict": self.verdict,
            "suggested_s": self.suggested_s,
            "advice": self.advice,
        }


@dataclass(slots=True)
class CodeFigure:
    """One finding code: how often, in what share of runs, by whom, with a real example."""

    code: str
    severity: str
    count: int = 0
    files: int = 0
    agents: Counter[str] = field(default_factory=Counter)
    example: str = ""
    example_location: str = ""
    #: when the run of the example was first seen: the earliest example is kept, whatever
    #: order the runs are tallied in.
    example_ts: str = ""

    def to_json(self, total_files: int) -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": self.severity,
            "count": self.count,
            "files": self.files,
            "share": round(self.files / total_files, 4) if total_files else 0.0,
            "top_agents": [{"agent": a, "files": n} for a, n in self.top_agents],
            "example": {"location": self.example_location, "message": self.example},
        }

    @property
    def top_agents(self) -> list[tuple[str, int]]:
        return sorted(self.agents.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_AGENTS]


@dataclass(frozen=True, slots=True)
class NearMiss:
    """A status outside the seven (``done``, ``completed`` ...) and what it meant."""

    status: str
    meant: str
    runs: int

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "meant": self.meant, "runs": self.runs}


@dataclass(frozen=True, slots=True)
class Incident:
    """A stuck or interrupted run, and how it ended."""

    kind: str
    root: str
    file: str
    task: int | None
    session: str | None
    agent: str
    first_seen: str
    flagged: str
    ended: str

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "root": self.root,
            "file": self.file,
            "task": self.task,
            "session": self.session,
            "agent": self.agent,
            "first_seen": self.first_seen,
            "flagged": self.flagged,
            "ended": self.ended,
        }


@dataclass(slots=True)
class Report:
    generated: str
    since: str | None
    first_ts: str | None
    last_ts: str | None
    roots: list[str]
    runs: int
    unattributed: int
    outcomes: Counter[str]
    operations: list[Group]
    agents: list[Group]
    timeouts: list[TimeoutAdvice]
    validated_files: int
    codes: list[CodeFigure]
    near_misses: list[NearMiss]
    incidents: list[Incident]
    #: (ISO day, runs, runs in trouble), every day from the first to the last, zeros included.
    days: list[tuple[str, int, int]]

    def to_json(self) -> dict[str, Any]:
        return {
            "generated": self.generated,
            "since": self.since,
            "period": {"first": self.first_ts, "last": self.last_ts},
            "roots": self.roots,
            "runs": self.runs,
            "unattributed_runs": self.unattributed,
            "outcomes": {o: self.outcomes.get(o, 0) for o in OUTCOMES},
            "operations": [g.to_json() for g in self.operations],
            "agents": [g.to_json() for g in self.agents],
            "timeouts": [t.to_json() for t in self.timeouts],
            "findings": {
                "validated_files": self.validated_files,
                "codes": [c.to_json(self.validated_files) for c in self.codes],
                "near_miss_statuses": [n.to_json() for n in self.near_misses],
            },
            "incidents": [i.to_json() for i in self.incidents],
            "days": [{"day": d, "runs": n, "trouble": t} for d, n, t in self.days],
        }


def median(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def percentile(values: list[float], pct: float) -> float | None:
    """Nearest-rank percentile: a duration some run really took."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(math.ceil(pct / 100 * len(ordered)), 1)
    return ordered[rank - 1]


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


GroupKey = tuple[str, str, str, str]  # root, operation, agent, outcome


@dataclass(slots=True)
class Tally:
    """The figures of some runs, before they become a report; two tallies merge into one."""

    runs: int = 0
    first_ts: str | None = None
    last_ts: str | None = None
    roots: set[str] = field(default_factory=set)
    counts: Counter[GroupKey] = field(default_factory=Counter)
    durations: dict[GroupKey, list[float]] = field(default_factory=dict)
    codes: dict[str, CodeFigure] = field(default_factory=dict)
    near: Counter[tuple[str, str]] = field(default_factory=Counter)
    per_day: Counter[str] = field(default_factory=Counter)
    trouble_day: Counter[str] = field(default_factory=Counter)
    validated: int = 0
    incidents: list[Incident] = field(default_factory=list)

    def merge(self, other: Tally) -> Tally:
        """Both tallies' figures (of disjoint sets of runs) in this one."""
        self.runs += other.runs
        self.first_ts = min(filter(None, (self.first_ts, other.first_ts)), default=None)
        self.last_ts = max(filter(None, (self.last_ts, other.last_ts)), default=None)
        self.roots |= other.roots
        self.counts.update(other.counts)
        for key, values in other.durations.items():
            self.durations.setdefault(key, []).extend(values)
        for code, theirs in other.codes.items():
            mine = self.codes.get(code)
            if mine is None:
                self.codes[code] = theirs
                continue
            mine.count += theirs.count
            mine.files += theirs.files
            mine.agents.update(theirs.agents)
            if theirs.example and (not mine.example or theirs.example_ts < mine.example_ts):
                mine.example, mine.example_location = theirs.example, theirs.example_location
                mine.example_ts = theirs.example_ts
        self.near.update(other.near)
        self.per_day.update(other.per_day)
        self.trouble_day.update(other.trouble_day)
        self.validated += other.validated
        self.incidents.extend(other.incidents)
        return self


def tally(folded: Runs) -> Tally:
    """Count every run of ``folded`` into (root, operation, agent, outcome) groups and more."""
    # One counter and one list per group, grouped further only at the end: the loop below
    # runs 100,000 times in the 2 s a large report may take, so it does as little as it can.
    out = Tally(
        runs=len(folded.runs),
        first_ts=folded.first_ts,
        last_ts=folded.last_ts,
        roots=set(folded.roots),
    )
    counts, durations, near = out.counts, out.durations, out.near
    per_day, trouble_day = out.per_day, out.trouble_day
    operations: dict[tuple[str | None, str | None], str] = {}
    parsed: dict[str, list[tuple[str, str, str, str]]] = {}
    flagged: list[tuple[RunKey, Run, str, str]] = []
    validated = 0
    for key, run in folded.runs:
        outcome = outcome_of(run)
        pair = (run.agent, run.op_word)
        operation = operations.get(pair)
        if operation is None:
            operation = operations[pair] = operation_of_run(run)
        agent = run.agent or UNKNOWN
        group_key = (key[0], operation, agent, outcome)
        counts[group_key] += 1
        if run.outcome_status is not None:
            duration = duration_of(run)
            if duration is not None:
                durations.setdefault(group_key, []).append(duration)
        day = run.first_ts[:10]
        per_day[day] += 1
        if outcome in TROUBLE:
            trouble_day[day] += 1
        if run.validated:
            validated += 1
        if run.findings:
            _count_findings(out.codes, parsed, run.findings, run.first_ts, agent)
        if run.near_misses:
            for raw in run.near_misses:
                near[(raw, _meaning(raw, operation, run.findings, parsed))] += 1
        if run.stuck_ts is not None or run.interrupted_ts is not None:
            flagged.append((key, run, agent, outcome))
    out.validated = validated
    out.incidents = _incidents(folded, flagged)
    return out


def build_report(
    folded: Runs | Tally,
    timeouts: Mapping[str, Mapping[str, float]],
    *,
    now: datetime,
    since: datetime | None,
) -> Report:
    """The report of every run; ``timeouts``: each root's ``[timeouts]``."""
    t = folded if isinstance(folded, Tally) else tally(folded)
    by_op: dict[str, Group] = {}
    by_agent: dict[str, Group] = {}
    # (root, operation) -> (durations, successful durations)
    timed: dict[tuple[str, str], tuple[list[float], list[float]]] = {}
    outcomes: Counter[str] = Counter()
    for group_key, n in t.counts.items():
        root, operation, agent, outcome = group_key
        outcomes[outcome] += n
        values = t.durations.get(group_key, [])
        for groups, name in ((by_op, operation), (by_agent, agent)):
            group = groups.get(name)
            if group is None:
                group = groups[name] = Group(name)
            group.runs += n
            group.outcomes[outcome] += n
            group.durations.extend(values)
        if values and operation != UNKNOWN:
            all_d, ok_d = timed.setdefault((root, operation), ([], []))
            all_d.extend(values)
            if outcome in SUCCESS:
                ok_d.extend(values)
    return Report(
        generated=_iso(now),
        since=_iso(since) if since is not None else None,
        first_ts=t.first_ts,
        last_ts=t.last_ts,
        roots=sorted(t.roots),
        runs=t.runs,
        unattributed=by_agent[UNKNOWN].runs if UNKNOWN in by_agent else 0,
        outcomes=outcomes,
        operations=_ordered_ops(by_op),
        agents=sorted(by_agent.values(), key=lambda g: (g.name == UNKNOWN, -g.runs, g.name)),
        timeouts=_timeout_advice(timed, timeouts),
        validated_files=t.validated,
        codes=sorted(t.codes.values(), key=lambda c: (-c.files, -c.count, c.code)),
        near_misses=[
            NearMiss(raw, meant, n)
            for (raw, meant), n in sorted(t.near.items(), key=lambda kv: (-kv[1], kv[0]))
        ],
        incidents=sorted(t.incidents, key=lambda i: (i.flagged, i.root, i.file)),
        days=_days(t.per_day, t.trouble_day),
    )


def _incidents(folded: Runs, flagged: list[tuple[RunKey, Run, str, str]]) -> list[Incident]:
    if not flagged:
        return []
    # The other runs of the same task directories only: how each flagged run ended.
    files = {(key[0], key[1]) for key, _, _, _ in flagged}
    by_file: dict[tuple[str, str], list[tuple[RunKey, Run]]] = {f: [] for f in files}
    for key, run in folded.runs:
        same = by_file.get((key[0], key[1]))
        if same is not None:
            same.append((key, run))
    return [
        _incident(key, run, agent, outcome, by_file[(key[0], key[1])])
        for key, run, agent, outcome in flagged
    ]


def _iso(ts: datetime) -> str:
    return ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_OPERATION_ORDER: Final = {
    "research": 0,
    "planning": 1,
    "implementation": 2,
    "simple": 3,
    DEFAULT_OPERATION: 4,
}


def _ordered_ops(by_op: dict[str, Group]) -> list[Group]:
    return sorted(by_op.values(), key=lambda g: (_OPERATION_ORDER.get(g.name, 5), g.name))


def _findings_of(
    text: str, parsed: dict[str, list[tuple[str, str, str, str]]]
) -> list[tuple[str, str, str, str]]:
    """(code, severity, location, message) of a findings JSON text, parsed once per text."""
    found = parsed.get(text)
    if found is not None:
        return found
    found = []
    try:
        items = json.loads(text)
    except ValueError:
        items = None
    for item in items if isinstance(items, list) else ():
        if not isinstance(item, dict) or not isinstance(item.get("code"), str):
            continue
        severity, location, message = (item.get(k) for k in ("severity", "location", "message"))
        found.append(
            (
                utf8_safe(item["code"]),
                severity if isinstance(severity, str) else "?",
                utf8_safe(location) if isinstance(location, str) else "",
                utf8_safe(message) if isinstance(message, str) else "",
            )
        )
    parsed[text] = found
    return found


def _count_findings(
    codes: dict[str, CodeFigure],
    parsed: dict[str, list[tuple[str, str, str, str]]],
    findings: set[str],
    first_ts: str,
    agent: str,
) -> None:
    seen: set[str] = set()
    # Sorted: the example a code keeps must not depend on a set's iteration order.
    for text in sorted(findings):
        for code, severity, location, message in _findings_of(text, parsed):
            figure = codes.get(code)
            if figure is None:
                figure = codes[code] = CodeFigure(code, severity)
            figure.count += 1
            if message and (not figure.example or first_ts < figure.example_ts):
                figure.example, figure.example_location = message, location
                figure.example_ts = first_ts
            if code not in seen:
                seen.add(code)
                figure.files += 1
                figure.agents[agent] += 1


@functools.lru_cache(maxsize=1024)
def _suggested(raw: str, operation: str) -> str | None:
    guess = suggest_status(raw, operation if operation != UNKNOWN else None)
    return guess.value if guess is not None else None


def _meaning(
    raw: str,
    operation: str,
    findings: set[str] | None,
    parsed: dict[str, list[tuple[str, str, str, str]]],
) -> str:
    """What a near-miss status meant: the rules' own mapping (rules.suggest_status)."""
    guess = _suggested(raw, operation)
    if guess is not None:
        return guess
    # The operation is unknown here (the run was never applied), but the validator knew it
    # and said which status to write in its PF202/PF203 message.
    for text in findings or ():
        for code, _, _, message in _findings_of(text, parsed):
            if code in ("PF202", "PF203") and (hits := _HINTED.findall(message)):
                return str(hits[-1])
    return "unclear"


def _incident(
    key: RunKey, run: Run, agent: str, outcome: str, same_file: list[tuple[RunKey, Run]]
) -> Incident:
    kind = "stuck" if run.stuck_ts is not None else "interrupted"
    flagged = run.stuck_ts or run.interrupted_ts or run.first_ts
    if run.outcome_status is not None:
        ended = f"finished late: {run.outcome_status}"
    else:
        later = [(k, r) for k, r in same_file if r.order > run.order]
        if later:
            k, r = later[0]
            ended = f"replaced by session {k[2] or '?'} ({outcome_of(r)})"
        elif outcome == "invalid":
            ended = "rewritten as an invalid final file"
        elif kind == "stuck" and run.interrupted_ts is not None:
            ended = "interrupted after being flagged; still in_progress"
        else:
            ended = "not yet: still in_progress (file kept)"
    return Incident(
        kind=kind,
        root=key[0],
        file=key[1],
        task=run.task,
        session=key[2],
        agent=agent,
        first_seen=run.first_ts,
        flagged=flagged,
        ended=ended,
    )


def _days(per_day: Counter[str], trouble: Counter[str]) -> list[tuple[str, int, int]]:
    parsed = sorted(d for d in (_day(k) for k in per_day) if d is not None)
    if not parsed:
        return []
    out: list[tuple[str, int, int]] = []
    day, last = parsed[0], parsed[-1]
    while day <= last:
        text = day.isoformat()
        out.append((text, per_day.get(text, 0), trouble.get(text, 0)))
        day += timedelta(days=1)
    return out


def _day(text: str) -> date | None:
    try:
        return date.fromisoformat(text)
    except ValueError:
        return None


def _by_root_then_op(item: tuple[tuple[str, str], object]) -> tuple[str, int, str]:
    (root, operation), _ = item
    return (root, _OPERATION_ORDER.get(operation, 5), operation)


def _timeout_advice(
    timed: dict[tuple[str, str], tuple[list[float], list[float]]],
    timeouts: Mapping[str, Mapping[str, float]],
) -> list[TimeoutAdvice]:
    out: list[TimeoutAdvice] = []
    for (root, operation), (all_d, ok_d) in sorted(timed.items(), key=_by_root_then_op):
        table = timeouts.get(root)
        if table is None:
            continue
        timeout = timeout_for(operation, table)
        out.append(advise(root, operation, timeout, all_d, ok_d))
    return out


def advise(
    root: str, operation: str, timeout: float, durations: list[float], successes: list[float]
) -> TimeoutAdvice:
    """The verdict on one timeout: below p95 -> raise; above 3x the longest success -> lower."""
    p95 = percentile(durations, 95)
    longest = max(successes) if successes else None
    known = ("research", "planning", "implementation", "simple")
    setting = f"[timeouts] {operation if operation in known else DEFAULT_OPERATION}"
    verdict, suggested = "ok", None
    if len(durations) < MIN_RUNS_FOR_ADVICE or p95 is None:
        verdict = "too_few_runs"
        advice = (
            f"{counted(len(durations), 'timed run')}: too few to judge "
            f"(at least {MIN_RUNS_FOR_ADVICE})"
        )
    elif timeout < p95:
        verdict, suggested = "raise", nice_ceil(p95 * 1.5)
        advice = (
            f"raise it: the timeout ({human(timeout)}) is below the p95 ({human(p95)}), so "
            f"runs still working are flagged stuck; set {setting} = {int(suggested)} "
            f"({human(suggested)})"
        )
    elif (
        longest is not None
        and timeout > LOOSE_FACTOR * longest
        # Twice the longest success (and above the p95): room for a slow run, while a dead
        # agent is noticed in a fraction of the time. Never "lower" to a higher value.
        and (lower := max(nice_ceil(max(longest * 2, p95 * 1.5)), 60.0)) < timeout
    ):
        verdict, suggested = "lower", lower
        advice = (
            f"lower it: the timeout ({human(timeout)}) is more than {LOOSE_FACTOR:g}x the "
            f"longest successful run ({human(longest)}), so a dead agent goes unnoticed that "
            f"long; set {setting} = {int(suggested)} ({human(suggested)})"
        )
    else:
        advice = f"fits: p95 {human(p95)}, longest success {human(longest)}"
    return TimeoutAdvice(
        root=root,
        operation=operation,
        timeout_s=timeout,
        timed_runs=len(durations),
        p95_s=p95,
        longest_success_s=longest,
        verdict=verdict,
        suggested_s=suggested,
        advice=advice,
    )


def nice_ceil(seconds: float) -> float:
    """Round a suggested timeout up to a value people write: whole minutes, 5 or 15 minutes."""
    step = 60 if seconds < 1800 else 300 if seconds < 7200 else 900
    return float(max(math.ceil(seconds / step), 1) * step)


def outcome_mix(group: Group) -> str:
    """``applied 12, failed 2``: the group's outcomes in ``OUTCOMES`` order, ``-`` for none."""
    parts = [f"{o} {group.outcomes[o]}" for o in OUTCOMES if group.outcomes.get(o)]
    return ", ".join(parts) or "-"


def success_rate(group: Group) -> str:
    """The share of the group's runs that ended in a success status, as ``92%``."""
    done = sum(group.outcomes.get(o, 0) for o in SUCCESS)
    return f"{round(100 * done / group.runs)}%" if group.runs else "-"


def human(seconds: float | None) -> str:
    """The one duration format (``durations.format_duration``); ``never`` for infinity (TOML
    accepts ``inf`` as a timeout)."""
    if seconds is not None and not math.isfinite(seconds):
        return "never"
    return format_duration(seconds)
