"""Reading what postflight works on: metadata files, markers, state.json (``metafiles`` lists
the metadata files of a specs directory).

Reading yields values, never exceptions: a metadata file that cannot be used comes back with
the finding that says why (PF100-PF105); a state.json that cannot be used comes back as a
``StateView`` whose ``problem`` says why (PF604).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Final

from postflightd.fs.directory import (
    FILE_FLAGS,
    Directory,
    DirIdentity,
    FileIdentity,
    RefusedError,
    kind_of,
)
from postflightd.rules.findings import Finding, finding
from postflightd.rules.metadata import TaskContext
from postflightd.rules.toolkit import ArtifactProbe, ArtifactState

META_NAME: Final = ".return-meta.json"
MARKER_NAME: Final = ".postflight-pending"
LOOP_GUARD_NAME: Final = ".postflight-loop-guard"
#: ASCII digits only: ``int()`` reads any Unicode digit, so "٢٦٤_x" would otherwise be task 264.
TASK_DIR_RE: Final = re.compile(r"([0-9]+)_(\S+)")
MAX_MARKER_BYTES: Final = 64 * 1024


@dataclass(frozen=True, slots=True)
class Loaded:
    """One metadata file as read: its bytes and parsed value, or the finding that stopped it."""

    path: Path
    identity: FileIdentity | None = None
    raw: bytes | None = None
    doc: Any = None
    failure: Finding | None = None
    #: the task directory it was read from: clean-up works only in that very directory.
    dir_identity: DirIdentity | None = None


@dataclass(frozen=True, slots=True)
class MetaFileRef:
    """A metadata file found under a specs directory."""

    path: Path
    task_dir: str
    #: set when the path is refused without reading it (a symlinked task directory).
    refused: Finding | None = None


def parse_task_dir(name: str) -> tuple[int, str] | None:
    """``259_prove_completeness`` / ``014_x`` -> (number, slug); None if not of that form."""
    match = TASK_DIR_RE.fullmatch(name)
    if match is None:
        return None
    return int(match.group(1)), match.group(2)


def task_link_refused(name: str) -> Finding:
    """PF100 for a task directory that is a symbolic link (never followed)."""
    return finding(
        "PF100",
        "",
        f"task directory {name!r} is a symbolic link; it is not followed: move the task "
        "directory into the specs directory",
    )


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def parse_json(raw: bytes) -> tuple[Any, str | None]:
    """(value, None) or (None, why it is not JSON) for a file's bytes."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})"
    if text.startswith("\ufeff"):
        return None, "starts with a byte-order mark: write plain UTF-8 without a BOM"
    if not text.strip():
        return None, "the file is empty"
    try:
        return json.loads(text, parse_constant=_reject_constant), None
    except json.JSONDecodeError as exc:
        truncated = exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string")
        hint = ": the file ends early (truncated, or still being written)" if truncated else ""
        return None, f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}{hint}"
    except ValueError as exc:
        return None, str(exc)
    except RecursionError:
        return None, "JSON nested too deeply to read"


def read_task(specs: Directory, ref: MetaFileRef, max_bytes: int) -> tuple[Loaded, Marker | None]:
    """Open the task directory of ``ref`` once and read its metadata file and its marker.

    Both are read relative to the one descriptor, so a task directory swapped for a link at
    any moment is either refused (PF100) or not seen at all: nothing outside is ever read.
    """
    if ref.refused is not None:
        return Loaded(ref.path, failure=ref.refused), None
    try:
        task = specs.subdir(ref.task_dir)
    except FileNotFoundError:
        return Loaded(ref.path, failure=_vanished()), None
    except RefusedError as exc:
        if exc.kind == "a symbolic link":
            return Loaded(ref.path, failure=task_link_refused(ref.task_dir)), None
        return Loaded(ref.path, failure=finding("PF100", "", _not_regular_dir(exc.kind))), None
    except OSError as exc:
        return Loaded(ref.path, failure=_unreadable(exc)), None
    with task:
        loaded = read_metadata(task, ref.path, max_bytes)
        return loaded, read_marker(task)


