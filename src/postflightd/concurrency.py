"""Work in other processes, one way for every command: ``process_pool``.

The standard library's ``ProcessPoolExecutor`` with the fork start method: the workers
inherit what this process has loaded (the rules, the type check's schema) and what the
``initializer`` is given (never pickled, so a closure will do); only each call's arguments and
result cross a pipe. One thing it leaves to its user, and a command's output needs: the
workers' standard streams go to the null device. The report is this process's alone, and a
worker that Ctrl-C (which reaches every process of the group) finds waiting for work would
print multiprocessing's traceback, where this process says what every interrupted command says.

A worker that dies breaks the pool: every call not yet answered raises, and the caller does
that work itself. Imported only by work large enough to pay for a process.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any

__all__ = ["Future", "ProcessPoolExecutor", "process_pool", "stop"]


def process_pool(
    workers: int,
    initializer: Callable[..., object] | None = None,
    initargs: tuple[Any, ...] = (),
) -> ProcessPoolExecutor | None:
    """``workers`` forked processes (started at the first ``submit``), each running
    ``initializer(*initargs)`` first; None where this system cannot fork (work here then)."""
    if workers < 1 or not hasattr(os, "fork"):
        return None
    import multiprocessing

    try:
        context = multiprocessing.get_context("fork")
    except ValueError:
        return None
    return ProcessPoolExecutor(
        workers, context, initializer=_quiet_worker, initargs=(initializer, initargs)
    )


def stop(pool: ProcessPoolExecutor) -> None:
    """Shut ``pool`` down: calls not begun are cancelled, and its workers are waited for.

    A ``submit`` that raised while starting the workers (no process to spare for the second)
    leaves the first waiting for work with nobody to tell it there is none, since the
    executor's own thread starts after them: those are ended here.
    """
    if getattr(pool, "_executor_manager_thread", True) is None:
        processes: dict[int, Any] = getattr(pool, "_processes", None) or {}
        for process in list(processes.values()):
            process.terminate()
            process.join()
    pool.shutdown(wait=True, cancel_futures=True)


def _quiet_worker(  # pragma: no cover - runs in the worker
    initializer: Callable[..., object] | None, initargs: tuple[Any, ...]
) -> None:
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)
    # And the streams' objects, which may write elsewhere than their descriptors.
    sys.stdout = sys.stderr = Path(os.devnull).open("w", encoding="utf-8")  # noqa: SIM115
    if initializer is not None:
        initializer(*initargs)
