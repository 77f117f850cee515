"""What a test needs from the machine: where it is missing, a skip on a developer's machine and
a failure under CI.

CI (the environment variable ``CI`` set and not empty) installs every tool the tests use and
makes the devices they need (.ci/run); a test that skipped there would pass without testing
anything. So every skip for something the machine lacks goes through here: ``require_tool``
for a program, ``require_module`` for a Python module, ``unavailable`` for anything else (a
kernel feature, a right, a device). A skip that CI truly cannot avoid names its entry in
``ALLOWED_UNDER_CI``, which says why; ``.ci/run`` prints every skip with its reason at the end.
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Final, NoReturn

import pytest

#: Skips CI accepts, by name, each with the reason no CI machine can do better. Empty while
#: .ci/run provides everything the tests need.
ALLOWED_UNDER_CI: Final[dict[str, str]] = {}


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
        pytest.skip(f"{reason} (allowed under CI: {why})", allow_module_level=True)
    if under_ci():
        pytest.fail(
            f"{reason}: under CI this is a failure (.ci/run must provide it)", pytrace=False
        )
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
