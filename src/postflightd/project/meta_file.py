"""Reading one metadata file, and what is known of its task: the marker and the context.

``read_task`` opens a task directory once and reads its metadata file and marker relative to
it; ``task_context`` joins what the directory's name, state.json and the marker say of the
task into the ``rules.context.TaskContext`` the rules check against. Listing the files is
``metafiles``'; state.json is ``state``'s; the artifact probe is ``artifacts``'.

Reading yields values, never exceptions: a metadata file that cannot be used comes back with
the finding that says why (PF100-PF105).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from postflightd.fs.directory import Directory, DirIdentity, FileIdentity, RefusedError
from postflightd.models.files import MARKER_NAME, META_NAME, parse_json
from postflightd.project.metafiles import MetaFileRef, parse_task_dir, task_link_refused
from postflightd.project.state import StateView
from postflightd.rules.context import TaskContext
from postflightd.rules.findings import Finding, finding

MAX_MARKER_BYTES: Final = 64 * 1024


@dataclass(frozen=True, slots=True)
class Loaded:
    """One metadata file as read: its bytes and parsed value, or the finding that stopped it."""

    #: the file's fstat when it was read (None: not read); what ``identity`` and ``written``
    #: are made of, when asked: a scan reads 10,000 files and asks neither's record of one.
    stat: os.stat_result | None = None
    raw: bytes | None = None
    doc: Any = None
    failure: Finding | None = None
    #: the task directory it was read from: clean-up works only in that very directory.
    dir_identity: DirIdentity | None = None

    @property
    def identity(self) -> FileIdentity | None:
        """The file's identity when it was read (what deleting it checks); None: not read."""
        return None if self.stat is None else FileIdentity.of(self.stat)

    @property
    def written(self) -> datetime | None:
        """When the file was last written (its modification time, UTC); None: not read."""
        if self.stat is None:
            return None
        return datetime.fromtimestamp(self.stat.st_mtime_ns / 1e9, UTC)


def read_task(
    specs: Directory,
    ref: MetaFileRef,
    max_bytes: int,
    *,
    identify: bool = True,
    document: bytes | None = None,
) -> tuple[Loaded, Marker | None]:
    """Open the task directory of ``ref`` once and read its metadata file and its marker.

    Both are read relative to the one descriptor, so a task directory swapped for a link at
    any moment is either refused (PF100) or not seen at all: nothing outside is ever read.
    ``identify``: note the directory's identity (``Loaded.dir_identity``), which clean-up
    needs and a read-only scan does not. ``document``: the metadata to judge instead of the
    file's (what an agent is about to write, asked of ``postflightd mcp``); the file is not read.
    """
    if ref.refused is not None:
        return Loaded(failure=ref.refused), None
    try:
        task = specs.subdir(ref.task_dir, identify=identify)
    except FileNotFoundError:
        return Loaded(failure=_vanished()), None
    except RefusedError as exc:
        if exc.kind == "a symbolic link":
            return Loaded(failure=task_link_refused(ref.task_dir)), None
        return Loaded(failure=finding("PF100", "", _not_regular_dir(exc.kind))), None
    except OSError as exc:
        return Loaded(failure=_unreadable(exc)), None
    try:  # not a with block: this runs for every file of a scan
        if document is not None:
            return loaded_document(document, max_bytes), read_marker(task)
        return read_metadata(task, max_bytes), read_marker(task)
    finally:
        task.close()


def read_metadata(task: Directory, max_bytes: int) -> Loaded:
    """Read the metadata file of the open task directory: no symlinks, no FIFOs, bounded size."""
    try:
        raw, st = task.read(META_NAME, max_bytes)
    except FileNotFoundError:
        return Loaded(failure=_vanished())
    except RefusedError as exc:
        return Loaded(failure=finding("PF100", "", _not_regular_kind(exc.kind)))
    except OSError as exc:
        return Loaded(failure=_unreadable(exc))
    where = task.identity
    if st.st_size > max_bytes or len(raw) > max_bytes:
        too_big = _too_big(max(st.st_size, len(raw)), max_bytes)
        return Loaded(st, failure=too_big, dir_identity=where)
    doc, problem = parse_json(raw)
    if problem is not None:
        return Loaded(st, raw, failure=finding("PF102", "", problem), dir_identity=where)
    return Loaded(st, raw, doc, dir_identity=where)


def loaded_document(raw: bytes, max_bytes: int) -> Loaded:
    """A document given as bytes, judged as a file of those bytes would be (PF101, PF102)."""
    if len(raw) > max_bytes:
        return Loaded(raw=None, failure=_too_big(len(raw), max_bytes))
    doc, problem = parse_json(raw)
    if problem is not None:
        return Loaded(raw=raw, failure=finding("PF102", "", problem))
    return Loaded(raw=raw, doc=doc)


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


@dataclass(frozen=True, slots=True)
class Marker:
    """The ``.postflight-pending`` marker a workflow writes before delegating."""

    session_id: str | None = None
    operation: str | None = None
    problem: str | None = None


def read_marker(task: Directory) -> Marker | None:
    """The marker of the open task directory; None when there is none."""
    if not task.exists(MARKER_NAME):
        # Most task directories have none: asked without an exception (a failed open raised
        # one per file of a scan). One put there since is read next time.
        return None
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


def task_context(
    name: str, state: StateView, marker: Marker | None, specs_dir: str = "specs"
) -> TaskContext:
    """What is known of the task a metadata file in task directory ``name`` belongs to."""
    return parsed_task_context(name, parse_task_dir(name), state, marker, specs_dir)


def parsed_task_context(
    name: str,
    parsed: tuple[int, str] | None,
    state: StateView,
    marker: Marker | None,
    specs_dir: str = "specs",
    *,
    written: datetime | None = None,
    first_seen: datetime | None = None,
) -> TaskContext:
    """``task_context`` with ``parse_task_dir(name)`` given (a scan has it already);
    ``written``: the metadata file's modification time, ``first_seen``: when postflightd
    first saw it (None: now)."""
    number, slug = parsed if parsed else (None, None)
    if marker is None:
        # The usual case, without the marker's fields to look at.
        return TaskContext(
            name,
            number,
            slug,
            state.usable,
            state.tasks.get(number) if number is not None else None,
            specs_dir=specs_dir,
            written=written,
            first_seen=first_seen,
        )
    marker_findings: tuple[Finding, ...] = ()
    if marker.problem is not None:
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
        marker_session=marker.session_id,
        marker_operation=marker.operation,
        marker_findings=marker_findings,
        specs_dir=specs_dir,
        written=written,
        first_seen=first_seen,
    )
