"""A TODO.md task list, read: where each task's section is, and what its links point to.

A task's section starts at a heading ``### {N}. Title`` (``##`` and zero-padded numbers are
accepted too) and runs to the next heading of the same or a higher level. Headings inside
fenced code blocks or YAML front matter are not headings: task descriptions often quote shell
scripts whose ``# comments`` would otherwise end the section early.

A link is written ``[name](target)``, ``[target]`` or as a plain ``dir/file`` path, relative
to the project root, the specs directory or the task's directory (``LinkPaths``). Nothing
here edits: ``todo.py`` does, on what this finds.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

_HEADING: Final = re.compile(r"^(#{1,6})[ \t]+(?:(\d+)\.(?:[ \t]|$))?")
_FENCE: Final = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")
#: What a heading or fence line starts with (a fence may follow spaces: checked apart).
_MAYBE_SPECIAL: Final = ("#", "`", "~")
_FIRST_CHARS: Final = frozenset({"#", "`", "~", " ", "\t"})


def _body_start(lines: list[str]) -> int:
    """Index of the first line after the YAML front matter (0 when there is none)."""
    if lines and lines[0].rstrip("\r") == "---":
        # YAML front matter: its `# comments` are not headings.
        for close in range(1, len(lines)):
            if lines[close].rstrip("\r") in {"---", "..."}:
                return close + 1
    return 0


def _headings(lines: list[str]) -> Iterator[tuple[int, int, int | None]]:
    """``(line index, level, task number or None)`` of every heading outside front matter
    and code fences."""
    fence: str | None = None
    body = _body_start(lines)
    # A comprehension picks the few lines that can be headings or fences: the per-line work
    # below is what a 1,000-task TODO.md costs on every postflight.
    maybe = [i for i, line in enumerate(lines) if line[:1] in _FIRST_CHARS and i >= body]
    for index in maybe:
        line = lines[index]
        if not line.startswith(_MAYBE_SPECIAL) and not line.lstrip(" \t").startswith(("`", "~")):
            continue
        line = line.rstrip("\r")
        fence_match = _FENCE.match(line)
        if fence_match is not None:
            marker = fence_match.group(1)
            if fence is None:
                fence = marker
            elif marker[0] == fence[0] and len(marker) >= len(fence):
                fence = None
            continue
        heading = _HEADING.match(line) if fence is None else None
        if heading is not None:
            number = heading.group(2)
            yield index, len(heading.group(1)), None if number is None else int(number)


def find_section(lines: list[str], task: int) -> tuple[int, int, int] | None:
    """``(heading index, end index, own end)`` of the task's section, or None.

    The section runs to the next heading of the same or a higher level; its *own* lines stop
    earlier, at the first task heading nested in it: a postflight of task 3 must never edit
    the Status line of a task 1 listed under ``## 3.``.
    """
    start: int | None = None
    level = 0
    own = len(lines)
    for index, depth, number in _headings(lines):
        if start is not None and depth <= level:
            return start, index, min(own, index)
        if start is None and number == task and depth >= 2:
            start, level = index, depth
        elif start is not None and number is not None and depth >= 2:
            own = min(own, index)
    return None if start is None else (start, len(lines), own)


def section_index(lines: list[str]) -> dict[int, list[int]]:
    """Task number -> ``[heading index, end index, own end]`` of its section, every task in
    one pass.

    The same rules as ``find_section``: the first ``##``-or-deeper heading with the number wins,
    its section ends at the next heading of the same or a higher level, and its own lines at
    the first task heading nested in it.
    """
    found: dict[int, list[int]] = {}
    #: sections still open, their levels strictly increasing from bottom to top
    open_: list[tuple[list[int], int]] = []
    for index, depth, number in _headings(lines):
        while open_ and open_[-1][1] >= depth:
            span = open_.pop()[0]
            span[1] = index
            span[2] = min(span[2], index)
        if number is not None and depth >= 2:
            for span, _ in open_:
                span[2] = min(span[2], index)
            if number not in found:
                span = [index, len(lines), len(lines)]
                found[number] = span
                open_.append((span, depth))
    return found


#: ``[text]`` not preceded by a backslash, optionally followed by ``(target)``/``(<target>)``.
_LINK: Final = re.compile(
    r"(?<!\\)\[((?:\\.|[^\[\]\\])*)\]"
    r"(?:\((<(?:\\.|[^<>\\])*>|(?:\\.|[^\s()\\])*)\))?"
)
#: A plain path written without brackets (form E's ``reports/research-001.md``).
PLAIN_PATH: Final = re.compile(r"[^\s\[\]()<>,]*/[^\s\[\]()<>,]+")
_ESCAPED: Final = re.compile(r"\\(.)")


def _unescape(text: str) -> str:
    return _ESCAPED.sub(r"\1", text)


@dataclass(frozen=True, slots=True)
class WrittenLink:
    """One link as a section writes it."""

    #: the target as written (unescaped): relative to the root, the specs or the task dir
    target: str
    #: "link" ``[name](target)``, "bare" ``[target]`` or "plain" ``target``
    style: str
    #: where the link ends in the text it was found in
    end: int


def links_in(text: str) -> list[WrittenLink]:
    """The links of a field value or sub-list item, in order."""
    found: list[WrittenLink] = []
    for match in _LINK.finditer(text):
        label, target = match.group(1, 2)
        if target is not None:
            if target.startswith("<"):
                target = target[1:-1]
            found.append(WrittenLink(_unescape(target), "link", match.end()))
        else:
            bare = _unescape(label)
            # `[specs/036_x/reports/r.md]` is a link (form D); `[x]` or `[see notes]` is not.
            if bare and not any(c.isspace() for c in bare) and ("/" in bare or "." in bare):
                found.append(WrittenLink(bare, "bare", match.end()))
    if found:
        return found
    offset = 0
    for part in text.split(","):
        words = part.split()
        if words and PLAIN_PATH.fullmatch(words[0]):
            found.append(
                WrittenLink(words[0], "plain", offset + part.index(words[0]) + len(words[0]))
            )
        offset += len(part) + 1
    return found


class LinkPaths:
    """How a section's link targets map to root-relative paths, and back."""

    def __init__(self, task_dir: str | None) -> None:
        task = posixpath.normpath(task_dir) if task_dir else None
        specs = posixpath.dirname(task) if task else None
        self.task_prefix = f"{task}/" if task else None
        self.specs_prefix = f"{specs}/" if specs else None

    def same(self, target: str) -> set[str]:
        """The root-relative paths a written target may stand for (real task lists write
        them relative to the root, to the specs directory or, in an Artifacts list, to the task
        directory)."""
        paths = {norm_path(target)}
        if self.specs_prefix is not None:
            paths.add(norm_path(self.specs_prefix + target))
        if self.task_prefix is not None:
            paths.add(norm_path(self.task_prefix + target))
        return paths

    def form(self, target: str) -> str:
        """ "root", "specs" or "task": which directory a written target is relative to."""
        if self.specs_prefix is None or target.startswith(self.specs_prefix):
            return "root"
        first = target.lstrip("./").split("/", 1)[0]
        if first[:1].isdigit() and "_" in first:
            return "specs"  # starts with a task directory, `081_witness_theorem/...`
        return "task"

    def written(self, path: str, form: str) -> str:
        """``path`` (root-relative) written relative to the directory of ``form``."""
        prefix = self.task_prefix if form == "task" else self.specs_prefix
        if form != "root" and prefix is not None and path.startswith(prefix):
            return path[len(prefix) :]
        # Outside that directory (another task's artifact): the full path says which it is.
        return path


def norm_path(path: str) -> str:
    """``path`` with ``/`` separators, normalised: ``./a``, ``a//b``, ``a/x/../b`` are ``a/b``."""
    # normpath("") would say ".": an empty path stays empty.
    return posixpath.normpath(path.replace("\\", "/")) if path else path
