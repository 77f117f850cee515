"""The forked parallel check: a scan large enough to fork gives what one process gives."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from helpers.documents import researched_doc, task_entry
from helpers.project import project, write_artifact, write_meta
from postflightd.config import Config, policy_from
from postflightd.pipeline import apply as pipeline
from postflightd.pipeline import parallel


def test_parallel_scan_equals_sequential_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scan large enough to fork reports exactly what a single process reports."""
    n = parallel.PARALLEL_MIN_FILES + 10
    root = project(tmp_path, [task_entry(i, f"t{i}") for i in range(1, n + 1, 2)])
    for i in range(1, n + 1):
        doc = researched_doc(f"{i}_t{i}")
        if i % 7 == 0:
            doc["status"] = "completed"
        if i % 5 == 0:
            write_artifact(root, f"specs/{i}_t{i}/reports/research-001.md")
        write_meta(root, f"{i}_t{i}", doc if i % 11 else '{"status": ')
    config = Config()
    policy = policy_from(config)
    now = datetime.now(UTC)
    forked = pipeline.scan([root], config, policy, now).to_json()
    monkeypatch.setattr(parallel, "PARALLEL_MIN_FILES", 10**9)
    single = pipeline.scan([root], config, policy, now).to_json()
    assert forked == single
    assert forked["summary"]["files"] == n
    codes = {f["code"] for file in forked["files"] for f in file["findings"]}
    assert {"PF102", "PF203", "PF502", "PF600"} <= codes


def _mixed_project(tmp_path: Path, n: int) -> Path:
    root = project(tmp_path, [task_entry(i, f"t{i}") for i in range(1, n + 1, 2)])
    for i in range(1, n + 1):
        doc = researched_doc(f"{i}_t{i}")
        if i % 7 == 0:
            doc["status"] = "completed"
        write_meta(root, f"{i}_t{i}", doc if i % 11 else '{"status": ')
    return root


@pytest.mark.parametrize("workers", [2, 3, 4])
def test_any_number_of_workers_taking_chunks_from_the_queue_gives_the_sequential_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    """More workers than cores still share the chunks so that each is checked once, and the
    output comes in task order (chunks of 7 files: many, taken in any order)."""
    n = 300
    root = _mixed_project(tmp_path, n)
    config, now = Config(), datetime.now(UTC)
    policy = policy_from(config)
    single = pipeline.scan([root], config, policy, now).to_json()
    monkeypatch.setattr(parallel, "worker_count", lambda files: workers)
    monkeypatch.setattr(parallel, "CHUNK_FILES", 7)
    forked = pipeline.scan([root], config, policy, now).to_json()
    assert forked == single
    assert [f["task"] for f in forked["files"]] == list(range(1, n + 1))


def test_a_worker_that_dies_mid_scan_loses_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker killed while it checks a chunk it took: that chunk, and the ones the worker
    would have taken, are checked by this process; nothing is missing, nothing twice."""
    n = 200
    root = _mixed_project(tmp_path, n)
    config, now = Config(), datetime.now(UTC)
    policy = policy_from(config)
    single = pipeline.scan([root], config, policy, now).to_json()
    parent = os.getpid()
    real_row = parallel._row
    seen = {"rows": 0}

    def dying_row(report: Any, positions: bool = False) -> Any:
        seen["rows"] += 1
        if os.getpid() != parent and seen["rows"] > 20:
            os._exit(9)  # as a worker killed by the OOM killer would end
        return real_row(report, positions)

    monkeypatch.setattr(parallel, "_row", dying_row)
    monkeypatch.setattr(parallel, "worker_count", lambda files: 2)
    monkeypatch.setattr(parallel, "CHUNK_FILES", 8)
    forked = pipeline.scan([root], config, policy, now).to_json()
    assert forked == single


def test_the_queue_hands_out_each_chunk_once_in_order_then_says_it_is_empty() -> None:
    queue = parallel._ChunkQueue.create(5)
    assert queue is not None
    queue.close_writer()
    assert [queue.take() for _ in range(7)] == [0, 1, 2, 3, 4, None, None]
    queue.close()


def test_more_chunk_numbers_than_a_pipe_holds_make_no_queue_rather_than_wait() -> None:
    """Nobody reads the queue before the fork: numbers that do not fit in the pipe (four
    megabytes, past the largest pipe a process may ask for; a user past the pipe quota gets
    one page) make no queue, and one process checks everything, instead of waiting forever."""
    before = len(os.listdir("/proc/self/fd"))
    assert parallel._ChunkQueue.create(1_000_000) is None
    assert len(os.listdir("/proc/self/fd")) == before
