"""What the dashboard reads from the journal: outcomes as they land, and the figures ``/metrics``
exports.

Read-only connections (``stats.source.open_read_only``): the dashboard never creates,
migrates or locks the database the daemon writes. Every value from a row was written by an
agent: strings are made inert here, before any of it is sent.
"""

from __future__ import annotations

import bisect
import contextlib
import json
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from postflightd.errors import UsageError
from postflightd.inert import clip, inert, json_text
from postflightd.journal.database import format_ts
from postflightd.stats.source import open_read_only
from postflightd.timestamps import parse_timestamp

#: Rows a poll reads at most; a backlog larger than this is read over the next polls.
TAIL_BATCH: Final = 500
#: Findings sent per invalid file (the rest are counted).
MAX_FINDINGS: Final = 20
_TAIL_KINDS: Final = ("postflighted", "stuck", "interrupted", "validated", "incomplete")
#: Apply latency buckets (seconds): seen final → applied, usually tens of milliseconds.
LATENCY_BUCKETS: Final = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


def text(value: object) -> str | None:
    """An agent's value as display text: bounded and inert; None stays None."""
    if value is None:
        return None
    return inert(clip(str(value), 500))


def page_json(obj: Any) -> str:
    """JSON for the page: inert (``json_text``), and with ``<``, ``>`` and ``&`` as ``\\u``
    escapes, so that no markup appears in it even to a reader that ignores its media type.
    They can only occur inside strings, where the escape means the same character."""
    return json_text(obj).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def findings_json(findings: Sequence[Any]) -> list[dict[str, Any]]:
    """Findings (``Finding`` objects or journal dicts) as the page shows them, each with its
    fix: what the rule that found it built from this file's values (``Finding.fix``), never an
    example from the rule's explanation; "" when the rule names no one replacement."""
    out: list[dict[str, Any]] = []
    for f in findings[:MAX_FINDINGS]:
        raw = f if isinstance(f, dict) else {**f.to_json(), "fix": f.fix}
        out.append(
            {
                "code": text(raw.get("code", "")),
                "severity": text(raw.get("severity", "")),
                "location": text(raw.get("location", "")),
                "message": text(raw.get("message", "")),
                "fix": text(raw.get("fix") or ""),
            }
        )
    if len(findings) > MAX_FINDINGS:
        out.append(
            {
                "code": "",
                "severity": "",
                "location": "",
                "message": f"and {len(findings) - MAX_FINDINGS} more",
                "fix": "",
            }
        )
    return out


def _has_error(findings: list[dict[str, Any]]) -> bool:
    return any(f.get("severity") == "error" for f in findings if isinstance(f, dict))


def outcome_of_row(row: tuple[Any, ...]) -> dict[str, Any] | None:
    """A tail row as an outcome event, or None when it is not one (a valid validation, a
    progress update)."""
    rid, ts, kind, root, file, task, session, status, findings_raw, agent = row
    findings: list[dict[str, Any]] = []
    if kind == "validated":
        if status == "in_progress" or not findings_raw:
            return None
        try:
            parsed = json.loads(findings_raw)
        except ValueError:
            return None
        if not isinstance(parsed, list) or not _has_error(parsed):
            return None
        findings = findings_json([f for f in parsed if isinstance(f, dict)])
        outcome = "invalid"
    elif kind == "postflighted":
        outcome = "applied"
    elif kind == "incomplete":
        outcome = "incomplete"
        findings = findings_json(_parsed_findings(findings_raw))
    else:
        outcome = str(kind)
    return {
        "id": int(rid),
        "ts": str(ts),
        "outcome": outcome,
        "status": text(status),
        "root": text(root),
        "file": text(file),
        "task": task if isinstance(task, int) else None,
        "session": text(session),
        "agent": text(agent),
        "findings": findings,
        # An incomplete postflight's cause, as its finding says it (before the advice).
        "cause": text(findings[0]["message"].split(";", 1)[0])
        if outcome == "incomplete" and findings
        else None,
    }


