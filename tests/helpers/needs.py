"""What a test needs from the machine: where it is missing, a skip on a developer's machine and
a failure under CI.

CI (the environment variable ``CI`` set and not empty) installs every tool the tests use and
makes the devices they need (.ci/run); a test that skipped there would pass without testing
anything. So every skip for something the machine lacks goes through here: ``require_tool``
for a program, ``require_module`` for a Python module, ``unavailable`` for anything else (a
kernel feature, a right, a device). A skip that CI truly cannot avoid names its entry in
``ALLOWED_UNDER_CI``, which says why; ``.ci/run`` prints every skip with its reason at the end.

This module is a pytest plugin as well (tests/conftest.py loads it): under CI, a skip that did
not come through here with an allowance (``pytest.skip``, ``skipif``, ``importorskip``, a
plugin's) is turned into a failure, so no other way of skipping can hide a test from CI.
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
from collections.abc import Generator
from pathlib import Path
from types import ModuleType
from typing import Final, NoReturn

import pytest

#: Skips CI accepts, by name, each with the reason no CI machine can do better. Empty while
#: .ci/run provides everything the tests need.
ALLOWED_UNDER_CI: Final[dict[str, str]] = {}


#: What the reason of a skip CI accepts says (``unavailable`` with an allowance writes it).
ALLOWED_MARK: Final = "allowed under CI"
#: What a skip turned into a failure under CI says after its reason.
CI_FAILURE: Final = "under CI this is a failure (.ci/run must provide it)"


def under_ci() -> bool:
    """Whether this run is CI's (``CI`` set and not empty, as CI services set it)."""
    return bool(os.environ.get("CI"))


def unavailable(reason: str, *, allowance: str | None = None) -> NoReturn:
    """Skip for ``reason``; under CI fail instead, unless ``allowance`` names an entry of
    ``ALLOWED_UNDER_CI``. Called at the top of a test module (before the imports that need
    what is missing), it skips the whole module, or fails its collection under CI."""
    __tracebackhide__ = True  # the skip is reported at the test's line, not this one
    if allowance is not None:
        why = ALLOWED_UNDER_CI[allowance]  # a KeyError: an allowance nobody granted
        pytest.skip(f"{reason} ({ALLOWED_MARK}: {why})", allow_module_level=True)
    if under_ci():
        pytest.fail(f"{reason}: {CI_FAILURE}", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def require(condition: bool, reason: str) -> None:
    """``unavailable(reason)`` unless ``condition`` holds."""
    __tracebackhide__ = True
    if not condition:
        unavailable(reason)


def require_tool(name: str, reason: str) -> str:
    """The path of program ``name`` on PATH; ``unavailable`` when there is none."""
    __tracebackhide__ = True
    path = shutil.which(name)
    if path is None:
        unavailable(f"{name} is not installed: {reason}")
    return path


def require_module(name: str, reason: str) -> ModuleType:
    """Python module ``name``, imported; ``unavailable`` when it cannot be."""
    __tracebackhide__ = True
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        unavailable(f"cannot import {name} ({exc}): {reason}")


#: The modules of each optional extra (pyproject.toml's ``[project.optional-dependencies]``)
#: that its tests import.
EXTRAS: Final[dict[str, tuple[str, ...]]] = {
    "web": ("starlette", "uvicorn", "sse_starlette", "prometheus_client"),
    "mcp": ("mcp",),
}


def require_extra(extra: str, reason: str) -> None:
    """Every module of ``extra`` importable; ``unavailable`` naming the first that is not.

    At the top of a test module, before the imports that need the extra: the module skips
    as a whole on a machine without it (``pip install -e '.[dev]'`` brings every extra),
    and fails under CI."""
    __tracebackhide__ = True
    for name in EXTRAS[extra]:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            unavailable(f"cannot import {name} ({exc}): {reason} (the [{extra}] extra)")


def require_strace(scratch: Path) -> None:
    """strace installed and allowed to trace here (ptrace may be refused in a container);
    ``scratch``: a directory for its probe's output."""
    works = shutil.which("strace") is not None and (
        subprocess.run(
            ["strace", "-f", "-o", str(scratch / "strace-probe"), "true"],
            capture_output=True,
            check=False,
        ).returncode
        == 0
    )
    if not works:
        unavailable("strace is not installed here, or cannot trace (ptrace not permitted)")


# --- as a plugin: every other skip fails under CI -------------------------------------------


def _failed_under_ci(report: pytest.TestReport | pytest.CollectReport) -> None:
    """A skipped ``report`` without an allowance, made a failure with its reason, under CI."""
    if not (report.skipped and under_ci()) or hasattr(report, "wasxfail"):
        return
    longrepr = report.longrepr
    # A skip's report is (path, line, "Skipped: reason").
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    reason = reason.removeprefix("Skipped: ")
    if ALLOWED_MARK in reason:
        return
    where = f"{longrepr[0]}:{longrepr[1]}: " if isinstance(longrepr, tuple) else ""
    report.outcome = "failed"
    report.longrepr = f"{where}{reason}: {CI_FAILURE}"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport() -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    _failed_under_ci(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report() -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    report = yield
    _failed_under_ci(report)
    return report
