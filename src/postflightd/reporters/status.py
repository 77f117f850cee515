"""Reporters for ``status``: the table of runs in flight (also drawn by ``status --watch``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final, TextIO

from postflightd.durations import format_duration
from postflightd.inert import inert, json_text
from postflightd.reporters import Reporter
from postflightd.reporters.style import Options, paint

if TYPE_CHECKING:
    from postflightd.runs.status import RootStatus, RunStatus


def _phases(run: RunStatus) -> str:
    if run.phases_completed is None and run.phases_total is None:
        return "-"
    done = "?" if run.phases_completed is None else str(run.phases_completed)
    total = "?" if run.phases_total is None else str(run.phases_total)
    return f"{done}/{total}"


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
                f"  healed: {healing.get('reapplied', 0)} outcome(s) re-applied after writes "
                f"that ignored the lock, {healing.get('overwritten', 0)} edited since "
                "(last 24 h; `postflightd verify` lists them)\n"
            )
        if entry.note:
            out.write(f"  {inert(entry.note)}\n")
            continue
        if not entry.runs:
            out.write("  no runs in flight\n")
            continue
        rows = [["TASK", "STATUS", "AGENT", "STAGE", "PHASES", "ELAPSED / TIMEOUT", ""]]
        for run in entry.runs:
            rows.append(
                [
                    str(run.task) if run.task is not None else run.file,
                    run.status or "?",
                    run.agent or "-",
                    run.stage or "-",
                    _phases(run),
                    f"{format_duration(run.elapsed_s)} / {format_duration(run.timeout_s)}",
                    {"stuck": "STUCK", "invalid": "INVALID", "waiting": "WAITING"}.get(
                        run.state, ""
                    ),
                ]
            )
        for line in _table(rows):
            mark = line.rsplit(" ", 1)[-1]
            if color and mark in _MARK_STYLE:
                # Coloured after padding: escape codes would throw the column widths off.
                line = line[: -len(mark)] + paint(mark, _MARK_STYLE[mark], on=True)  # noqa: PLW2901
            out.write(f"  {line}\n")
    runs = [r for e in statuses for r in e.runs]
    stuck = sum(1 for r in runs if r.stuck)
    running = sum(1 for r in runs if r.state == "running")
    out.write(f"{running} running, {stuck} stuck, {len(runs) - running - stuck} other\n")


def report_status_json(
    statuses: Sequence[RootStatus], out: TextIO, options: Options | None = None
) -> None:
    del options  # one shape
    out.write(json_text({"roots": [s.to_json() for s in statuses]}, indent=2) + "\n")


REPORTERS: dict[str, Reporter[Sequence[RootStatus]]] = {
    "text": report_status_text,
    "json": report_status_json,
}