def _parsed_findings(raw: object) -> list[dict[str, Any]]:
    if not isinstance(raw, str):
        return []
    try:
        parsed = json.loads(raw)
    except ValueError:
        return []
    return [f for f in parsed if isinstance(f, dict)] if isinstance(parsed, list) else []


def connect(path: Path) -> sqlite3.Connection | None:
    """A read-only connection, or None while there is no usable journal (yet)."""
    try:
        # Used from the poller's worker threads, one look at a time.
        conn = open_read_only(path, timeout_s=2.0, check_same_thread=False)
    except UsageError:
        return None
    try:
        conn.execute("SELECT 1 FROM observations LIMIT 1").fetchall()
    except sqlite3.Error:
        conn.close()
        return None
    conn.text_factory = lambda raw: raw.decode("utf-8", errors="replace")
    return conn


def last_id(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT max(id) FROM observations").fetchone()
    return int(row[0] or 0)


def tail(
    conn: sqlite3.Connection, after: int, roots: Sequence[str]
) -> tuple[int, list[dict[str, Any]]]:
    """Outcome events of the rows after id ``after`` under ``roots``, and the id read up to."""
    kinds = ", ".join("?" * len(_TAIL_KINDS))
    where_roots = ", ".join("?" * len(roots))
    agent = _agent_column(conn)
    # The rows and the last id from one snapshot: read apart, a row committed between the two
    # (the incomplete row a postflight writes just after its outcome) was counted as read and
    # never shown.
    with snapshot(conn):
        rows = conn.execute(
            "SELECT id, ts, kind, root, file, task, session, status, findings, "  # noqa: S608 - placeholders only
            f"{agent} FROM observations WHERE id > ? AND kind IN ({kinds}) "
            f"AND root IN ({where_roots}) ORDER BY id LIMIT ?",
            (after, *_TAIL_KINDS, *roots, TAIL_BATCH),
        ).fetchall()
        last = last_id(conn)
    events = [e for e in (outcome_of_row(r) for r in rows) if e is not None]
    if len(rows) == TAIL_BATCH:
        return int(rows[-1][0]), events
    return max(after, last), events


@contextlib.contextmanager
def snapshot(conn: sqlite3.Connection) -> Iterator[None]:
    """One read transaction: every query inside sees the journal as of its first read."""
    conn.execute("BEGIN")
    try:
        yield
    finally:
        conn.execute("COMMIT")


def recent(conn: sqlite3.Connection, roots: Sequence[str], count: int) -> list[dict[str, Any]]:
    """The last ``count`` outcome events, oldest first (what a page shows when it opens)."""
    kinds = ", ".join("?" * len(_TAIL_KINDS))
    where_roots = ", ".join("?" * len(roots))
    rows = conn.execute(
        "SELECT id, ts, kind, root, file, task, session, status, findings, "  # noqa: S608 - placeholders only
        f"{_agent_column(conn)} FROM observations WHERE +kind IN ({kinds}) "
        f"AND root IN ({where_roots}) ORDER BY id DESC LIMIT ?",
        (*_TAIL_KINDS, *roots, count * 4),
    ).fetchall()
    events = [e for e in (outcome_of_row(r) for r in rows) if e is not None][:count]
    return events[::-1]


def applied_since(conn: sqlite3.Connection, roots: Sequence[str], since: datetime) -> int:
    """How many outcomes were applied under ``roots`` at or after ``since`` (the header's
    "applied today")."""
    where_roots = ", ".join("?" * len(roots))
    stamp = format_ts(since)
    row = conn.execute(
        "SELECT count(*) FROM observations WHERE kind = 'postflighted' AND ts >= ? "  # noqa: S608 - placeholders only
        f"AND root IN ({where_roots})",
        (stamp, *roots),
    ).fetchone()
    return int(row[0] or 0)


def _columns(conn: sqlite3.Connection) -> set[str]:
    return {str(row[1]) for row in conn.execute("PRAGMA table_info(observations)")}


def _agent_column(conn: sqlite3.Connection) -> str:
    return "agent" if "agent" in _columns(conn) else "NULL"


@dataclass(slots=True)
class JournalFigures:
    """What ``/metrics`` exports from the journal, over every row it holds for the roots."""

    rows: int = 0
    #: (status, agent) -> runs: applied statuses, and ``stuck``, ``interrupted``
    outcomes: dict[tuple[str, str], int] = field(default_factory=dict)
    #: code -> findings recorded
    findings: dict[str, int] = field(default_factory=dict)
    #: seconds from the final file's validation to its application, per applied file, as
    #: counts per ``LATENCY_BUCKETS`` bucket (the last: above them all), their sum and count
    latency_counts: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS) + 1))
    latency_sum: float = 0.0


