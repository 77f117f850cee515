"""Reporters for ``verify``: recorded outcomes the project no longer shows, and why."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final, TextIO

from postflightd.inert import inert, json_text
from postflightd.pipeline.verify import Verdict
from postflightd.reporters import Reporter
from postflightd.reporters.style import Options, display_path
from postflightd.timestamps import iso_timestamp, parse_timestamp
from postflightd.words import counted

if TYPE_CHECKING:
    from postflightd.pipeline.verify import VerifyReport


_EXPLAIN: Final = {
    # What verify knows, not a guess at who: a `git checkout` or a restored copy leaves the
    # same trace as a writer that ignored the lock (the journal keeps task entries only).
    Verdict.LOST: "state.json is an older version than the journal's record of it: the "
    "task's entry is the one from before this outcome, which the journal holds as applied",
    Verdict.REVERTED: "edited since: a value this outcome set is back to its old one "
    "(not repaired: edits are never fought)",
    Verdict.SUPERSEDED: "edited since: newer values replace this outcome's (kept)",
    Verdict.REMOVED: "the task is no longer in state.json active_projects",
    Verdict.TODO: "TODO.md's section no longer shows this outcome's status or links "
    "(not repaired: edit TODO.md)",
}


def _second(ts: str) -> str:
    """A journal time to the second (it records microseconds)."""
    when = parse_timestamp(ts)
    return iso_timestamp(when) if when is not None else inert(ts)


def report_text(report: VerifyReport, out: TextIO, options: Options | None = None) -> None:
    """Paths shown from the current directory (absolute outside it), as ``scan`` shows them."""
    cwd = (options or Options()).cwd
    for r in report.roots:
        shown = inert(display_path(r.root, cwd))
        if r.problem:
            out.write(f"{shown}: {inert(r.problem)}\n")
        for note in r.notes:
            out.write(f"{shown}: note: {inert(note)}\n")
    for c in report.listed():
        t = c.tracked.latest
        what = _EXPLAIN[c.judgement.verdict]
        if c.judgement.reverted:
            what += f"; reverted: {', '.join(c.judgement.reverted)}"
        if c.repaired:
            what += "; re-applied"
        elif c.judgement.verdict is Verdict.LOST:
            what += "; `postflightd verify --repair` re-applies it"
        path = inert(display_path(f"{t.root}/{t.file}", cwd))
        out.write(
            f"{path}: task {t.task} {inert(t.status or '?')} "
            f"({_second(t.ts)}): {c.judgement.verdict.value}: {inert(what)}\n"
        )
    out.write(summary_line(report) + "\n")


#: How the summary counts each verdict but the outcomes still in place.
_COUNTED: Final = {
    Verdict.LOST: "lost",
    Verdict.REVERTED: "reverted by an edit",
    Verdict.SUPERSEDED: "replaced by later edits",
    Verdict.REMOVED: "whose task left state.json",
    Verdict.TODO: "missing from TODO.md",
}


def summary_line(report: VerifyReport) -> str:
    """``3 outcomes applied since ...: 2 still in state.json and TODO.md, 1 lost``."""
    s = report.summary()
    since = _second(report.since)
    checked, kept = s["checked"], s[Verdict.SHOWN.value]
    if not checked:
        return f"no outcome was applied since {since}: nothing to verify"
    if kept == checked:
        place = "still in state.json and TODO.md"
        in_place = place if checked == 1 else f"all {checked} {place}"
    else:
        in_place = f"{kept} still in state.json and TODO.md"
    parts = [in_place] if kept else []
    parts += [f"{s[v.value]} {words}" for v, words in _COUNTED.items() if s[v.value]]
    if s["repaired"]:
        parts.append(f"{s['repaired']} re-applied")
    return f"{counted(checked, 'outcome')} applied since {since}: " + ", ".join(parts)


def report_json(report: VerifyReport, out: TextIO, options: Options | None = None) -> None:
    del options
    out.write(json_text(report.to_json(), indent=2) + "\n")


REPORTERS: Final[Mapping[str, Reporter[VerifyReport]]] = {
    "text": report_text,
    "json": report_json,
}
