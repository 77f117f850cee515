"""Reporters for ``verify``: recorded outcomes the project no longer shows, and why."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final, TextIO

from postflightd.inert import inert, json_text
from postflightd.pipeline.verify import Verdict
from postflightd.reporters import Reporter
from postflightd.reporters.style import Options

if TYPE_CHECKING:
    from postflightd.pipeline.verify import VerifyReport


_EXPLAIN: Final = {
    Verdict.LOST: "state.json has the task's entry from before this postflight "
    "(a writer that ignored the lock put it back)",
    Verdict.REVERTED: "edited since: a value this outcome set is back to its old one "
    "(not repaired: edits are never fought)",
    Verdict.SUPERSEDED: "edited since: newer values replace this outcome's (kept)",
    Verdict.REMOVED: "the task is no longer in state.json active_projects",
    Verdict.TODO: "TODO.md's section no longer shows this outcome's status or links "
    "(not repaired: edit TODO.md)",
}


def report_text(report: VerifyReport, out: TextIO, options: Options | None = None) -> None:
    del options  # one shape
    for r in report.roots:
        if r.problem:
            out.write(f"{inert(str(r.root))}: {inert(r.problem)}\n")
        for note in r.notes:
            out.write(f"{inert(str(r.root))}: note: {inert(note)}\n")
    for c in report.listed():
        t = c.tracked.latest
        what = _EXPLAIN[c.judgement.verdict]
        if c.judgement.reverted:
            what += f"; reverted: {', '.join(c.judgement.reverted)}"
        if c.repaired:
            what += "; re-applied"
        elif c.judgement.verdict is Verdict.LOST:
            what += "; `postflightd verify --repair` re-applies it"
        out.write(
            f"{inert(t.root)}/{inert(t.file)}: task {t.task} {inert(t.status or '?')} "
            f"({t.ts}): {c.judgement.verdict.value}: {inert(what)}\n"
        )
    s = report.summary()
    parts = [f"{s[v.value]} {v.value}" for v in Verdict if v is not Verdict.SHOWN and s[v.value]]
    if s["repaired"]:
        parts.append(f"{s['repaired']} re-applied")
    out.write(
        f"{s['checked']} outcome(s) recorded since {report.since}: {s['shown']} shown"
        + (f", {', '.join(parts)}" if parts else "")
        + "\n"
    )


def report_json(report: VerifyReport, out: TextIO, options: Options | None = None) -> None:
    del options
    out.write(json_text(report.to_json(), indent=2) + "\n")


REPORTERS: Final[Mapping[str, Reporter[VerifyReport]]] = {
    "text": report_text,
    "json": report_json,
}
