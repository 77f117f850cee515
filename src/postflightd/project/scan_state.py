"""state.json as ``scan`` reads it: of each task, only the five fields a scan needs.

A scan needs of each task its number, name, language, session and status; a long-lived
project's state.json holds much more (the bench's 10,000 tasks: 16.6 MB, about 57 MB as Python
objects), and it is read before the first file, on one core. Its bytes are read as every
command reads them (``state.read_state_bytes``); then, measured on that file in a scan's
process (``bench/state.py``, ``bench/scan.py``):

* from ``WHOLE_MIN_BYTES`` (3 MiB) up, msgspec decodes those five fields straight from the
  bytes into typed structs, skipping every other value in C: about 44 ms (reading 10, the
  checks below 4, msgspec's import 11, decoding 15, keeping the fields 4), +21 MB at the peak;
  ``json.loads`` of the bytes: 97 ms, +54 MB;
* a smaller file, or one msgspec refuses, is parsed by the full reader (``state.parse_state``,
  what postflight reads), and the five fields kept of each task. Below 3 MiB that is quicker
  than msgspec with its import, so that most projects' scans never import msgspec.

Either gives exactly what the full reader (``state.load_state``) gives: the same fields, or,
for a file it calls unusable, the same problem, since anything unusual is read by it.
Where msgspec is stricter than json (NaN, a lone surrogate escape anywhere, a kept field that
is not a string or null, a float or a bool as a task's number ...), it refuses and the full
reader reads the file.
Where it would accept what json refuses, ``decode_tasks`` does not use it:

* bytes that are not UTF-8 in a value it skips (it checks only the strings it keeps): the file
  is checked first (at once when ASCII, 1-4 ms; else 64 KiB at a time, 6-10 ms);
* an integer with more digits than Python converts (``sys.get_int_max_str_digits()``, 4,300:
  json raises) in a value it skips: a run of half as many digits anywhere sends the file on;
* nesting deep enough that json runs out of recursion: it counts each array and object against
  the interpreter's recursion limit from wherever it is called, as msgspec does, so that
  msgspec called from here went 4 levels deeper than the full reader. It runs
  ``_STACK_MARGIN`` calls deeper than the full reader's decoder would: it gives up on whatever
  that would find nested too deeply, and the full reader decides.

The postflight write path does not use this: it reads the whole document and renders it back
format-preserving.
"""

from __future__ import annotations

import codecs
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import cache, partial
from pathlib import Path
from types import GenericAlias
from typing import Any, Final

from postflightd.models.files import deeper
from postflightd.project.state import (
    WRITE_BACK_MARGIN,
    StateView,
    parse_state,
    read_state_bytes,
)

#: The task fields the rules read (TaskContext.task), by their state.json names.
SCAN_FIELDS: Final = ("project_number", "project_name", "language", "session_id", "status")

#: From this size up, state.json is decoded by msgspec. Below it the full reader is quicker
#: than msgspec with its import (about 11 ms); most projects' scans never import it.
WHOLE_MIN_BYTES: Final = 3 << 20


#: How many calls deeper than the full reader's decoder msgspec decodes (above):
#: the full reader's path from ``load_state_for_scan`` down to json's scanner is 4 calls, and
#: it decodes ``WRITE_BACK_MARGIN`` calls deeper still.
_STACK_MARGIN: Final = WRITE_BACK_MARGIN + 32

#: How much of a file that is not ASCII is checked for UTF-8 at a time (memory stays flat).
_UTF8_CHUNK: Final = 1 << 16

_DIGITS: Final = re.compile(rb"[0-9]+")
_DIGIT_BYTES: Final = frozenset(b"0123456789")


def load_state_for_scan(path: Path, *, whole_min: int = WHOLE_MIN_BYTES) -> StateView:
    """state.json for a read-only scan: ``tasks`` hold only SCAN_FIELDS (those present).

    ``doc`` is ``{}``: it only says the file is usable (a scan reads tasks by number and never
    writes the file back). Problems are described exactly as ``state.load_state`` describes
    them. A file of ``whole_min`` bytes or more is decoded by msgspec (``decode_tasks``);
    another, or one msgspec refuses, by the full reader.
    """
    raw = read_state_bytes(path)
    if isinstance(raw, StateView):
        return raw
    decoded = _decode(raw) if len(raw) >= whole_min else None
    if decoded is None:
        return _full_read(path, raw)
    del raw  # not held while the tasks are kept
    tasks = LeanTasks()
    tasks.keep(decoded)
    return StateView(path, exists=True, doc={}, tasks=tasks)


def _full_read(path: Path, raw: bytes) -> StateView:
    """The full reader's parse, the scan fields kept of each task. A call below
    ``load_state_for_scan``, as ``parse_state`` is a call below ``load_state``: both give up
    at the same depth of nesting."""
    doc, problem = parse_state(raw)
    if problem is not None:
        return StateView(path, exists=True, problem=f"{path.name}: {problem}")
    tasks = LeanTasks()
    for task in doc["active_projects"]:
        tasks.add(task)
    return StateView(path, exists=True, doc={}, tasks=tasks)


