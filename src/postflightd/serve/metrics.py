"""``/metrics``: the dashboard's figures in Prometheus' text format, from its own registry.

Each scrape reads the journal (one pass of SQL aggregates, reused while the journal has no new
row) and the poller's snapshot of the trees. Agents on many machines are seen together by
scraping every machine's dashboard into one Prometheus; nothing here aggregates across hosts.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Final

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from postflightd.serve import feed

if TYPE_CHECKING:
    from postflightd.serve.live import Poller

_PREFIX: Final = "postflightd"


class _Cache:
    """The journal's figures, computed again only when its last row id moved."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.journal_id = -1
        self.figures: feed.JournalFigures | None = None


class DashboardCollector:
    """Yields every family on each scrape (a custom collector: no global state)."""

    def __init__(self, poller: Poller) -> None:
        self.poller = poller
        self.cache = _Cache()

    def _journal_figures(self) -> feed.JournalFigures | None:
        with self.cache.lock:
            conn = feed.connect(self.poller.journal_path)
            if conn is None:
                return None
            try:
                journal_id = feed.last_id(conn)
                if journal_id != self.cache.journal_id or self.cache.figures is None:
                    self.cache.figures = feed.journal_figures(conn, self.poller.root_names)
                    self.cache.journal_id = journal_id
            except sqlite3.Error:
                return self.cache.figures
            finally:
                conn.close()
            return self.cache.figures

    def collect(self) -> Iterator[Metric]:
        doc = self.poller.state.snapshot_doc
        runs = [*doc.get("runs", []), *doc.get("waiting", [])]
        in_flight = GaugeMetricFamily(
            f"{_PREFIX}_runs_in_flight",
            "Runs with a metadata file on disk now, by state (running, stuck, writing, waiting)",
            labels=["state"],
        )
        for state in ("running", "stuck", "writing", "waiting"):
            in_flight.add_metric([state], sum(1 for r in runs if r.get("state") == state))
        yield in_flight
        yield GaugeMetricFamily(
            f"{_PREFIX}_stuck_runs",
            "Runs in progress past their operation's timeout now",
            value=sum(1 for r in runs if r.get("state") == "stuck"),
        )
        yield GaugeMetricFamily(
            f"{_PREFIX}_invalid_files",
            "Metadata files on disk now that break the format",
            value=len(doc.get("invalid", [])),
        )
        figures = self._journal_figures()
        if figures is None:
            return
        rows = GaugeMetricFamily(
            f"{_PREFIX}_journal_rows", "Rows the journal holds for these roots"
        )
        rows.add_metric([], figures.rows)
        yield rows
        outcomes = CounterMetricFamily(
            f"{_PREFIX}_outcomes",
            "Outcomes the journal holds: applied statuses, and stuck and interrupted runs",
            labels=["status", "agent"],
        )
        for (status, agent), n in sorted(figures.outcomes.items()):
            outcomes.add_metric([status, agent], n)
        yield outcomes
        findings = CounterMetricFamily(
            f"{_PREFIX}_findings", "Findings recorded at validation, by code", labels=["code"]
        )
        for code, n in sorted(figures.findings.items()):
            findings.add_metric([code], n)
        yield findings
        counts = figures.latency_counts
        cumulative: list[tuple[str, float]] = []
        running = 0
        for bound, n in zip([*map(str, feed.LATENCY_BUCKETS), "+Inf"], counts, strict=True):
            running += n
            cumulative.append((bound, running))
        yield HistogramMetricFamily(
            f"{_PREFIX}_apply_latency_seconds",
            "From the final file's validation to its outcome in state.json, per applied file",
            buckets=cumulative,
            sum_value=figures.latency_sum,
        )


def metrics_registry(poller: Poller) -> CollectorRegistry:
    """A registry of the dashboard's own (never the process-wide default one)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(DashboardCollector(poller))
    return registry


def metrics_text(registry: CollectorRegistry) -> bytes:
    return generate_latest(registry)
