"""``postflightd status --watch``: the ``status`` table, redrawn in place, transitions highlighted.

Plain ANSI on a terminal (cursor home, clear to end of line, clear below): the table is the one
``status`` prints, so a curses-style library would add a dependency and nothing to see. When
stdout is not a terminal (a pipe, a log), a frame is printed only when a run changes, without
escape sequences. Ctrl-C exits 0: leaving a live view is not a failure.
"""

from __future__ import annotations

import io
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, TextIO

from postflightd.inert import inert
from postflightd.reporters.status import report_status_text
from postflightd.runs.status import WRITING, RootStatus, RunStatus

HOME: Final = "\x1b[H"
CLEAR_ALL: Final = "\x1b[2J"
CLEAR_EOL: Final = "\x1b[K"
CLEAR_BELOW: Final = "\x1b[J"
HIGHLIGHT: Final = "\x1b[1;7m"
RESET: Final = "\x1b[0m"
HIDE_CURSOR: Final = "\x1b[?25l"
SHOW_CURSOR: Final = "\x1b[?25h"
#: Transitions listed under the table.
RECENT: Final = 6

RunKey = tuple[str, str]


def _signature(run: RunStatus) -> tuple[object, ...]:
    return (
        run.status,
        run.state,
        run.session,
        run.stage,
        run.phases_completed,
        run.phases_total,
    )


def _name(run: RunStatus) -> str:
    return f"task {run.task}" if run.task is not None else inert(run.file)


def _phases(run: RunStatus) -> str:
    if run.phases_completed is None and run.phases_total is None:
        return ""
    return f" {run.phases_completed if run.phases_completed is not None else '?'}/" + (
        f"{run.phases_total if run.phases_total is not None else '?'}"
    )


def describe_change(old: RunStatus | None, new: RunStatus | None) -> str | None:
    """One line for what happened to a run between two refreshes; None when nothing did."""
    if old is None and new is not None:
        return f"{_name(new)}: appeared ({new.state}, {inert(new.status or '?')})"
    if new is None and old is not None:
        return f"{_name(old)}: gone (post-flighted or removed; was {old.state})"
    if old is None or new is None or _signature(old) == _signature(new):
        return None
    # Status, session and stage are what the agent wrote: made inert before they reach the
    # terminal (an escape sequence in a stage must not move the cursor).
    if old.session != new.session:
        return f"{_name(new)}: new session {inert(new.session or '?')} ({new.state})"
    if old.state != new.state or old.status != new.status:
        return (
            f"{_name(new)}: {inert(old.status or '?')} {old.state} -> "
            f"{inert(new.status or '?')} {new.state}"
        )
    return f"{_name(new)}: {inert(new.stage or 'progress')}{_phases(new)}"


@dataclass(slots=True)
class LiveView:
    """What the live view remembers between refreshes. Pure: the caller passes the clock."""

    hold_s: float
    runs: dict[RunKey, RunStatus] = field(default_factory=dict)
    hot: dict[RunKey, float] = field(default_factory=dict)
    recent: deque[str] = field(default_factory=lambda: deque(maxlen=RECENT))
    frames: int = 0

    def update(self, statuses: Sequence[RootStatus], now: float, clock: str) -> bool:
        """Take a new reading; True when any run changed since the last one."""
        current: dict[RunKey, RunStatus] = {}
        for status in statuses:
            for run in status.runs:
                key = (str(status.root), run.file)
                if run.state != WRITING:
                    current[key] = run
                elif key in self.runs:
                    # Caught mid-write: the run is what it was until the file is whole again.
                    current[key] = self.runs[key]
        changed = False
        if self.frames:
            for key in sorted(self.runs.keys() | current.keys()):
                line = describe_change(self.runs.get(key), current.get(key))
                if line is None:
                    continue
                changed = True
                self.recent.appendleft(f"{clock}  {line}")
                if key in current:
                    self.hot[key] = now + self.hold_s
        self.hot = {k: t for k, t in self.hot.items() if t > now and k in current}
        self.runs = current
        self.frames += 1
        return changed

    def lines(
        self, statuses: Sequence[RootStatus], header: str, width: int, ansi: bool
    ) -> list[str]:
        """The frame: header, the ``status`` table (changed rows highlighted), transitions."""
        buf = io.StringIO()
        report_status_text(statuses, buf)
        table = buf.getvalue().splitlines()
        keys = _row_keys(statuses)
        if len(keys) != len(table):
            keys = [None] * len(table)  # the table's layout is not the one expected: no marks
        out = [_fit(header, width)]
        for line, key in zip(table, keys, strict=True):
            text = _fit(line, width)
            if key is not None and key in self.hot:
                text = f"{HIGHLIGHT}{text}{RESET}" if ansi else f"{text}  <- changed"
            out.append(text)
        if self.recent:
            out.append("")
            out.append("recent transitions:")
            out.extend(_fit(f"  {r}", width) for r in self.recent)
        return out


def _row_keys(statuses: Sequence[RootStatus]) -> list[RunKey | None]:
    """For each line ``report_status_text`` prints, the run it shows (None: not a run row)."""
    keys: list[RunKey | None] = []
    for entry in statuses:
        keys.append(None)  # the root line
        healing = entry.healing or {}
        if healing.get("reapplied") or healing.get("overwritten"):
            keys.append(None)  # the "healed:" line
        if entry.note or not entry.runs:
            keys.append(None)
            continue
        keys.append(None)  # the column header
        keys.extend((str(entry.root), r.file) for r in entry.runs)
    keys.append(None)  # the summary line
    return keys


def _fit(line: str, width: int) -> str:
    # A wrapped line would push the frame down and break the redraw in place.
    return line if len(line) <= width else line[: max(width - 1, 1)] + "\u2026"


def draw(out: TextIO, lines: Sequence[str], first: bool) -> None:
    """Redraw in place: home, each line cleared to its end, everything below cleared."""
    body = "".join(f"{line}{CLEAR_EOL}\n" for line in lines)
    out.write(f"{CLEAR_ALL if first else ''}{HOME}{body}{CLEAR_BELOW}")
    out.flush()
