"""The labels of the write path's test hooks (``fs.faults``), read from the source itself.

A crash test names a label in ``$POSTFLIGHTD_CRASH_AT``; a label that no code passes makes the
run finish normally, so a test that only says "crashed or finished" cannot tell a renamed
label from a working one. ``unknown`` lists the names of a test's table that the source never
passes, so that a label renamed in ``src/`` fails the table's own check.

The labels are the string arguments of every ``crash_point(...)`` (or ``fault_point(...)``)
call under ``src/postflightd``. An f-string's ``{crash_label}`` stands for each value some call
passes as ``crash_label=`` (``"state"``, ``"todo"``, ...); any other placeholder (``init``'s
``f"init:{rel}"``) is a wildcard, so ``init:.gitignore:after-replace`` is known.
"""

from __future__ import annotations

import ast
import fnmatch
from collections.abc import Iterable
from functools import cache

from helpers.paths import REPO

SRC = REPO / "src" / "postflightd"
#: The keyword the write functions take and pass on as the prefix of their hooks' labels.
PREFIX_KEYWORD = "crash_label"


def _called(node: ast.Call) -> str | None:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _patterns(node: ast.expr, prefixes: Iterable[str]) -> list[str]:
    """The glob patterns a label expression can take: a literal, or an f-string expanded."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [glob_escape(node.value)]
    if not isinstance(node, ast.JoinedStr):
        return []
    patterns = [""]
    for part in node.values:
        if isinstance(part, ast.Constant) and isinstance(part.value, str):
            choices = [glob_escape(part.value)]
        elif (
            isinstance(part, ast.FormattedValue)
            and isinstance(part.value, ast.Name)
            and part.value.id == PREFIX_KEYWORD
        ):
            choices = list(prefixes)
        else:
            choices = ["*"]
        patterns = [head + choice for head in patterns for choice in choices]
    return patterns


def glob_escape(text: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)


@cache
def _trees() -> tuple[ast.Module, ...]:
    return tuple(ast.parse(path.read_bytes(), str(path)) for path in sorted(SRC.rglob("*.py")))


@cache
def labels(hook: str = "crash_point") -> frozenset[str]:
    """Every label (a glob pattern) the source passes to ``hook``."""
    calls = [node for tree in _trees() for node in ast.walk(tree) if isinstance(node, ast.Call)]
    prefixes = {
        pattern
        for call in calls
        for keyword in call.keywords
        if keyword.arg == PREFIX_KEYWORD
        for pattern in _patterns(keyword.value, ())
    }
    found = {
        pattern
        for call in calls
        if _called(call) == hook and call.args
        for pattern in _patterns(call.args[0], sorted(prefixes))
    }
    # A pattern of wildcards only would take any name for a label, and no table could fail.
    assert all(pattern.strip("*:") for pattern in found), found
    return frozenset(found)


def unknown(names: Iterable[str], hook: str = "crash_point") -> list[str]:
    """The names, of those given, that no call of ``hook`` in the source passes."""
    known = labels(hook)
    return [name for name in names if not any(fnmatch.fnmatchcase(name, p) for p in known)]