def read_metadata(task: Directory, path: Path, max_bytes: int) -> Loaded:
    """Read the metadata file of the open task directory: no symlinks, no FIFOs, bounded size."""
    try:
        raw, st = task.read(META_NAME, max_bytes)
    except FileNotFoundError:
        return Loaded(path, failure=_vanished())
    except RefusedError as exc:
        return Loaded(path, failure=finding("PF100", "", _not_regular_kind(exc.kind)))
    except OSError as exc:
        return Loaded(path, failure=_unreadable(exc))
    identity = FileIdentity.of(st)
    where = task.identity
    if st.st_size > max_bytes or len(raw) > max_bytes:
        too_big = _too_big(max(st.st_size, len(raw)), max_bytes)
        return Loaded(path, identity=identity, failure=too_big, dir_identity=where)
    doc, problem = parse_json(raw)
    if problem is not None:
        failure = finding("PF102", "", problem)
        return Loaded(path, identity, raw, failure=failure, dir_identity=where)
    return Loaded(path, identity, raw, doc, dir_identity=where)


def _vanished() -> Finding:
    return finding("PF105", "", "the file vanished before it was read")


def _not_regular_kind(kind: str) -> str:
    return f"the path is {kind}; it is refused and never followed: write a regular file"


def _not_regular_dir(kind: str) -> str:
    return f"the task directory is {kind}; it is refused: make it a plain directory"


def _too_big(size: int, limit: int) -> Finding:
    return finding(
        "PF101",
        "",
        f"file is {size} bytes, over the limit of {limit} (validation.max_file_bytes)",
    )


def _unreadable(exc: OSError) -> Finding:
    return finding(
        "PF105", "", f"cannot read the file: {exc.strerror or exc}; check its permissions"
    )


# --- the project: state.json and markers ----------------------------------------------------


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
    """Why a parsed state.json is not of the shape of SPEC 1, or None."""
    if not isinstance(doc, dict):
        return "the top-level value is not a JSON object"
    projects = doc.get("active_projects")
    if not isinstance(projects, list):
        return '"active_projects" is missing or not an array'
    for i, task in enumerate(projects):
        if not isinstance(task, dict):
            return f"active_projects[{i}] is not an object"
        number = task.get("project_number")
        if not isinstance(number, int) or isinstance(number, bool):
            return f"active_projects[{i}].project_number is missing or not an integer"
    return None


def tasks_by_number(doc: Mapping[str, Any]) -> dict[int, Mapping[str, Any]]:
    return {t["project_number"]: t for t in doc["active_projects"]}


class StateCache:
    """Parsed state.json documents by path, with the bytes they were parsed from.

    Every postflight rewrites state.json and the next one reads it again: a 1,000-task file
    costs ~5 ms to parse, a quarter of the watch latency budget, and ~0.3 ms to read and
    compare. Keyed on content, not on (inode, size, mtime): an in-place rewrite of the same
    size within one tick of the file system's clock keeps all three. One per process
    (``STATE_CACHE``): the daemon's roots and in-process commands share it; tests clear it.
    """

    def __init__(self) -> None:
        self._entries: dict[str, tuple[bytes, StateView]] = {}

    def get(self, path: Path, raw: bytes | None) -> StateView | None:
        """The usable state.json parsed earlier from exactly these bytes, if any."""
        entry = self._entries.get(str(path))
        return entry[1] if entry is not None and raw is not None and entry[0] == raw else None

    def remember(self, path: Path, raw: bytes, doc: dict[str, Any]) -> StateView:
        """Record that ``raw`` (already checked for shape) parses to ``doc``."""
        view = StateView(path, exists=True, doc=doc, tasks=tasks_by_number(doc))
        self._entries[str(path)] = (raw, view)
        return view

    @property
    def size(self) -> int:
        """How many state.json files are held."""
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()


STATE_CACHE: Final = StateCache()