def decode_tasks(raw: bytes) -> LeanTasks | None:
    """The scan fields of state.json's bytes, decoded by msgspec; None where json might read
    them otherwise (the module's docstring says where): the full reader decides then."""
    decoded = _decode(raw)
    if decoded is None:
        return None
    tasks = LeanTasks()
    tasks.keep(decoded)
    return tasks


def _decode(raw: bytes) -> Iterator[tuple[Any, ...]] | None:
    """``decode_tasks``' rows, SCAN_FIELDS' values each, the bytes no longer needed."""
    if not _utf8(raw) or _long_integer(raw):
        return None
    decode, astuple = _msgspec()
    try:
        state = deeper(_STACK_MARGIN, partial(decode, raw))
    except (ValueError, RecursionError):  # msgspec's DecodeError and ValidationError too
        return None
    return map(astuple, state.active_projects)


@cache
def _msgspec() -> tuple[Callable[[bytes], Any], Callable[[Any], tuple[Any, ...]]]:
    """msgspec's decoder of state.json's scan fields, and its struct-to-tuple; imported for
    the first file it reads.

    A kept field is a string or null: anything else (a number, a list) makes msgspec refuse
    the file, so that json's value of it is kept (its floats and big integers are the full
    reader's); one the task does not have is ``_ABSENT``. Every key but these is skipped; a
    repeated key: the last wins, as in json.
    """
    import msgspec

    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = [("project_number", int)]
    fields += [(key, str | None, _ABSENT) for key in _REST]
    task = msgspec.defstruct("Task", fields, gc=False)
    state = msgspec.defstruct("State", [("active_projects", GenericAlias(list, (task,)))], gc=False)
    return msgspec.json.Decoder(state).decode, msgspec.structs.astuple


def _utf8(raw: bytes) -> bool:
    """Whether the bytes are UTF-8 as ``bytes.decode`` (so the full reader) reads it."""
    if raw.isascii():
        return True
    decoder = codecs.getincrementaldecoder("utf-8")()
    view = memoryview(raw)
    try:
        for start in range(0, len(raw), _UTF8_CHUNK):
            decoder.decode(view[start : start + _UTF8_CHUNK])
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


def _long_integer(raw: bytes) -> bool:
    """Whether the bytes may hold an integer longer than Python converts (json raises).

    A run of more than ``limit`` digits holds one of the bytes looked at (every ``step``-th),
    with at least ``limit + 1 - step`` digits from there on: a few thousand looks at a 16 MB
    file, not a look at every byte. A shorter run can be flagged too (the full reader then
    decides); a digit inside a string as well.
    """
    limit = sys.get_int_max_str_digits()
    if limit == 0:
        return False
    step = (limit + 1) // 2
    least = limit + 1 - step
    digits, match = _DIGIT_BYTES, _DIGITS.match
    for at in range(0, len(raw), step):
        if raw[at] in digits:
            run = match(raw, at)
            if run is not None and run.end() - at >= least:
                return True
    return False


_REST: Final = SCAN_FIELDS[1:]
#: A field the task does not have (None is a value: ``"language": null``).
_ABSENT: Final = object()


class LeanTasks(Mapping[int, Mapping[str, Any]]):
    """The scan fields of each task by number, a tuple each; a task's dict is made when asked.

    A dict of five fields costs about 100 bytes more than the tuple of their values: 10 MB at
    100,000 tasks, held for the whole scan, while a scan asks for each task once. A number
    listed twice keeps its last entry, as ``tasks_by_number`` does.
    """

    __slots__ = ("_by_number",)

    def __init__(self) -> None:
        self._by_number: dict[int, tuple[Any, ...]] = {}

    def add(self, task: Mapping[str, Any]) -> None:
        """One task object of state.json (its ``project_number`` checked to be an int)."""
        get, intern = task.get, sys.intern
        language = get("language", _ABSENT)
        session = get("session_id", _ABSENT)
        status = get("status", _ABSENT)
        number = task["project_number"]
        # The number's own field is kept as written (True is not 1 here: it was refused).
        self._by_number[number] = (
            number,
            get("project_name", _ABSENT),
            intern(language) if type(language) is str else language,
            intern(session) if type(session) is str else session,
            intern(status) if type(status) is str else status,
        )

    def keep(self, rows: Iterable[tuple[Any, ...]]) -> None:
        """Tasks as SCAN_FIELDS' values (``_ABSENT`` for one a task lacks). The fields whose
        values repeat from task to task are interned: one string each, not one per task
        (10,000 tasks held 30,000 of them)."""
        by_number, intern = self._by_number, sys.intern
        for number, name, language, session, status in rows:
            by_number[number] = (
                number,
                name,
                intern(language) if type(language) is str else language,
                intern(session) if type(session) is str else session,
                intern(status) if type(status) is str else status,
            )

    def __getitem__(self, number: int) -> dict[str, Any]:
        row = self._by_number[number]
        # Only the fields present, as in the full document: a rule's .get() sees the same.
        lean = {"project_number": row[0]}
        for key, value in zip(_REST, row[1:], strict=True):
            if value is not _ABSENT:
                lean[key] = value
        return lean

    def __iter__(self) -> Iterator[int]:
        return iter(self._by_number)

    def __len__(self) -> int:
        return len(self._by_number)
