"""Reporters for ``history``: the journal's rows, newest first."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, TextIO

from postflightd.inert import inert, json_text
from postflightd.reporters import Reporter
from postflightd.reporters.style import Options

if TYPE_CHECKING:
    from postflightd.journal.database import Observation


@dataclass(frozen=True, slots=True)
class History:
    """What ``history`` found: the rows, a note when older rows were pruned, and how asked."""

    rows: Sequence[Observation]
    note: str | None
    #: a filter was given (the empty answer says "for that filter")
    filtered: bool
    #: ``--show``: the text form adds each row's recorded file content
    show: bool


def report_text(history: History, out: TextIO, options: Options | None = None) -> None:
    """One line per row (the note first); ``--show`` adds the recorded file, indented."""
    del options  # the note is part of the listing
    if history.note:
        out.write(history.note + "\n")
    for r in history.rows:
        task_s = "-" if r.task is None else str(r.task)
        pruned_content = " (content pruned)" if r.kind == "postflighted" and not r.content else ""
        out.write(
            f"{inert(r.ts)}  {inert(r.kind):<13} task {task_s:<5} {inert(r.status or '-'):<12} "
            f"{inert(r.session or '-')}  {inert(r.root)}/{inert(r.file)}{pruned_content}\n"
        )
        if history.show and r.content is not None:
            # The recorded file, one output line per line of it (splitlines also splits on
            # CR, VT, FF, NEL, U+2028: each piece is then escaped whole).
            for line in r.content.splitlines():
                out.write(f"    {inert(line)}\n")
    if not history.rows:
        tail = " for that filter" if history.filtered else ""
        out.write(f"no observations recorded{tail}\n")


def report_json(history: History, out: TextIO, options: Options | None = None) -> None:
    """The rows as a JSON list; each always carries ``content`` (a fixed shape, --show or not).
    The note goes to the options' note stream (stderr): stdout holds the JSON only."""
    out.write(json_text([asdict(r) for r in history.rows], indent=2) + "\n")
    if history.note:
        (options or Options()).note_stream.write(history.note + "\n")


REPORTERS: dict[str, Reporter[History]] = {
    "text": report_text,
    "json": report_json,
}
