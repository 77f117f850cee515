"""The report as one self-contained HTML page: inline SVG charts made here, no script, no network.

The page is read on a phone as often as on a desk: the charts are SVGs with a viewBox (they
scale to the width; below 560 px they keep 520 px, so that their text stays legible, and
scroll sideways), wide tables scroll inside their own box, and colours follow the reader's
light or dark preference. Every value from the journal is agent-written data: control
characters are made visible and the text is HTML-escaped, in content and in attributes alike.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from typing import Final

from postflightd.inert import inert
from postflightd.stats.figures import (
    OUTCOMES,
    SUCCESS,
    Group,
    Report,
    human,
    outcome_mix,
    success_rate,
)
from postflightd.words import counted, plural

#: Bins of each duration histogram.
BINS: Final = 20
#: Bars drawn at most in the agents and codes charts (the tables list every one).
MAX_BARS: Final = 20
WIDTH: Final = 640
LABEL_W: Final = 190
ROW_H: Final = 22


def esc(value: object) -> str:
    """Journal text as HTML text or attribute value: inert, then escaped (quotes included)."""
    return html.escape(inert(str(value)), quote=True)


def _num(x: float) -> str:
    return f"{x:.1f}".rstrip("0").rstrip(".")


def _short(text: str, n: int = 26) -> str:
    return text if len(text) <= n else text[: n - 1] + "\u2026"


# --- charts -----------------------------------------------------------------------------------


def _svg(chart: str, title: str, height: float, body: Iterable[str]) -> str:
    return (
        f'<svg class="chart" data-chart="{esc(chart)}" viewBox="0 0 {WIDTH} {_num(height)}" '
        f'role="img"><title>{esc(title)}</title>' + "".join(body) + "</svg>"
    )


def outcomes_chart(agents: Sequence[Group]) -> str:
    """One stacked bar per agent type: its runs split by outcome (shares of 100 %)."""
    shown = list(agents[:MAX_BARS])
    bar_w = WIDTH - LABEL_W - 60
    body: list[str] = []
    for i, g in enumerate(shown):
        y = 4 + i * ROW_H
        body.append(f'<g class="bar" data-label="{esc(g.name)}" data-value="{g.runs}">')
        body.append(
            f'<text x="{LABEL_W - 6}" y="{y + 14}" text-anchor="end" class="label">'
            f"{esc(_short(g.name))}</text>"
        )
        x = float(LABEL_W)
        for outcome in OUTCOMES:
            n = g.outcomes.get(outcome, 0)
            if not n:
                continue
            w = bar_w * n / g.runs
            body.append(
                f'<rect class="o-{outcome}" x="{_num(x)}" y="{y}" width="{_num(w)}" '
                f'height="{ROW_H - 6}"><title>{esc(g.name)}: {outcome} {n}</title></rect>'
            )
            x += w
        body.append(
            f'<text x="{LABEL_W + bar_w + 6}" y="{y + 14}" class="value">{g.runs}</text></g>'
        )
    legend_y = 8 + len(shown) * ROW_H
    body.extend(_legend(legend_y))
    return _svg("outcomes-by-agent", "Outcome mix per agent type", legend_y + 30, body)


def _legend(y: float) -> list[str]:
    out = ['<g class="legend">']
    per_row = 5
    for i, outcome in enumerate(OUTCOMES):
        x = 10 + (i % per_row) * 125
        yy = y + (i // per_row) * 16
        out.append(
            f'<rect class="o-{outcome}" x="{x}" y="{_num(yy - 9)}" width="10" height="10"/>'
            f'<text x="{x + 14}" y="{_num(yy)}" class="small">{outcome}</text>'
        )
    out.append("</g>")
    return out


def _mark(cls: str, value: float, x: float, y_label: float, y0: float, y1: float, text: str) -> str:
    """A vertical line at ``x`` with its label above the plot, kept inside the chart."""
    anchor = "end" if x > WIDTH * 0.7 else "start"
    tx = x - 3 if anchor == "end" else x + 3
    return (
        f'<g class="{cls}" data-value="{_num(value)}"><line x1="{_num(x)}" y1="{_num(y0)}" '
        f'x2="{_num(x)}" y2="{_num(y1)}"/><text x="{_num(tx)}" y="{_num(y_label)}" '
        f'text-anchor="{anchor}" class="small">{text}</text></g>'
    )


def duration_chart(group: Group, timeouts: Sequence[float]) -> str:
    """A histogram of one operation's run durations, its timeout(s) and p95 marked."""
    values = group.durations
    top = max([*values, *timeouts, 1.0]) * 1.05
    counts = [0] * BINS
    for v in values:
        counts[min(int(v / top * BINS), BINS - 1)] += 1
    peak = max(counts) or 1
    # Two label rows above the plot (timeout, p95), so that no label sits on a bar.
    left, right, plot_h, base = 40, WIDTH - 10, 140.0, 180.0
    span = right - left
    bin_w = span / BINS
    body: list[str] = [
        f'<line class="axis" x1="{left}" y1="{base}" x2="{right}" y2="{base}"/>',
        f'<text x="{left - 4}" y="{base - plot_h + 4}" text-anchor="end" class="small">'
        f"{peak}</text>",
        f'<text x="{left - 4}" y="{base}" text-anchor="end" class="small">0</text>',
    ]
    for i, n in enumerate(counts):
        h = plot_h * n / peak
        lo, hi = top * i / BINS, top * (i + 1) / BINS
        body.append(
            f'<g class="bar" data-value="{n}" data-from="{_num(lo)}" data-to="{_num(hi)}">'
            f'<rect class="dur" x="{_num(left + i * bin_w + 1)}" y="{_num(base - h)}" '
            f'width="{_num(bin_w - 2)}" height="{_num(h)}">'
            f"<title>{human(lo)}\u2013{human(hi)}: {counted(n, 'run')}</title>"
            "</rect></g>"
        )
    for t in sorted(set(timeouts)):
        x = left + span * t / top
        body.append(_mark("timeout", t, x, 12, 16, base, f"timeout {human(t)}"))
    p95 = group.p95_s
    if p95 is not None:
        x = left + span * p95 / top
        body.append(_mark("p95", p95, x, 26, 30, base, f"p95 {human(p95)}"))
    for frac, anchor in (
        (0, "start"),
        (0.25, "middle"),
        (0.5, "middle"),
        (0.75, "middle"),
        (1, "end"),
    ):
        body.append(
            f'<text x="{_num(left + span * frac)}" y="{base + 16}" text-anchor="{anchor}" '
            f'class="small">{human(top * frac)}</text>'
        )
    return _svg(
        f"durations-{group.name}", f"Durations of {group.name} runs", base + 24, body
    ).replace('class="chart"', f'class="chart" data-operation="{esc(group.name)}"', 1)


