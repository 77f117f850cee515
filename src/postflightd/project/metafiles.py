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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final, overload

from postflightd.errors import UsageError
from postflightd.fs.directory import Directory
from postflightd.models.files import META_NAME

if TYPE_CHECKING:
    from postflightd.rules.findings import Finding

#: ASCII digits only: ``int()`` reads any Unicode digit, so "٢٦٤_x" would otherwise be task 264.
TASK_DIR_RE: Final = re.compile(r"([0-9]+)_(\S+)")
#: What follows a task directory's name in its metadata file's path.
_META_SUFFIX: Final = os.sep + META_NAME


@dataclass(frozen=True, slots=True)
class MetaFileRef:
    """A metadata file found under a specs directory.

    Its path is kept as text, and ``path`` builds the ``Path`` when asked: a scan that prints
    JSON never needs one, and building one per file cost 3.5 us of a file's 100.
    """

    path_text: str
    task_dir: str
    #: set when the path is refused without reading it (a symlinked task directory).
    refused: Finding | None = None

    @property
    def path(self) -> Path:
        return Path(self.path_text)

    @classmethod
    def at(cls, path: Path) -> MetaFileRef:
        """The ref of the metadata file ``path`` (``specs/<task directory>/<file>``)."""
        return cls(str(path), path.parent.name)


def parse_task_dir(name: str) -> tuple[int, str] | None:
    """``259_prove_completeness`` / ``014_x`` -> (number, slug); None if not of that form."""
    number, sep, slug = name.partition("_")
    # The common name answered with string methods (0.37 against the pattern's 0.54 us, and a
    # scan asks three times a file): ASCII digits, "_", then printable characters but the
    # space, which holds no whitespace. Anything else is the pattern's to judge.
    plain = slug.isprintable() and " " not in slug
    if sep and slug and plain and number.isdigit() and number.isascii():
        return int(number), slug
    match = TASK_DIR_RE.fullmatch(name)
    if match is None:
        return None
    return int(match.group(1)), match.group(2)


def task_link_refused(name: str) -> Finding:
    """PF100 for a task directory that is a symbolic link (never followed)."""
    # The rules' registry, with such a link only: listing the files of a stop needs none.
    from postflightd.rules.findings import finding

    return finding(
        "PF100",
        "",
        f"task directory {name!r} is a symbolic link; it is not followed: move the task "
        "directory into the specs directory",
    )


def find_metadata_files(specs: Directory) -> Iterator[MetaFileRef]:
    """Every ``specs/*/.return-meta.json`` one level down, never entering a symlinked dir, by
    the task directories' names."""
    prefix = str(specs.path) + os.sep
    for name, refused in sorted(_metadata_dirs(specs)):
        yield MetaFileRef(prefix + name + _META_SUFFIX, name, refused)


def _entries(specs: Directory) -> list[os.DirEntry[str]]:
    try:
        return specs.names()
    except OSError as exc:
        # Not a per-file finding: an unlistable specs directory would look empty, and an
        # empty scan passes CI.
        raise UsageError(
            f"{specs.path}: cannot list the specs directory: {exc.strerror}; check its permissions"
        ) from None


def _metadata_dirs(
    specs: Directory, entries: list[os.DirEntry[str]] | None = None, *, look: bool = True
) -> list[tuple[str, Finding | None]]:
    """(task directory name, why it is refused or None) of each metadata file, as listed
    (``entries``: the specs directory's, when already listed); ``look=False``: of each task
    directory, whether it holds a metadata file or not (``has_metadata_file`` asks later)."""
    if entries is None:
        entries = _entries(specs)
    found: list[tuple[str, Finding | None]] = []
    fd = specs.fd
    for entry in entries:
        # A symbolic link is never followed into (it may lead out of the root), but it is
        # reported when it would have held a metadata file; anything else is not a task.
        try:
            # d_type, or an lstat where the file system does not give it (which can fail).
            is_dir = entry.is_dir(follow_symlinks=False)
            if not is_dir and not entry.is_symlink():
                continue
        except OSError:
            continue
        name = entry.name
        if not look or _holds_metadata(fd, name):
            found.append((name, None if is_dir else task_link_refused(name)))
    return found


def _holds_metadata(fd: int, name: str) -> bool:
    # Relative to the specs directory's descriptor (the read that follows opens the task
    # directory with O_NOFOLLOW whatever it is by then), and asked with faccessat, which
    # builds no stat result: half the cost of an lstat (14 against 25 ms at 10,000 task
    # directories). Nothing is read.
    return os.access(name + _META_SUFFIX, os.F_OK, dir_fd=fd, follow_symlinks=False)


def has_metadata_file(specs: Directory, ref: MetaFileRef) -> bool:
    """Whether the task directory of ``ref`` holds a metadata file now: what the listing asks
    of each task directory, for a listing made without looking (``MetaFiles.find``'s
    ``look``)."""
    return _holds_metadata(specs.fd, ref.task_dir)


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
        self._base = base if base.endswith(os.sep) else base + os.sep
        self._names = names
        self._refused = refused
        self._start = start
        self._stop = len(names) if stop is None else stop

    @classmethod
    def find(
        cls, specs: Directory, entries: list[os.DirEntry[str]] | None = None, *, look: bool = True
    ) -> MetaFiles:
        """``find_metadata_files`` of ``specs``, in task order (``entries``: the specs
        directory's, when already listed). ``look=False``: every task directory, in the same
        order, not looked into: whoever checks a ref asks ``has_metadata_file`` first and
        skips one without a file, so that a large scan's forked workers each look into the
        directories of their own chunks (``pipeline.stream``)."""
        refused: dict[str, Finding] = {}
        # Sorted by name, then (stably) by number: ``task_order``'s order, without a tuple
        # key per name to build and compare.
        numbers: dict[str, int] = {}
        others: list[str] = []
        for name, why in _metadata_dirs(specs, entries, look=look):
            if why is not None:
                refused[name] = why
            parsed = parse_task_dir(name)
            if parsed is None:
                others.append(name)
            else:
                numbers[name] = parsed[0]
        names = sorted(numbers)
        names.sort(key=numbers.__getitem__)
        names += sorted(others)
        return cls(str(specs.path), names, refused)

    def _ref(self, name: str) -> MetaFileRef:
        # The same text find_metadata_files gives.
        return MetaFileRef(self._base + name + _META_SUFFIX, name, self._refused.get(name))

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
