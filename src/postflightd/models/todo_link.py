"""How an artifact's path is written as a link in TODO.md, and how long such a link may be.

Postflight writes the links (``postflight.transform``, ``postflight.todo_edit``); validation
refuses a path whose link would be too long (PF501, ``rules.metadata``). Both use this one
definition, so a path the rules accept is always one postflight can link.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Final

#: A TODO.md link is at most this long: one line a person can still read and an editor still
#: handles; a longer artifact path is PF501.
MAX_LINK_CHARS: Final = 4096


def markdown_link(path: str) -> str:
    """``[name](path)``; a target with spaces or parentheses is wrapped in ``<>`` (CommonMark).

    Backslashes, brackets and angle brackets are escaped, so no path can end the link early
    or turn the rest of the line into markup (``postflight.todo_edit`` reads them back).
    """
    name = PurePosixPath(path).name or path
    name = re.sub(r"([\\\[\]])", r"\\\1", name)
    target = path.replace("\\", "\\\\")
    if re.search(r"[\s()<>]", path):
        target = "<" + re.sub(r"([<>])", r"\\\1", target) + ">"
    return f"[{name}]({target})"


def link_too_long(path: str) -> bool:
    """Whether the link ``markdown_link`` writes for ``path`` exceeds ``MAX_LINK_CHARS``.

    Escaping at most doubles each character of the name and of the target, and the link adds
    six: a path short enough that even that could not reach the limit needs no link built
    (the scan's hot loop asks this of every artifact).
    """
    if 4 * len(path) + 6 <= MAX_LINK_CHARS:
        return False
    return len(markdown_link(path)) > MAX_LINK_CHARS
