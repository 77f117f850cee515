"""Reporters for ``status``: the table of runs in flight (also drawn by ``status --watch``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final, TextIO

from postflightd.durations import format_duration
from postflightd.inert import inert, json_text
from postflightd.reporters import Reporter
from postflightd.reporters.style import Options, paint
from postflightd.runs.lifecycle import IN_PROGRESS
from postflightd.runs.status import WRITING
from postflightd.timestamps import parse_timestamp
from postflightd.words import counted

if TYPE_CHECKING:
    from postflightd.runs.status import RootStatus, RunStatus


def _phases(run: RunStatus) -> str:
    if run.phases_completed is None and run.phases_total is None:
        return "-"
    done = "?" if run.phases_completed is None else str(run.phases_completed)
    total = "?" if run.phases_total is None else str(run.phases_total)
    return f"{done}/{total}"


#: The widest a task directory's name is shown in the TASK column.
_TASK_DIR_WIDTH: Final = 24


def _task_cell(run: RunStatus) -> str:
    """The task's number; without one (a directory not named ``{number}_{slug}``), ``?`` and
    the directory's name, clipped: never the file's whole path, so the table stays a table."""
    if run.task is not None:
        return str(run.task)
    name = run.file.rstrip("/").rsplit("/", 2)[-2] if "/" in run.file else run.file
    if len(name) > _TASK_DIR_WIDTH:
        name = name[: _TASK_DIR_WIDTH - 1] + "…"
    return f"? {name}"


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    rows = [[inert(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


_MARK_STYLE: Final = {"STUCK": "error", "INVALID": "error", "WAITING": "warning"}


def report_status_text(
    statuses: Sequence[RootStatus], out: TextIO, options: Options | None = None
) -> None:
    color = options is not None and options.color
    for entry in statuses:
        if entry.daemon_pid is None:
            daemon = "no daemon"
        else:
            daemon = f"daemon pid {entry.daemon_pid}" if entry.daemon_pid else "daemon running"
        out.write(f"{inert(str(entry.root))}  ({daemon})\n")
        healing = entry.healing or {}
        if healing.get("reapplied") or healing.get("overwritten"):
            out.write(
                f"  healed: {counted(healing.get('reapplied', 0), 'outcome')} re-applied after "
                f"writes that ignored the lock, {healing.get('overwritten', 0)} edited since "
                "(last 24 h; `postflightd verify` lists them)\n"
            )
        if entry.note:
            out.write(f"  {inert(entry.note)}\n")
            continue
        if not entry.runs:
            out.write("  no runs in flight\n")
            continue
        rows = [["TASK", "STATUS", "AGENT", "STAGE", "PHASES", "ELAPSED / TIMEOUT", "STATE"]]
        for run in entry.runs:
            rows.append(
                [
                    _task_cell(run),
                    run.status or "?",
                    run.agent or "-",
                    run.stage or "-",
                    _phases(run),
                    _elapsed(run),
                    _STATE_SHOWN.get(run.state, run.state),
                ]
            )
        for line in _table(rows):
            mark = line.rsplit(" ", 1)[-1]
            if color and mark in _MARK_STYLE:
                # Coloured after padding: escape codes would throw the column widths off.
                line = line[: -len(mark)] + paint(mark, _MARK_STYLE[mark], on=True)  # noqa: PLW2901
            out.write(f"  {line}\n")
        for run in entry.runs:
            if run.waiting:
                name = str(run.task) if run.task is not None else run.file
                out.write(f"  {inert(name)} waits: {inert(run.waiting)}\n")
    out.write(summary([r for e in statuses for r in e.runs]) + "\n")


#: How each state reads in the table: the ones that need a look in capitals.
_STATE_SHOWN: Final = {"stuck": "STUCK", "invalid": "INVALID", "waiting": "WAITING"}
#: The summary's words for the states beside running and stuck, in the order shown.
_OTHER_STATES: Final = (
    ("invalid", "invalid"),
    ("waiting", "waiting for postflight"),
    (WRITING, "being written"),
)


def _elapsed(run: RunStatus, now: datetime | None = None) -> str:
    """Elapsed against the timeout while the run is going; a finished file's run is over, and
    a file waiting for its postflight shows how long it has been final (a leftover's age)."""
    if run.status != IN_PROGRESS:
        since = parse_timestamp(run.waiting_since) if run.waiting_since else None
        if since is None:
            return "-"
        age = ((now or datetime.now(UTC)) - since).total_seconds()
        return f"final {format_duration(age)} ago"
    return f"{format_duration(run.elapsed_s)} / {format_duration(run.timeout_s)}"


def summary(runs: Sequence[RunStatus]) -> str:
    """``2 running, 1 stuck``, then each other state present: ``3 invalid, 1 waiting ...``."""
    counts = Counter(r.state for r in runs)
    parts = [f"{counts['running']} running", f"{counts['stuck']} stuck"]
    parts += [f"{counts[state]} {words}" for state, words in _OTHER_STATES if counts[state]]
    return ", ".join(parts)


def report_status_json(
    statuses: Sequence[RootStatus], out: TextIO, options: Options | None = None
) -> None:
    del options  # one shape
    out.write(json_text({"roots": [s.to_json() for s in statuses]}, indent=2) + "\n")


REPORTERS: dict[str, Reporter[Sequence[RootStatus]]] = {
    "text": report_status_text,
    "json": report_status_json,
}
