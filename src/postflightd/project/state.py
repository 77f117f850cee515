"""Reading state.json: the document postflight applies outcomes to.

Reading yields values, never exceptions: a state.json that cannot be used comes back as a
``StateView`` whose ``problem`` says why (PF604). ``STATE_CACHE`` keeps the last parsed
document per path, keyed on its bytes. ``open_state`` is for ``scan``'s streaming read
(``project.scan_state``).
"""

from __future__ import annotations

import _thread
import errno
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Final

from postflightd.fs.directory import FILE_FLAGS, Directory, RefusedError, kind_of
from postflightd.models.files import parse_json


@dataclass(frozen=True, slots=True)
class StateView:
    """state.json as postflight sees it."""

    path: Path
    exists: bool
    doc: dict[str, Any] | None = None
    problem: str | None = None
    tasks: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def usable(self) -> bool:
        return self.doc is not None


def state_shape_problem(doc: object) -> str | None:
    """Why a parsed state.json is not of the shape postflight reads (an object whose
    ``active_projects`` is a list of objects with an integer ``project_number``), or None."""
    fault = _shape_fault(doc)
    return None if fault is None else fault[1]


def _shape_fault(doc: object) -> tuple[str, str] | None:
    """Where a parsed state.json's shape goes wrong (a dotted location, "" for the whole
    document) and why, or None."""
    if not isinstance(doc, dict):
        return "", "the top-level value is not a JSON object"
    projects = doc.get("active_projects")
    if not isinstance(projects, list):
        where = "active_projects" if "active_projects" in doc else ""
        return where, '"active_projects" is missing or not an array'
    for i, task in enumerate(projects):
        if not isinstance(task, dict):
            return f"active_projects[{i}]", f"active_projects[{i}] is not an object"
        number = task.get("project_number")
        if not isinstance(number, int) or isinstance(number, bool):
            return (
                f"active_projects[{i}].project_number",
                f"active_projects[{i}].project_number is missing or not an integer",
            )
    return None


#: How many calls deeper than where it is read state.json is decoded (``parse_state``). What
#: is read is written back from deeper in the stack: the postflight encodes a task's entry
#: about six calls below the read in ``process``, the hook and the daemon, and json's encoder
#: counts each level of nesting as json's decoder does. Without the margin, a state.json
#: nested just below what the reader could read (about 980 levels) was read, then could not
#: be written, and the valid metadata file was blamed for it (PF106).
WRITE_BACK_MARGIN: Final = 32


def parse_state(raw: bytes) -> tuple[Any, str | None]:
    """(document, None) or (None, why it is unusable: PF604) for state.json's bytes: JSON, of
    the shape postflight reads, and nested no deeper than it can be written back."""
    doc, problem = parse_json(raw, margin=WRITE_BACK_MARGIN)
    if problem is None:
        problem = state_shape_problem(doc)
    return (None, problem) if problem is not None else (doc, None)


def problem_position(path: Path) -> tuple[int, int] | None:
    """Where in state.json (1-based line and column) what makes it unusable is: where its
    JSON breaks off, or the value of the wrong shape; None when its bytes are not the problem
    (missing, a link, unreadable) or they read as a usable document after all.

    Read again only when state.json is unusable, to point a single finding at the place
    (``scan`` reports it once for the project, not once per metadata file).
    """
    from postflightd.rules.findings import finding
    from postflightd.rules.positions import decode_error_position, with_positions

    raw = read_state_bytes(path)
    if isinstance(raw, StateView):
        return None
    doc, problem = parse_json(raw, margin=WRITE_BACK_MARGIN)
    if problem is not None:
        return decode_error_position(raw) or (1, 1)
    fault = _shape_fault(doc)
    if fault is None:
        return None
    located = with_positions([finding("PF604", fault[0], fault[1])], raw)[0]
    return (located.line or 1, located.col or 1)


def tasks_by_number(doc: Mapping[str, Any]) -> dict[int, Mapping[str, Any]]:
    return {t["project_number"]: t for t in doc["active_projects"]}


#: The parsed state.json files ``STATE_CACHE`` keeps (see there).
MAX_STATE_FILES: Final = 8


