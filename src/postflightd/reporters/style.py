"""How a report is shown, whatever its kind: colour, and paths relative to where we run."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, TextIO


def _current_directory() -> str:
    try:
        return str(Path.cwd())
    except OSError:
        return ""


@dataclass(frozen=True, slots=True)
class Options:
    """How a report is shown: colour, quiet or verbose, the directory paths are shown from, and
    where a note goes that the format has no room for (JSON on stdout holds the JSON only)."""

    color: bool = False
    quiet: bool = False
    verbose: bool = False
    #: "": no current directory (it was removed): paths are shown absolute
    cwd: str = field(default_factory=_current_directory)
    #: None: standard error, as it is when the reporter runs
    notes: TextIO | None = None

    @property
    def note_stream(self) -> TextIO:
        return self.notes if self.notes is not None else sys.stderr


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
    if cwd and path.startswith(prefix):
        return path[len(prefix) :].replace(os.sep, "/")
    return path.replace(os.sep, "/")
