"""Waiting for something to happen, with a deadline that only ends the wait."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest


def wait_until(what: str, cond: Callable[[], Any], timeout: float = 30.0) -> Any:
    """Poll ``cond`` until it returns something truthy, and return that; fail naming ``what``
    at the deadline. Deadlines are generous: the machines running the suite are shared."""
    deadline = time.monotonic() + timeout
    while not (value := cond()):
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.01)
    return value