class StateCache:
    """Parsed state.json documents by path, with the bytes they were parsed from.

    Every postflight rewrites state.json and the next one reads it again: a 1,000-task file
    costs ~5 ms to parse, a quarter of the watch latency budget, and ~0.3 ms to read and
    compare. Keyed on content, not on (inode, size, mtime): an in-place rewrite of the same
    size within one tick of the file system's clock keeps all three. One per process
    (``STATE_CACHE``): the daemon's roots and in-process commands share it; tests clear it.

    At most ``MAX_STATE_FILES`` files, the most recently used: a parsed 1,000-task state.json
    holds about 1 MB, so a daemon watching 50 roots kept 50 MB of them (97 MB in all against
    42 MB for one root); a root whose file was dropped pays one parse at its next postflight.
    """

    def __init__(self) -> None:
        self._entries: dict[str, tuple[bytes, StateView]] = {}
        #: the daemon's roots post-flight on their own threads: a lookup moving an entry to
        #: the end must not race another root's eviction (held for dictionary work only).
        # threading.Lock itself, from the module under threading: importing threading would
        # cost every command's start-up half a millisecond for this one lock.
        self._lock = _thread.allocate_lock()

    def get(self, path: Path, raw: bytes | None) -> StateView | None:
        """The usable state.json parsed earlier from exactly these bytes, if any."""
        key = str(path)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or raw is None or entry[0] != raw:
                return None
            self._entries[key] = self._entries.pop(key)  # the most recently used goes last
        return entry[1]

    def remember(self, path: Path, raw: bytes, doc: dict[str, Any]) -> StateView:
        """Record that ``raw`` (already checked for shape) parses to ``doc``."""
        view = StateView(path, exists=True, doc=doc, tasks=tasks_by_number(doc))
        key = str(path)
        with self._lock:
            self._entries.pop(key, None)
            self._entries[key] = (raw, view)
            while len(self._entries) > MAX_STATE_FILES:
                del self._entries[next(iter(self._entries))]
        return view

    @property
    def size(self) -> int:
        """How many state.json files are held."""
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


STATE_CACHE: Final = StateCache()


def open_state(path: Path) -> BinaryIO | StateView:
    """state.json open for reading, or the StateView that says why it cannot be.

    For ``scan``'s streaming read (``scan_state``): never through a link at the name, never a
    FIFO (O_NOFOLLOW | O_NONBLOCK, then fstat), like every project file (``fs.directory``).
    """
    try:
        fd = os.open(path, os.O_RDONLY | FILE_FLAGS)
    except FileNotFoundError:
        return StateView(path, exists=False, problem=f"{path.name} does not exist")
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return StateView(
                path, exists=True, problem=f"{path.name} {_refused_text('a symbolic link')}"
            )
        if exc.errno == errno.EISDIR:
            return StateView(path, exists=True, problem=f"{path.name} is a directory")
        return _unreadable_state(path, exc)
    st = os.fstat(fd)
    if stat.S_ISDIR(st.st_mode) or not stat.S_ISREG(st.st_mode):
        os.close(fd)
        if stat.S_ISDIR(st.st_mode):
            return StateView(path, exists=True, problem=f"{path.name} is a directory")
        return StateView(
            path, exists=True, problem=f"{path.name} {_refused_text(kind_of(st.st_mode))}"
        )
    return os.fdopen(fd, "rb")


def _refused_text(kind: str) -> str:
    return f"is {kind}, not a regular file; refused and never followed"


def _unreadable_state(path: Path, exc: OSError) -> StateView:
    return StateView(path, exists=True, problem=f"cannot read {path.name}: {exc.strerror}")


def read_state_bytes(path: Path) -> bytes | StateView:
    """state.json's bytes, or the StateView that says why they cannot be read."""
    opened = open_state(path)
    if isinstance(opened, StateView):
        return opened
    with opened:
        try:
            return opened.read()
        except OSError as exc:
            return _unreadable_state(path, exc)


def load_state(specs: Directory, name: str, others: tuple[str, ...] = ()) -> StateView:
    """Read state.json (``name`` in the open specs directory); problems are described.

    ``others`` are the project files postflight writes besides it (TODO.md, errors.json, the
    lock): one that is a link or not a regular file makes the project unusable too (PF604),
    so nothing is written at all rather than state.json alone.
    """
    path = specs.child(name)
    try:
        raw, _ = specs.read(name)
    except FileNotFoundError:
        return StateView(path, exists=False, problem=f"{name} does not exist")
    except RefusedError as exc:
        if exc.kind == "a directory":
            return StateView(path, exists=True, problem=f"{name} is a directory")
        return StateView(path, exists=True, problem=f"{name} {exc.strerror}")
    except OSError as exc:
        return StateView(path, exists=True, problem=f"cannot read {name}: {exc.strerror}")
    refused = _refused_among(specs, others)
    if refused is not None:
        return StateView(path, exists=True, problem=refused)
    cached = STATE_CACHE.get(path, raw)
    if cached is not None:
        return cached
    doc, problem = parse_state(raw)
    if problem is not None:
        return StateView(path, exists=True, problem=f"{name}: {problem}")
    return STATE_CACHE.remember(path, raw, doc)


def _refused_among(specs: Directory, names: tuple[str, ...]) -> str | None:
    for other in names:
        try:
            st = specs.lstat(other)
        except OSError as exc:
            return f"cannot check {other}: {exc.strerror}"
        if st is not None and not stat.S_ISREG(st.st_mode):
            return (
                f"{other} is {kind_of(st.st_mode)}, not a regular file; refused and never "
                "followed (postflight writes it): replace it with a regular file"
            )
    return None
