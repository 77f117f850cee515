"""Listing what a scan reads: the metadata files of a specs directory, in task order.

``find_metadata_files`` yields a ``MetaFileRef`` per file, as the directory lists them;
``MetaFiles`` holds a whole specs directory's files in task order as names, which is what a
scan keeps until its last file (``pipeline.check.metadata_refs``). A task directory's name
(``TASK_DIR_RE``, ``parse_task_dir``) and its refusal when it is a link are here too. Reading
each file is ``metadata``'s.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, overload

from postflightd.errors import UsageError
from postflightd.fs.directory import Directory
from postflightd.models.files import META_NAME
from postflightd.rules.findings import Finding, finding

#: ASCII digits only: ``int()`` reads any Unicode digit, so "٢٦٤_x" would otherwise be task 264.
TASK_DIR_RE: Final = re.compile(r"([0-9]+)_(\S+)")


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


def find_metadata_files(specs: Directory) -> Iterator[MetaFileRef]:
    """Every ``specs/*/.return-meta.json`` one level down, never entering a symlinked dir."""
    base = str(specs.path)
    for name, refused in _metadata_dirs(specs):
        # One Path per file, built from a string: pathlib's parsing was a fifth of a scan.
        yield MetaFileRef(Path(base + os.sep + name + os.sep + META_NAME), name, refused)


def _metadata_dirs(specs: Directory) -> Iterator[tuple[str, Finding | None]]:
    """(task directory name, why it is refused or None) of each metadata file, by name."""
    try:
        entries = sorted(specs.names(), key=lambda e: e.name)
    except OSError as exc:
        # Not a per-file finding: an unlistable specs directory would look empty, and an
        # empty scan passes CI.
        raise UsageError(
            f"{specs.path}: cannot list the specs directory: {exc.strerror}; check its permissions"
        ) from None
    for entry in entries:
        # Interned: a Path interns its parts, so a ref's task_dir and its path's component
        # are one string, not two (6 MB at 100,000 files, held for the scan).
        name = sys.intern(entry.name)
        # Relative to the specs directory's descriptor; ``name`` is known not to be a link
        # (d_type) and the read that follows opens it with O_NOFOLLOW whatever it is by then.
        rel = name + os.sep + META_NAME
        try:
            if entry.is_symlink():
                # Never follow a task directory link (it may lead out of the root), but say so
                # when it would have held a metadata file (an lstat: nothing is read).
                os.stat(rel, dir_fd=specs.fd, follow_symlinks=False)
                refused: Finding | None = task_link_refused(name)
            elif entry.is_dir(follow_symlinks=False):
                os.stat(rel, dir_fd=specs.fd, follow_symlinks=False)
                refused = None
            else:
                continue
        except OSError:
            continue
        yield name, refused


def task_order(task_dir: str) -> tuple[int, int, str]:
    """Sort key of task directories: by number (the listing puts 100_x before 14_x), then the
    rest by name."""
    parsed = parse_task_dir(task_dir)
    return (0, parsed[0], task_dir) if parsed else (1, 0, task_dir)


class MetaFiles(Sequence[MetaFileRef]):
    """Metadata files of one specs directory, in task order, each ``MetaFileRef`` made when
    asked; a slice is a view, made of nothing until it is read.

    A scan holds the whole ordered list until its last file: as ``MetaFileRef``s with their
    ``Path`` that was ~480 bytes a file (48 MB at 100,000 files), as names ~75.
    """

    __slots__ = ("_base", "_names", "_refused", "_start", "_stop")

    def __init__(
        self,
        base: str,
        names: list[str],
        refused: dict[str, Finding],
        start: int = 0,
        stop: int | None = None,
    ) -> None:
        self._base = base
        self._names = names
        self._refused = refused
        self._start = start
        self._stop = len(names) if stop is None else stop

    @classmethod
    def find(cls, specs: Directory) -> MetaFiles:
        """``find_metadata_files`` of ``specs``, in task order."""
        names: list[str] = []
        refused: dict[str, Finding] = {}
        for name, why in _metadata_dirs(specs):
            names.append(name)
            if why is not None:
                refused[name] = why
        names.sort(key=task_order)
        return cls(str(specs.path), names, refused)

    def _ref(self, name: str) -> MetaFileRef:
        # The same string find_metadata_files builds its Path from.
        path = Path(self._base + os.sep + name + os.sep + META_NAME)
        return MetaFileRef(path, name, self._refused.get(name))

    def __len__(self) -> int:
        return self._stop - self._start

    @overload
    def __getitem__(self, index: int) -> MetaFileRef: ...

    @overload
    def __getitem__(self, index: slice) -> MetaFiles: ...

    def __getitem__(self, index: int | slice) -> MetaFileRef | MetaFiles:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                raise ValueError("MetaFiles slices are contiguous")
            stop = max(start, stop)
            return MetaFiles(
                self._base, self._names, self._refused, self._start + start, self._start + stop
            )
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self._ref(self._names[self._start + index])

    def __iter__(self) -> Iterator[MetaFileRef]:
        for i in range(self._start, self._stop):
            yield self._ref(self._names[i])