def open_state(path: Path) -> BinaryIO | StateView:
    """state.json open for reading, or the StateView that says why it cannot be.

    For ``scan``'s streaming read (``scanstate``): never through a link at the name, never a
    FIFO (O_NOFOLLOW | O_NONBLOCK, then fstat), like every file of the tree.
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
    doc, problem = parse_json(raw)
    if problem is None:
        problem = state_shape_problem(doc)
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


@dataclass(frozen=True, slots=True)
class Marker:
    """The ``.postflight-pending`` marker a workflow writes before delegating."""

    session_id: str | None = None
    operation: str | None = None
    problem: str | None = None


def read_marker(task: Directory) -> Marker | None:
    """The marker of the open task directory; None when there is none."""
    try:
        raw, st = task.read(MARKER_NAME, MAX_MARKER_BYTES)
    except FileNotFoundError:
        return None
    except RefusedError:
        return Marker(problem="not a regular file of reasonable size")
    except OSError as exc:
        return Marker(problem=f"cannot be read: {exc.strerror}")
    if max(st.st_size, len(raw)) > MAX_MARKER_BYTES:
        return Marker(problem="not a regular file of reasonable size")
    if not raw.strip():
        # Some workflows `touch` the marker: it exists but names nothing.
        return Marker()
    doc, problem = parse_json(raw)
    if problem is not None or not isinstance(doc, dict):
        return Marker(problem=problem or "not a JSON object")
    sid, op = doc.get("session_id"), doc.get("operation")
    return Marker(
        session_id=sid if isinstance(sid, str) and sid else None,
        operation=op if isinstance(op, str) and op else None,
    )


def task_context(name: str, state: StateView, marker: Marker | None) -> TaskContext:
    """What is known of the task a metadata file in task directory ``name`` belongs to."""
    parsed = parse_task_dir(name)
    number, slug = parsed if parsed else (None, None)
    marker_findings: tuple[Finding, ...] = ()
    if marker is not None and marker.problem is not None:
        marker_findings = (
            finding(
                "PF605",
                "",
                f"{MARKER_NAME} {marker.problem}; it is treated as naming no session",
            ),
        )
    return TaskContext(
        dir_name=name,
        number=number,
        slug=slug,
        state_known=state.usable,
        task=state.tasks.get(number) if number is not None else None,
        marker_session=marker.session_id if marker else None,
        marker_operation=marker.operation if marker else None,
        marker_findings=marker_findings,
    )


#: How many resolved directories an artifact probe remembers (``artifact_probe``).
PROBE_CACHE_DIRS: Final = 4096


def artifact_probe(root: Path) -> ArtifactProbe:
    """An ArtifactProbe for paths relative to ``root``, resolving symlinks on the way."""
    root_real = os.path.realpath(root)
    prefix = root_real.rstrip(os.sep) + os.sep
    parents: dict[str, str] = {root_real: root_real}

    def inside(real: str) -> bool:
        return real == root_real or real.startswith(prefix)

    def real_dir(path: str) -> str:
        # Resolved one component at a time through the cache: a new task directory costs
        # one lstat, where os.path.realpath would lstat every component of the path again.
        known = parents.get(path)
        if known is not None:
            return known
        if len(parents) >= PROBE_CACHE_DIRS:
            # Bounded: files are checked task by task, so a task's directories are not asked
            # for again; emptied, the cache costs one lstat per shared parent (specs/) to
            # refill, where unbounded it held ~200 bytes a task for the whole scan.
            parents.clear()
            parents[root_real] = root_real
        head, tail = os.path.split(path)
        if not tail or head == path:
            real = os.path.realpath(path)
        elif tail in {".", ".."}:
            real = os.path.realpath(os.path.join(real_dir(head), tail))
        else:
            real = os.path.join(real_dir(head), tail)
            with contextlib.suppress(OSError):
                if stat.S_ISLNK(os.lstat(real).st_mode):
                    real = os.path.realpath(real)
        parents[path] = real
        return real

    def probe(rel: str) -> ArtifactState:
        # rel is relative (the rules refuse absolute paths before probing): plain concatenation.
        head, tail = os.path.split(prefix + rel)
        parent = real_dir(head)
        full = os.path.join(parent, tail) if tail else parent
        try:
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                full = os.path.realpath(full)
                st = os.stat(full)
        except FileNotFoundError:
            return ArtifactState.OUTSIDE if not inside(full) else ArtifactState.MISSING
        except OSError:
            return ArtifactState.MISSING
        if not inside(full):
            return ArtifactState.OUTSIDE
        if not stat.S_ISREG(st.st_mode):
            return ArtifactState.NOT_A_FILE
        return ArtifactState.EMPTY if st.st_size == 0 else ArtifactState.OK

    return probe
