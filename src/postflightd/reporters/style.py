"""How a report is shown, whatever its kind: colour, and paths relative to where we run."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, TextIO


@dataclass(frozen=True, slots=True)
class Options:
    """How a report is shown: colour, quiet or verbose, and the directory paths are shown from."""

    color: bool = False
    quiet: bool = False
    verbose: bool = False
    cwd: str = field(default_factory=os.getcwd)


# --- colour ----------------------------------------------------------------------------------

_RESET: Final = "\033[0m"
_STYLES: Final = {"error": "\033[1;31m", "warning": "\033[1;33m", "bold": "\033[1m"}


def paint(text: str, style: str, on: bool) -> str:
    """``text`` in an ANSI style when ``on``; plain otherwise."""
    return f"{_STYLES[style]}{text}{_RESET}" if on else text


def use_color(choice: str, stream: TextIO, env: os._Environ[str] | dict[str, str]) -> bool:
    """``--color``: always, never, or auto (a terminal, and NO_COLOR unset or empty).

    An explicit ``--color always`` overrides NO_COLOR, as no-color.org asks of command-line
    flags.
    """
    if choice == "always":
        return True
    if choice == "never" or env.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty is not None and isatty())


# --- paths ------------------------------------------------------------------------------------


def display_path(file: Path | str, cwd: str) -> str:
    """A path relative to ``cwd``, or absolute when it lies outside it."""
    path = str(file)
    prefix = cwd.rstrip(os.sep) + os.sep
    if path.startswith(prefix):
        return path[len(prefix) :].replace(os.sep, "/")
    return path.replace(os.sep, "/")
