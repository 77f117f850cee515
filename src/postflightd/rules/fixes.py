"""What a file probably meant: the status a near-miss means (PF202's "did you mean"), and a
finding's ``fix``, what to write instead, built by the rule that finds it.

A fix is one JSON member (``"status": "researched"``), made from the same values as the
finding's message and from the file's own: the status PF202 suggests, the session PF405
expects, the field PF205's misspelling meant, this task's directory for a path PF501 refuses.
It is never an example from the rule's explanation (that is ``rules CODE``'s): the dashboard
shows it beside the message, so the two cannot disagree. None when no one replacement can be
named (a field that is simply new, a path with no usable file name).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Final, Protocol

from postflightd.inert import CONTROL_OR_LINE_SEPARATOR, clip
from postflightd.models.terms import type_from_folder

#: The folder of a task directory each artifact type goes in.
_FOLDERS: Final = {
    "report": "reports",
    "research": "reports",
    "plan": "plans",
    "summary": "summaries",
    "implementation": "summaries",
}
_SEPARATORS: Final = re.compile(r"[/\\\\]")


def status_word(raw: str) -> str:
    """``" Research-Done "`` -> ``"research_done"``: how a status is compared."""
    return raw.strip().lower().replace("-", "_").replace(" ", "_")


def guess_status(
    raw: str,
    statuses: Sequence[str],
    synonyms: Mapping[str, Sequence[str]] | None = None,
    stems: Sequence[tuple[str, str]] = (),
) -> str | None:
    """The status a near-miss probably means: the status itself once normalised, else a status
    one of whose ``synonyms`` it is, else the closest spelling, else the status of the first
    of ``stems`` (stem, status) it contains."""
    word = status_word(raw)
    if word in statuses:
        return word
    for status, words in (synonyms or {}).items():
        if word in words:
            return status
    import difflib  # only for a status no rule knows: 0.9 ms of every scan's start-up else

    close = difflib.get_close_matches(word, statuses, n=1, cutoff=0.75)
    if close:
        return close[0]
    for stem, status in stems:
        if stem in word:
            return status
    return None


def member(key: str, value: object) -> str:
    """The JSON member to write: ``"status": "researched"``."""
    return f"{json.dumps(key, ensure_ascii=False)}: {json.dumps(value, ensure_ascii=False)}"


def misspelt_field(key: str, value: object, names: Collection[str]) -> str | None:
    """PF205's fix: the field ``key`` probably meant (``next_step``: ``next_steps``), with the
    value as written; None for a field that is simply new (it is kept: nothing to write)."""
    # Edits counted here, not with difflib: loading it costs a scan 0.9 ms, and files with
    # fields of their own (kept, reported) are common.
    limit = 2 if len(key) >= 8 else 1
    best = min(((_edits(key, n, limit), n) for n in sorted(names)), default=(limit + 1, ""))
    if best[0] > limit:
        return None
    try:
        return clip(member(best[1], value))
    except (ValueError, RecursionError):  # an integer past the conversion limit; deep nesting
        return None


class _Contract(Protocol):
    """What ``fix_path`` needs of an artifact contract: why a path is refused, or None."""

    @property
    def path_problem(self) -> Callable[[str], str | None]: ...


def _edits(a: str, b: str, limit: int) -> int:
    """The edit distance of ``a`` and ``b`` (insertions, deletions, substitutions), or
    ``limit + 1`` once it is sure to be above ``limit``."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
        if min(row) > limit:
            return limit + 1
    return min(row[-1], limit + 1)


def fix_path(path: str, art: Any, task_dir: str | None, contract: _Contract) -> str | None:
    """PF501's fix: the file's own name in this task's directory (``task_dir``, relative to
    the project root), in its type's folder: ``"path": "specs/949_x/reports/notes.md"``.
    None without a task directory, or when no safe path comes of it (the contract's
    ``path_problem``)."""
    if task_dir is None:
        return None
    name = CONTROL_OR_LINE_SEPARATOR.sub("", _SEPARATORS.split(path)[-1]).strip()
    if not name or name in (".", ".."):
        return None
    kind = art.get("type") if isinstance(art, dict) else None
    folder = _FOLDERS.get(kind if isinstance(kind, str) else "") or _FOLDERS.get(
        type_from_folder(path) or ""
    )
    fixed = f"{task_dir}/{folder}/{name}" if folder else f"{task_dir}/{name}"
    if contract.path_problem(fixed) is not None:
        return None
    return member("path", fixed)