def codes_chart(report: Report) -> str:
    """One bar per finding code: the files it was found in."""
    shown = report.codes[:MAX_BARS]
    peak = max((c.files for c in shown), default=1) or 1
    bar_w = WIDTH - 90 - 70
    body: list[str] = []
    for i, c in enumerate(shown):
        y = 4 + i * ROW_H
        w = max(bar_w * c.files / peak, 1)
        sev = "error" if c.severity == "error" else "warning"
        body.append(
            f'<g class="bar" data-label="{esc(c.code)}" data-value="{c.files}">'
            f'<text x="84" y="{y + 14}" text-anchor="end" class="label">{esc(c.code)}</text>'
            f'<rect class="sev-{sev}" x="90" y="{y}" width="{_num(w)}" height="{ROW_H - 6}">'
            f"<title>{esc(c.code)}: {counted(c.files, 'file')}, "
            f"{counted(c.count, 'finding')}</title></rect>"
            f'<text x="{_num(90 + w + 6)}" y="{y + 14}" class="value">{c.files}</text></g>'
        )
    return _svg("findings-by-code", "Files per finding code", 8 + len(shown) * ROW_H, body)


def days_chart(report: Report) -> str:
    """One bar per day from the first run to the last; the part in trouble drawn darker."""
    days = report.days
    peak = max((n for _, n, _ in days), default=1) or 1
    left, right, plot_h, base = 40, WIDTH - 10, 150.0, 160.0
    # A few days must not become a few wall-wide bars.
    slot = min((right - left) / max(len(days), 1), 48.0)
    body: list[str] = [
        f'<line class="axis" x1="{left}" y1="{base}" x2="{right}" y2="{base}"/>',
        f'<text x="{left - 4}" y="{base - plot_h + 4}" text-anchor="end" class="small">'
        f"{peak}</text>",
    ]
    gap = min(2.0, slot / 4)
    for i, (day, n, trouble) in enumerate(days):
        x = left + i * slot + gap / 2
        h = plot_h * n / peak
        th = plot_h * trouble / peak
        body.append(
            f'<g class="bar" data-label="{day}" data-value="{n}" data-trouble="{trouble}">'
            f'<rect class="day" x="{_num(x)}" y="{_num(base - h)}" width="{_num(slot - gap)}" '
            f'height="{_num(h)}"><title>{day}: {counted(n, "run")}, {trouble} in trouble'
            "</title></rect>"
            f'<rect class="o-failed" x="{_num(x)}" y="{_num(base - th)}" '
            f'width="{_num(slot - gap)}" height="{_num(th)}"/></g>'
        )
    if days:
        ticks = sorted({0, len(days) // 2, len(days) - 1})
        for i in ticks:
            anchor = "start" if i == 0 else "end" if i == len(days) - 1 else "middle"
            x = (
                left
                + i * slot
                + (0 if anchor == "start" else slot if anchor == "end" else slot / 2)
            )
            body.append(
                f'<text x="{_num(x)}" y="{base + 16}" text-anchor="{anchor}" class="small">'
                f"{days[i][0]}</text>"
            )
    return _svg("runs-per-day", "Runs per day", base + 24, body)


# --- the page ---------------------------------------------------------------------------------

_CSS: Final = """
:root{--fg:#1d232b;--muted:#5d6773;--bg:#fff;--card:#f5f7f9;--line:#d5dbe1;
--researched:#2a9d8f;--planned:#3a86c8;--implemented:#2b8a3e;--partial:#e9a23b;
--failed:#d1495b;--blocked:#7b4fa3;--stuck:#b5651d;--invalid:#8d99ae;
--interrupted:#6d4c41;--running:#b8c2cc;--bar:#3a86c8}
@media (prefers-color-scheme:dark){:root{--fg:#e6e9ed;--muted:#a2abb5;--bg:#14181d;
--card:#1d232b;--line:#36404a;--invalid:#6c7789;--running:#55606b}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);
font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
main{max-width:980px;margin:0 auto;padding:16px}
h1{font-size:1.45em;margin:.2em 0}h2{font-size:1.15em;margin:1.6em 0 .5em;
border-bottom:1px solid var(--line);padding-bottom:.2em}h3{font-size:1em;margin:1em 0 .3em}
.muted{color:var(--muted)}code{font-size:.92em;overflow-wrap:anywhere}
.tiles{display:grid;grid-template-columns:repeat(auto-fit,minmax(130px,1fr));gap:8px}
.tile{background:var(--card);border-radius:6px;padding:8px 10px}
.tile b{display:block;font-size:1.4em}
.scroll{overflow-x:auto;-webkit-overflow-scrolling:touch}
table{border-collapse:collapse;width:100%;font-size:.92em}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid var(--line);vertical-align:top}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
figure{margin:.6em 0 1.2em}figcaption{color:var(--muted);font-size:.88em}
svg.chart{width:100%;height:auto;display:block}
@media (max-width:560px){figure{overflow-x:auto}svg.chart{min-width:520px}}
svg text{fill:var(--fg);font-size:12px}svg text.small{font-size:10px;fill:var(--muted)}
.axis{stroke:var(--line)}rect.dur,rect.day{fill:var(--bar)}
.timeout line{stroke:var(--failed);stroke-width:2;stroke-dasharray:5 3}
.p95 line{stroke:var(--fg);stroke-width:1;stroke-dasharray:2 2}
.sev-error{fill:var(--failed)}.sev-warning{fill:var(--partial)}
.verdict-raise,.verdict-lower{font-weight:600;color:var(--failed)}
"""


def _outcome_css() -> str:
    return "".join(f".o-{o}{{fill:var(--{o})}}" for o in OUTCOMES)


def _table(head: Sequence[str], rows: Iterable[Sequence[str]], numeric: set[int]) -> str:
    """``rows`` hold HTML already escaped by the caller."""
    th = "".join(f"<th{' class=n' if i in numeric else ''}>{h}</th>" for i, h in enumerate(head))
    body = "".join(
        "<tr>"
        + "".join(f"<td{' class=n' if i in numeric else ''}>{c}</td>" for i, c in enumerate(r))
        + "</tr>"
        for r in rows
    )
    table = f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"
    return f'<div class="scroll">{table}</div>'


def _group_rows(groups: Sequence[Group]) -> list[list[str]]:
    return [
        [
            esc(g.name),
            str(g.runs),
            success_rate(g),
            human(g.median_s),
            human(g.p95_s),
            esc(outcome_mix(g)),
        ]
        for g in groups
    ]


def render_html(report: Report) -> str:
    """The whole page, as one string."""
    out: list[str] = []
    add = out.append
    period = (
        f"{esc(report.first_ts[:10])} to {esc(report.last_ts[:10])}"
        if report.first_ts and report.last_ts
        else "no runs recorded"
    )
    add(
        "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width,initial-scale=1">'
        "<title>postflightd report</title>"
        f"<style>{_CSS}{_outcome_css()}</style></head><body><main>"
    )
    add("<h1>postflightd report</h1>")
    add(
        f'<p class="muted">{counted(report.runs, "run")}, {period}'
        + (f" (since {esc(report.since[:10])})" if report.since else "")
        + f"; generated {esc(report.generated)}.<br>Roots: "
        + ", ".join(f"<code>{esc(r)}</code>" for r in report.roots)
        + "</p>"
    )
    ok = sum(report.outcomes.get(o, 0) for o in SUCCESS)
    tiles = [
        ("runs", str(report.runs)),
        ("succeeded", f"{round(100 * ok / report.runs)}%" if report.runs else "-"),
        (
            "failed / blocked / partial",
            str(sum(report.outcomes.get(o, 0) for o in ("failed", "blocked", "partial"))),
        ),
        ("invalid", str(report.outcomes.get("invalid", 0))),
        ("stuck", str(report.outcomes.get("stuck", 0))),
    ]
    add(
        '<div class="tiles">'
        + "".join(
            f'<div class="tile"><b>{v}</b><span class="muted">{k}</span></div>' for k, v in tiles
        )
        + "</div>"
    )
    if report.unattributed:
        add(
            f'<p class="muted">{counted(report.unattributed, "run")} '
            f"{plural(report.unattributed, 'has')} no agent type on record: its "
            "file named none, or an older postflightd recorded the run without one (it kept "
            "only an applied file's content).</p>"
        )

    add("<h2>Outcomes per agent type</h2>")
    add(
        f"<figure>{outcomes_chart(report.agents)}<figcaption>Share of each agent type's runs "
        "by outcome; the number is its runs.</figcaption></figure>"
    )
    head = ["", "runs", "success", "median", "p95", "outcomes"]
    add("<h3>By operation</h3>")
    add(_table(["operation", *head[1:]], _group_rows(report.operations), {1, 2, 3, 4}))
    add("<h3>By agent type</h3>")
    add(_table(["agent type", *head[1:]], _group_rows(report.agents), {1, 2, 3, 4}))

    add("<h2>Durations and timeouts</h2>")
    for group in report.operations:
        if not group.durations or group.name == "unknown":
            continue
        marks = [t.timeout_s for t in report.timeouts if t.operation == group.name]
        add(f"<h3>{esc(group.name)}</h3>")
        add(
            f"<figure>{duration_chart(group, marks)}<figcaption>"
            f"{counted(len(group.durations), 'timed run')}: "
            f"median {human(group.median_s)}, p95 {human(group.p95_s)}; "
            "the dashed red line is the configured timeout.</figcaption></figure>"
        )
    if report.timeouts:
        rows = [
            [
                esc(t.operation),
                f"<code>{esc(t.root)}</code>",
                human(t.timeout_s),
                human(t.p95_s),
                human(t.longest_success_s),
                str(t.timed_runs),
                f'<span class="verdict-{t.verdict}">{esc(t.advice)}</span>',
            ]
            for t in report.timeouts
        ]
        add(
            _table(
                ["operation", "root", "timeout", "p95", "longest success", "runs", "advice"],
                rows,
                {2, 3, 4, 5},
            )
        )
    else:
        add('<p class="muted">No timed runs.</p>')

    add("<h2>What the agents get wrong</h2>")
    if report.codes:
        add(
            f"<figure>{codes_chart(report)}<figcaption>Validated files showing each code "
            f"(of {report.validated_files}).</figcaption></figure>"
        )
        rows = []
        for c in report.codes:
            share = c.files / report.validated_files if report.validated_files else 0.0
            where = f"<code>{esc(c.example_location)}</code>: " if c.example_location else ""
            rows.append(
                [
                    f"<b>{esc(c.code)}</b> {esc(c.severity)}",
                    str(c.count),
                    str(c.files),
                    f"{share:.0%}",
                    ", ".join(f"{esc(a)} ({n})" for a, n in c.top_agents),
                    where + esc(c.example),
                ]
            )
        add(_table(["code", "count", "files", "share", "top agents", "example"], rows, {1, 2, 3}))
    else:
        add('<p class="muted">No findings.</p>')
    if report.near_misses:
        add("<h3>Near-miss statuses</h3>")
        rows = [
            [f"<code>{esc(n.status)}</code>", esc(n.meant), str(n.runs)] for n in report.near_misses
        ]
        add(_table(["written", "meant", "runs"], rows, {2}))

    add("<h2>Stuck and interrupted runs</h2>")
    if report.incidents:
        rows = [
            [
                esc(i.kind),
                esc(i.task if i.task is not None else i.file),
                f"<code>{esc(i.session or '-')}</code>",
                esc(i.agent),
                esc(i.flagged[:19].replace("T", " ")),
                esc(i.ended),
            ]
            for i in report.incidents
        ]
        add(_table(["kind", "task", "session", "agent", "flagged", "how it ended"], rows, set()))
    else:
        add('<p class="muted">None.</p>')

    add("<h2>Runs per day</h2>")
    if report.days:
        add(
            f"<figure>{days_chart(report)}<figcaption>Runs per day (UTC, by first sight); the "
            "darker part did not do its job (partial, failed, blocked, stuck, invalid, "
            "interrupted).</figcaption></figure>"
        )
    else:
        add('<p class="muted">No runs.</p>')
    add("</main></body></html>\n")
    return "".join(out)
