"""Reporters for ``report``: text (a terminal, an e-mail), JSON (a fixed shape, for
machines) and one HTML page (``reporters.report_html``).

Every value that came from the journal is agent-written data: in text it is made inert
(``inert``: control characters, line separators and bidirectional controls escaped, so a
value never moves the cursor, starts a line or reorders one), in JSON it is written with
``json_text``, and the HTML page escapes it as markup too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, TextIO

from postflightd.inert import inert, json_text
from postflightd.reporters import Reporter
from postflightd.reporters.style import Options
from postflightd.stats.figures import Group, Report, human, outcome_mix, success_rate
from postflightd.words import counted, plural

BAR_WIDTH: Final = 40


def _table(rows: Sequence[Sequence[str]], right: frozenset[int] = frozenset()) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for row in rows:
        cells = [
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        out.append("  " + "  ".join(cells).rstrip())
    return out


def _groups(title: str, column: str, groups: list[Group]) -> list[str]:
    lines = [title]
    if not groups:
        return [*lines, "  (no runs)"]
    rows = [[column, "RUNS", "SUCCESS", "MEDIAN", "P95", "OUTCOMES"]]
    rows += [
        [
            inert(g.name),
            str(g.runs),
            success_rate(g),
            human(g.median_s),
            human(g.p95_s),
            outcome_mix(g),
        ]
        for g in groups
    ]
    return lines + _table(rows, right=frozenset({1, 2, 3, 4}))


def report_text(report: Report, out: TextIO, options: Options | None = None) -> None:
    del options  # one shape
    out.write(_text(report))


def _text(report: Report) -> str:
    lines: list[str] = []
    since = f" (since {report.since[:10]})" if report.since else ""
    if not report.runs:
        # Nothing to tabulate: the command says so on stderr (``no_runs_recorded``).
        return ""
    period = (
        f"{report.first_ts[:10]} .. {report.last_ts[:10]}"
        if report.first_ts and report.last_ts
        else "dates unknown"
    )
    lines.append(
        f"postflightd report: {counted(report.runs, 'run')}, {period}{since}, "
        f"{counted(len(report.roots), 'root')}"
    )
    lines += [f"  {inert(r)}" for r in report.roots]
    if report.unattributed:
        lines.append(
            f"  {counted(report.unattributed, 'run')} {plural(report.unattributed, 'has')} "
            "no agent type on record (its file named none, or an older postflightd recorded "
            "it without one): shown as 'unknown'"
        )
    lines.append("")
    lines += _groups("By operation", "OPERATION", report.operations)
    lines.append("")
    lines += _groups("By agent type", "AGENT", report.agents)
    lines.append("")
    lines.append("Timeouts against reality")
    if report.timeouts:
        many = len({t.root for t in report.timeouts}) > 1
        rows = [[*(["ROOT"] if many else []), "OPERATION", "TIMEOUT", "P95", "LONGEST OK", "RUNS"]]
        for t in report.timeouts:
            rows.append(
                [
                    *([inert(t.root)] if many else []),
                    t.operation,
                    human(t.timeout_s),
                    human(t.p95_s),
                    human(t.longest_success_s),
                    str(t.timed_runs),
                ]
            )
        lines += _table(rows, right=frozenset(range(1 + many, 5 + many)))
        for t in report.timeouts:
            where = f" ({inert(t.root)})" if many else ""
            lines.append(f"  {t.operation}{where}: {t.advice}")
    else:
        lines.append("  (no timed runs)")
    lines.append("")
    lines += _findings(report)
    lines.append("")
    lines.append("Stuck and interrupted runs")
    if report.incidents:
        rows = [["KIND", "TASK", "SESSION", "AGENT", "FLAGGED", "HOW IT ENDED"]]
        for i in report.incidents:
            rows.append(
                [
                    i.kind,
                    str(i.task) if i.task is not None else inert(i.file),
                    inert(i.session or "-"),
                    inert(i.agent),
                    i.flagged[:19].replace("T", " "),
                    inert(i.ended),
                ]
            )
        lines += _table(rows)
    else:
        lines.append("  none")
    lines.append("")
    lines.append("Runs per day")
    if report.days:
        peak = max(n for _, n, _ in report.days) or 1
        for day, n, trouble in report.days:
            bar = "#" * max(round(BAR_WIDTH * n / peak), 1 if n else 0)
            note = f" ({trouble} in trouble)" if trouble else ""
            lines.append(f"  {day}  {bar:<{BAR_WIDTH}}  {n}{note}")
    else:
        lines.append("  (no runs)")
    return "\n".join(lines) + "\n"


def _findings(report: Report) -> list[str]:
    lines = [f"What the agents get wrong ({counted(report.validated_files, 'validated file')})"]
    if not report.codes:
        lines.append("  no findings")
    else:
        rows = [["CODE", "SEVERITY", "COUNT", "FILES", "SHARE", "TOP AGENTS"]]
        for c in report.codes:
            share = c.files / report.validated_files if report.validated_files else 0.0
            rows.append(
                [
                    inert(c.code),
                    inert(c.severity),
                    str(c.count),
                    str(c.files),
                    f"{share:.0%}",
                    ", ".join(f"{inert(a)} ({n})" for a, n in c.top_agents),
                ]
            )
        lines += _table(rows, right=frozenset({2, 3, 4}))
        lines.append("  Examples:")
        for c in report.codes:
            where = f"{inert(c.example_location)}: " if c.example_location else ""
            lines.append(f"    {inert(c.code)}  {where}{inert(c.example)}")
    if report.near_misses:
        lines.append("  Near-miss statuses (what the agent wrote -> what it meant):")
        for n in report.near_misses:
            lines.append(f"    {json_text(inert(n.status))} -> {n.meant}: {counted(n.runs, 'run')}")
    return lines


def report_json(report: Report, out: TextIO, options: Options | None = None) -> None:
    del options
    out.write(json_text(report.to_json(), indent=2) + "\n")


def report_html(report: Report, out: TextIO, options: Options | None = None) -> None:
    del options
    # Imported only when the page is asked for: text and JSON never load its code.
    from postflightd.reporters.report_html import render_html

    out.write(render_html(report))


REPORTERS: dict[str, Reporter[Report]] = {
    "text": report_text,
    "json": report_json,
    "html": report_html,
}