def journal_figures(conn: sqlite3.Connection, roots: Sequence[str]) -> JournalFigures:
    """One pass of SQL aggregates (the kind index keeps each to its own rows)."""
    figures = JournalFigures()
    where_roots = ", ".join("?" * len(roots))
    columns = _columns(conn)
    agent = "agent" if "agent" in columns else "NULL"
    # A leftover (PF607, journal version 5) was first seen final long after it was written:
    # when it ended is not known, so it is no apply latency.
    not_leftover = "AND p.leftover IS NOT 1 " if "leftover" in columns else ""
    figures.rows = int(
        conn.execute(
            f"SELECT count(*) FROM observations WHERE root IN ({where_roots})",  # noqa: S608 - placeholders only
            tuple(roots),
        ).fetchone()[0]
    )
    for status, who, n in conn.execute(
        f"SELECT CASE WHEN kind = 'postflighted' THEN coalesce(status, 'unknown') ELSE kind END, "  # noqa: S608 - placeholders only
        f"coalesce({agent}, 'unknown'), count(*) FROM observations "
        f"WHERE kind IN ('postflighted', 'stuck', 'interrupted') AND root IN ({where_roots}) "
        "GROUP BY 1, 2",
        tuple(roots),
    ):
        key = (text(status) or "unknown", text(who) or "unknown")
        figures.outcomes[key] = figures.outcomes.get(key, 0) + int(n)
    for code, n in conn.execute(
        "SELECT json_extract(f.value, '$.code'), count(*) FROM observations AS o, "  # noqa: S608 - placeholders only
        "json_each(o.findings) AS f WHERE o.kind = 'validated' AND o.findings <> '[]' "
        f"AND json_valid(o.findings) AND o.root IN ({where_roots}) GROUP BY 1",
        tuple(roots),
    ):
        if isinstance(code, str):
            name = text(code) or ""
            figures.findings[name] = figures.findings.get(name, 0) + int(n)
    for applied, seen in conn.execute(
        "SELECT p.ts, (SELECT v.ts FROM observations AS v WHERE v.session = p.session "  # noqa: S608 - placeholders only
        "AND v.id < p.id AND v.kind = 'validated' AND v.root = p.root AND v.file = p.file "
        "AND v.status IS p.status ORDER BY v.id DESC LIMIT 1) FROM observations AS p "
        f"WHERE p.kind = 'postflighted' AND p.session IS NOT NULL {not_leftover}"
        f"AND p.root IN ({where_roots})",
        tuple(roots),
    ):
        if not isinstance(seen, str) or not isinstance(applied, str):
            continue
        start, end = parse_timestamp(seen), parse_timestamp(applied)
        if start is None or end is None:
            continue
        delta = (end - start).total_seconds()
        if delta >= 0:
            figures.latency_counts[bisect.bisect_left(LATENCY_BUCKETS, delta)] += 1
            figures.latency_sum += delta
    return figures
