"""state.json as ``scan`` reads it: only the five fields of each task the rules look at.

A 10,000-task state.json of 16 MB costs about 57 MB as Python objects, although a scan needs
a task's number, name, language, session and status. msgspec decodes straight from the bytes
into small typed structs and skips every other field without building it (30 ms and +7 MB
for 16 MB, against 62 ms and +54 MB for ``json.loads``, and 84 ms and +20 MB for
``json.loads`` with a trimming ``object_pairs_hook``; docs/decisions.md). Whatever msgspec
refuses is read again by the standard library, so that a state.json the rest of postflightd
calls unusable gets exactly the same problem here.

The postflight write path does not use this: it keeps reading the whole document
(``loader.load_state``) and rendering it back format-preserving.
"""

from __future__ import annotations

import codecs
import functools
from pathlib import Path
from typing import Any, Final

from postflightd.loader import StateView, parse_json, read_state_bytes, state_shape_problem

#: The task fields the rules read (TaskContext.task), by their state.json names.
SCAN_FIELDS: Final = ("project_number", "project_name", "language", "session_id", "status")

_UTF8_CHUNK: Final = 1 << 20


def load_state_for_scan(path: Path) -> StateView:
    """state.json for a read-only scan: ``tasks`` hold only SCAN_FIELDS.

    ``doc`` is ``{"active_projects": [those tasks]}``: it says the file is usable, and is
    never written back. Problems are described as ``loader.load_state`` describes them.
    """
    raw = read_state_bytes(path)
    if isinstance(raw, StateView):
        return raw
    tasks = _decode_lean(raw)
    if tasks is None:
        # msgspec refused it (or accepted what the standard library would not): the full
        # reader says why, in the words every other command uses; rare, so its cost is fine.
        doc, problem = parse_json(raw)
        if problem is None:
            problem = state_shape_problem(doc)
        if problem is not None:
            return StateView(path, exists=True, problem=f"{path.name}: {problem}")
        tasks = [{k: t[k] for k in SCAN_FIELDS if k in t} for t in doc["active_projects"]]
        del doc
    return StateView(
        path,
        exists=True,
        doc={"active_projects": tasks},
        tasks={t["project_number"]: t for t in tasks},
    )


def _decode_lean(raw: bytes) -> list[dict[str, Any]] | None:
    """The tasks' SCAN_FIELDS, or None when the standard library must decide."""
    if raw.startswith(codecs.BOM_UTF8) or not _valid_utf8(raw):
        return None  # parse_json names the byte-order mark or the bad byte
    import msgspec

    try:
        state = msgspec.json.decode(raw, type=_state_type())
    except (msgspec.DecodeError, RecursionError):
        # Includes what the standard library accepts but msgspec does not (a lone surrogate
        # escape, an integer past 64 bits, 1.0 as a task number): the fallback judges.
        return None
    unset = msgspec.UNSET
    tasks = []
    for t in state.active_projects:
        # Only the fields present, as in the full document: a rule's .get() sees the same.
        task = {name: value for name in SCAN_FIELDS if (value := getattr(t, name)) is not unset}
        tasks.append(task)
    return tasks


def _valid_utf8(raw: bytes) -> bool:
    """Whether ``raw`` decodes as UTF-8 (msgspec does not check the fields it skips).

    Decoded a megabyte at a time: decoding 16 MB at once would cost a 16 MB string.
    """
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


@functools.cache
def _state_type() -> Any:
    """The structs msgspec decodes into, built on first use: ``--version`` never imports it."""
    import msgspec

    # defstruct, not class statements: annotations are strings in this module, and msgspec
    # cannot resolve a name local to this function from them. Any: the rules check each
    # value's type themselves, as with the full document.
    task = msgspec.defstruct(
        "Task",
        [("project_number", int)] + [(name, Any, msgspec.UNSET) for name in SCAN_FIELDS[1:]],
    )
    return msgspec.defstruct("State", [("active_projects", list[task])])  # type: ignore[valid-type]
