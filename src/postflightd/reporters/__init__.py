"""One registry of reporters per kind of result; its keys are the command's ``--format``
choices. A reporter gets a result and a stream and writes; it never runs a command.

Every command's registry is ``REPORTERS: dict[str, Reporter[Result]]``, and every reporter is
called the same way: ``REPORTERS[fmt](result, stream, options)`` writes ``result`` to
``stream``, shown as ``options`` say (colour, quiet, verbose, the directory paths are shown
from, where a note goes that the format has no room for). A reporter whose result comes as
a stream (``scan``'s files) writes each part as it comes.

May import: ``daemon.watch``, ``stats``, ``pipeline``, ``project``, ``config``, ``postflight``,
``rules``, ``runs``, ``fs``, ``models``, ``journal`` and the shared top-level modules.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO, TypeAlias, TypeVar

from postflightd.reporters.style import Options

Result_contra = TypeVar("Result_contra", contravariant=True)

#: Writes one result to a stream, as the options say.
Reporter: TypeAlias = Callable[[Result_contra, TextIO, Options], None]
