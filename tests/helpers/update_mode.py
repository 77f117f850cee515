"""Update mode: a test that compares output with a file kept in the repository (a transcript, a
golden file, generated source) writes that file instead, when its switch says so.

Every such test uses these functions, so every switch means the same thing:

* ``NAME=1`` turns it on; unset, empty or ``0`` leave it off; any other value fails the test
  (``NAME=true`` is a typo to say, not a silent compare);
* under CI (``CI`` set to anything non-empty) a switch that is on fails the test before it
  writes: a CI run compares, it never rewrites what it checks;
* a test that rewrote a file fails, naming it: a run that rewrote something is never green.
  Read the diff, then run again without the switch. A file already right is left alone, and
  its test passes.

CONTRIBUTING.md lists the switches.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

import pytest

from helpers.paths import REPO


def refuse_under_ci(switch: str) -> None:
    """Fail the test when ``switch`` asks for a write on CI."""
    ci = os.environ.get("CI", "")
    if ci:
        pytest.fail(
            f"{switch} is set under CI (CI={ci!r}): a CI run never writes into the repository"
        )


def updating(switch: str) -> bool:
    """Whether ``$switch`` asks this run to rewrite its files (see the module's text)."""
    value = os.environ.get(switch, "")
    if value in ("", "0"):
        return False
    if value != "1":
        pytest.fail(f"{switch}={value!r}: set it to 1 to rewrite the files, or leave it unset")
    refuse_under_ci(switch)
    return True


def rewritten(path: Path, switch: str, *more: Path) -> NoReturn:
    """Fail the test that has just rewritten ``path`` (and ``more``)."""
    shown = ", ".join(
        str(p.relative_to(REPO) if p.is_relative_to(REPO) else p) for p in (path, *more)
    )
    pytest.fail(f"rewrote {shown}: check the change, then run again without {switch}")


def update(path: Path, text: str, switch: str) -> None:
    """In update mode, write ``text`` to ``path`` when it differs, and fail the test if it did."""
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    rewritten(path, switch)
