"""state.json as ``scan`` reads it: a chunk at a time, keeping the five task fields it needs.

A 10,000-task state.json of 16 MB costs about 57 MB as Python objects, although a scan needs
of each task its number, name, language, session and status. This reader decodes the file a
megabyte at a time with the standard library's own decoder (``raw_decode``), one task object
at a time, and keeps only those fields: measured on that file, +10 MB peak and 60 ms, against
+71 MB and 62 ms for ``json.loads`` of the bytes, +24 MB and 33 ms for msgspec decoding the
bytes into typed structs (its speed needs the whole file in memory), and +38 MB and 90 ms for
``json.loads`` with a trimming ``object_pairs_hook`` (docs/benchmarks.md).

Anything unusual (not UTF-8, a byte-order mark, NaN, a task that is not an object with an
integer number, bad JSON anywhere) is read again by ``state``'s full reader, so a state.json
the rest of postflightd calls unusable gets exactly the same problem here. The postflight
write path does not use this: it reads the whole document and renders it back
format-preserving.
"""

from __future__ import annotations

import codecs
import json
import re
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO, Final

from postflightd.models.files import parse_json
from postflightd.project.state import StateView, open_state, read_state_bytes, state_shape_problem

#: The task fields the rules read (TaskContext.task), by their state.json names.
SCAN_FIELDS: Final = ("project_number", "project_name", "language", "session_id", "status")

#: How much of the file is read and decoded at a time.
CHUNK_BYTES: Final = 1 << 20

_WHITESPACE: Final = re.compile(r"[ \t\n\r]*")  # json's own definition


def load_state_for_scan(path: Path, chunk_bytes: int = CHUNK_BYTES) -> StateView:
    """state.json for a read-only scan: ``tasks`` hold only SCAN_FIELDS (those present).

    ``doc`` is ``{}``: it only says the file is usable (a scan reads tasks by number and never
    writes the file back). Problems are described exactly as ``state.load_state`` describes them.
    """
    opened = open_state(path)
    if isinstance(opened, StateView):
        return opened
    try:
        with opened:
            tasks = _LeanReader(opened, chunk_bytes).tasks()
    except (_UnusualError, ValueError, RecursionError, OSError):
        # Rare: the full reader says why, in the words every other command uses (or reads
        # what this one is too strict for); its cost does not matter then.
        return _full_read(path)
    return StateView(path, exists=True, doc={}, tasks=tasks)


def _full_read(path: Path) -> StateView:
    raw = read_state_bytes(path)
    if isinstance(raw, StateView):
        return raw
    doc, problem = parse_json(raw)
    if problem is None:
        problem = state_shape_problem(doc)
    if problem is not None:
        return StateView(path, exists=True, problem=f"{path.name}: {problem}")
    tasks = LeanTasks()
    for task in doc["active_projects"]:
        tasks.add(task)
    return StateView(path, exists=True, doc={}, tasks=tasks)


#: Fields whose values repeat from task to task: one string each, not one per task (each
#: raw_decode makes its own strings; 10,000 tasks held 60,000 of them).
_SHARED: Final = frozenset({"language", "session_id", "status"})


#: A field the task does not have (None is a value: ``"language": null``).
_ABSENT: Final = object()
_REST: Final = SCAN_FIELDS[1:]


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
        values = []
        for key in _REST:
            value = task.get(key, _ABSENT)
            values.append(sys.intern(value) if key in _SHARED and type(value) is str else value)
        number = task["project_number"]
        # The number's own field is kept as written (True is not 1 here: it was refused).
        self._by_number[number] = (number, *values)

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


class _UnusualError(Exception):
    """Not the plain shape this reader follows: the full reader decides."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


class _LeanReader:
    """``{"...": value, "active_projects": [task, ...], ...}`` read a chunk at a time.

    Every value is decoded by json's ``raw_decode`` from a window of the text; a value that
    runs past the window's end is decoded again once the next chunk is in.
    """

    def __init__(self, file: BinaryIO, chunk_bytes: int) -> None:
        self._file = file
        self._chunk_bytes = chunk_bytes
        self._utf8 = codecs.getincrementaldecoder("utf-8")()  # strict: bad bytes raise
        self._decoder = json.JSONDecoder(parse_constant=_reject_constant)
        self._buf = ""
        self._pos = 0
        self._eof = False

    def tasks(self) -> LeanTasks:
        self._expect("{")
        tasks: LeanTasks | None = None
        while True:
            if self._peek() != '"':
                raise _UnusualError  # `{}` or a bad key: the full reader's words
            key = self._value()
            self._expect(":")
            if key == "active_projects":
                tasks = self._array()  # a repeated key: the last wins, as in json.loads
            else:
                self._value()
            if self._next() == "}":
                break
        self._skip_whitespace()
        if self._pos != len(self._buf) or tasks is None:
            raise _UnusualError
        return tasks

    def _array(self) -> LeanTasks:
        self._expect("[")
        tasks = LeanTasks()
        if self._peek() == "]":
            self._pos += 1
            return tasks
        while True:
            task = self._value()
            if not isinstance(task, dict):
                raise _UnusualError
            number = task.get("project_number")
            if not isinstance(number, int) or isinstance(number, bool):
                raise _UnusualError
            tasks.add(task)
            if self._next() == "]":
                return tasks

    def _more(self, at_least: int = 0) -> bool:
        """Read the next chunk into the window (dropping what was consumed); False at EOF."""
        if self._eof:
            return False
        data = self._file.read(max(self._chunk_bytes, at_least))
        self._buf = self._buf[self._pos :] + self._utf8.decode(data, final=not data)
        self._pos = 0
        self._eof = not data
        return True

    def _skip_whitespace(self) -> None:
        while True:
            match = _WHITESPACE.match(self._buf, self._pos)
            if match is not None:  # always: the pattern matches the empty string
                self._pos = match.end()
            if self._pos < len(self._buf) or not self._more():
                return

    def _peek(self) -> str:
        self._skip_whitespace()
        if self._pos >= len(self._buf):
            raise _UnusualError  # ends early
        return self._buf[self._pos]

    def _expect(self, char: str) -> None:
        if self._peek() != char:
            raise _UnusualError
        self._pos += 1

    def _next(self) -> str:
        """The ',' between members, or the closing bracket."""
        char = self._peek()
        if char not in ",]}":
            raise _UnusualError
        self._pos += 1
        return char

    def _value(self) -> Any:
        self._skip_whitespace()
        while True:
            try:
                value, end = self._decoder.raw_decode(self._buf, self._pos)
            except json.JSONDecodeError:
                # The value goes on past the window: read as much again as it holds, so that
                # a value of any size is decoded again O(log size) times, not O(size).
                if self._more(len(self._buf) - self._pos):
                    continue
                raise
            if end == len(self._buf) and self._more():
                continue  # a number may go on in the next chunk
            self._pos = end
            return value
