"""Reporters for ``history``: one line per run with its outcome, or (``--events``) the
journal's rows as they were recorded, oldest first."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, TextIO

from postflightd.durations import format_duration
from postflightd.inert import inert, json_text, utf8_safe
from postflightd.reporters import Reporter
from postflightd.reporters.style import Options, display_path
from postflightd.stats.runs import (
    Run,
    RunKey,
    duration_of,
    ended_of,
    error_codes,
    outcome_of,
    started_of,
)
from postflightd.timestamps import iso_timestamp, parse_timestamp

if TYPE_CHECKING:
    from postflightd.journal.rows import Observation


@dataclass(frozen=True, slots=True)
class History:
    """What ``history`` found: the runs (or, ``--events``, the rows), a note when older rows
    were pruned, and how it was asked."""

    rows: Sequence[Observation]
    note: str | None
    #: a filter was given (the empty answer says "for that filter")
    filtered: bool
    #: ``--show``: the text form adds each row's recorded file content
    show: bool
    #: None with ``--events``: the rows are listed as they are
    runs: Sequence[tuple[RunKey, Run]] | None = None


# --- one run -----------------------------------------------------------------------------------


def _local(ts: str | None) -> str:
    """A recorded time in local time, to the second; ``-`` when none; the text as it is when
    it is no time (a journal another tool wrote)."""
    if ts is None:
        return "-"
    when = parse_timestamp(ts)
    return when.astimezone().strftime("%Y-%m-%d %H:%M:%S") if when is not None else inert(ts)


def _iso(ts: str | None) -> str | None:
    when = parse_timestamp(ts) if ts is not None else None
    return iso_timestamp(when) if when is not None else None


def _seconds(run: Run) -> float | None:
    """``duration_of``; an interrupted run's lasted until its interruption."""
    seconds = duration_of(run)
    if seconds is None and run.interrupted_ts is not None and run.final_ts is None:
        start, end = parse_timestamp(started_of(run)), parse_timestamp(run.interrupted_ts)
        if start is not None and end is not None and end >= start:
            seconds = (end - start).total_seconds()
    return seconds


def _outcome(run: Run) -> tuple[str, str | None, list[str]]:
    """(outcome, the status applied or None, the error codes found)."""
    outcome = outcome_of(run)
    if run.outcome_status is not None and outcome != "invalid":
        if run.incomplete is not None:
            # In state.json, but not every file of the outcome written and not completed
            # since: "applied" alone would hide that the metadata file waits for a rerun.
            return "incomplete", outcome, _incomplete_codes(run)
        return "applied", outcome, error_codes(run)
    return outcome, None, error_codes(run)


def _incomplete_codes(run: Run) -> list[str]:
    codes = dict.fromkeys(error_codes(run))
    try:
        items = json.loads(run.incomplete or "[]")
    except ValueError:
        items = []
    for item in items if isinstance(items, list) else ():
        if isinstance(item, dict) and isinstance(item.get("code"), str):
            codes[utf8_safe(item["code"])] = None
    return list(codes)


def _outcome_text(run: Run) -> str:
    outcome, status, codes = _outcome(run)
    if outcome == "incomplete":
        return f"incomplete as {status}" + (f" ({', '.join(codes)})" if codes else "")
    if status is not None:
        was = f" (after invalid {', '.join(codes)})" if codes else ""
        return f"applied as {status}{was}"
    if outcome == "invalid" and codes:
        return f"invalid {', '.join(codes)}"
    return outcome


def run_json(key: RunKey, run: Run, cwd: str) -> dict[str, Any]:
    """One run, in the fixed shape docs/postflight.md documents."""
    root, file, session = key
    outcome, status, codes = _outcome(run)
    seconds = _seconds(run)
    return {
        "outcome": outcome,
        "status": status,
        "codes": codes,
        "task": run.task,
        "agent": run.agent,
        "session": session,
        "started": _iso(started_of(run)),
        "ended": _iso(ended_of(run)) if outcome not in ("running", "stuck") else None,
        "duration_seconds": round(seconds) if seconds is not None else None,
        "root": root,
        "file": file,
        "path": display_path(f"{root}/{file}", cwd),
    }


# --- text ----------------------------------------------------------------------------------------


def _aligned(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """The header and rows in aligned columns, two spaces apart; the last one not padded."""
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header) - 1)]
    return [
        "  ".join([*(c.ljust(w) for c, w in zip(row, widths, strict=False)), row[-1]]) + "\n"
        for row in (header, *rows)
    ]


def report_text(history: History, out: TextIO, options: Options | None = None) -> None:
    """A table of the runs (or rows), the note first; ``--show`` adds the recorded files."""
    cwd = (options or Options()).cwd
    if history.note:
        out.write(history.note + "\n")
    if history.runs is not None:
        _runs_text(history.runs, history.filtered, out, cwd)
    else:
        _events_text(history, out, cwd)


def _runs_text(runs: Sequence[tuple[RunKey, Run]], filtered: bool, out: TextIO, cwd: str) -> None:
    if not runs:  # the command says so on stderr (``no_runs_recorded``), as report does
        return
    header = ("STARTED (local time)", "ENDED", "DURATION", "TASK", "AGENT", "SESSION", "OUTCOME")
    rows = []
    for (root, file, session), run in runs:
        outcome = outcome_of(run)
        ended = None if outcome in ("running", "stuck") else ended_of(run)
        rows.append(
            (
                _local(started_of(run)),
                _local(ended),
                format_duration(_seconds(run)),
                "-" if run.task is None else str(run.task),
                inert(run.agent or "-"),
                inert(session or "-"),
                inert(_outcome_text(run)),
                inert(display_path(f"{root}/{file}", cwd)),
            )
        )
    out.writelines(_aligned((*header, "FILE"), rows))


def _events_text(history: History, out: TextIO, cwd: str) -> None:
    if not history.rows:  # said on stderr by the command, as for runs
        return
    header = ("TIME (local time)", "KIND", "TASK", "STATUS", "SESSION", "FILE")
    cells = []
    for r in history.rows:
        pruned = " (content pruned)" if r.kind == "postflighted" and not r.content else ""
        cells.append(
            (
                _local(r.ts),
                inert(r.kind),
                "-" if r.task is None else str(r.task),
                inert(r.status or "-"),
                inert(r.session or "-"),
                inert(display_path(f"{r.root}/{r.file}", cwd)) + pruned,
            )
        )
    lines = _aligned(header, cells)
    out.write(lines[0])
    for r, line in zip(history.rows, lines[1:], strict=True):
        out.write(line)
        if history.show and r.content is not None:
            # The recorded file, one output line per line of it (splitlines also splits on
            # CR, VT, FF, NEL, U+2028: each piece is then escaped whole).
            for text in r.content.splitlines():
                out.write(f"    {inert(text)}\n")


# --- JSON ----------------------------------------------------------------------------------------


def report_json(history: History, out: TextIO, options: Options | None = None) -> None:
    """The runs as a JSON list (``--events``: the rows, each always carrying ``content``,
    --show or not). The note goes to the options' note stream (stderr): stdout holds the JSON
    only."""
    o = options or Options()
    if history.runs is not None:
        doc: list[dict[str, Any]] = [run_json(k, r, o.cwd) for k, r in history.runs]
    else:
        doc = [asdict(r) for r in history.rows]
    out.write(json_text(doc, indent=2) + "\n")
    if history.note:
        o.note_stream.write(history.note + "\n")


REPORTERS: dict[str, Reporter[History]] = {
    "text": report_text,
    "json": report_json,
}
