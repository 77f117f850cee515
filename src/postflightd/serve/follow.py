"""What tells the dashboard's poller that something may have changed, where no watch event
does: the daemon's lock and errors.json's and state.json's identities of each root, the journal's
directory (inotify), and the stat per task directory of a tree that sends no events.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from postflightd.daemon.watch import inotify
from postflightd.fs.directory import Directory
from postflightd.fs.locks import lock_holder
from postflightd.models.files import META_NAME

#: The journal's files whose writes mean new rows (not the shared-memory index).
JOURNAL_SUFFIXES: Final = ("", "-wal", "-journal")


@dataclass(frozen=True, slots=True)
class Tree:
    """One root as the poller follows it: its specs directory and the files named there."""

    root: Path
    specs: str
    state_file: str = "state.json"
    errors_file: str = "errors.json"
    observer: str = "auto"


def tree_signature(roots: Iterable[tuple[Path, str]]) -> tuple[Any, ...]:
    """What changes when a metadata file appears, changes or goes: a stat per task directory.

    Only for a tree polled because it sends no events (a network filesystem, the inotify
    limits reached). ``roots``: each root with its specs directory's name. Links are not
    followed (``status`` refuses them and says so; a change of the link itself is seen here).
    """
    sig: list[Any] = []
    for root, specs_name in roots:
        specs = f"{root}{os.sep}{specs_name}"
        try:
            entries = list(os.scandir(specs))
        except OSError as exc:
            sig.append((specs, exc.errno))
            continue
        for entry in entries:
            try:
                if not entry.is_dir(follow_symlinks=False):
                    continue
                # os.stat on a string: this runs for every task directory
                st = os.stat(f"{entry.path}{os.sep}{META_NAME}", follow_symlinks=False)  # noqa: PTH116
            except OSError:
                continue
            sig.append((entry.name, st.st_mtime_ns, st.st_size, st.st_ino))
    sig.sort()
    return tuple(sig)


def file_identity(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path, follow_symlinks=False)  # noqa: PTH116 - a plain string, per tick
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def context_signature(trees: Iterable[Tree]) -> tuple[Any, ...]:
    """What a waiting file's reason and the daemon's state depend on, outside the events: which
    daemon holds each root, and errors.json's and state.json's identities."""
    sig: list[Any] = []
    for tree in trees:
        specs = f"{tree.root}{os.sep}{tree.specs}"
        try:
            with Directory.anchor(Path(specs)) as directory:
                holder = lock_holder(directory)
        except OSError:
            holder = None
        sig.append(
            (
                holder,
                file_identity(f"{specs}{os.sep}{tree.errors_file}"),
                file_identity(f"{specs}{os.sep}{tree.state_file}"),
            )
        )
    return tuple(sig)


class JournalWatch:
    """inotify on the journal's directory, for writes to the journal's own files; ``changed``
    says whether any came since it was last asked. None of it where inotify is missing or the
    directory does not exist yet (then the journal is polled by a stat)."""

    def __init__(self, path: Path) -> None:
        self._names = {os.fsencode(path.name + s) for s in JOURNAL_SUFFIXES}
        self._ino: inotify.Inotify | None = None
        if not inotify.available():
            return
        mask = (
            inotify.IN_MODIFY
            | inotify.IN_CLOSE_WRITE
            | inotify.IN_CREATE
            | inotify.IN_MOVED_TO
            | inotify.IN_DELETE
            | inotify.IN_ONLYDIR
        )
        try:
            ino = inotify.Inotify()
        except OSError:
            return
        try:
            ino.add_watch(os.fsencode(path.parent), mask)
        except OSError:
            ino.close()
            return
        self._ino = ino

    @property
    def fd(self) -> int:
        return self._ino.fd if self._ino is not None else -1

    def changed(self) -> bool:
        """Whether the journal's files were written since the last call (reads the events)."""
        if self._ino is None:
            return False
        try:
            events = self._ino.read()
        except OSError:
            return True
        return any(
            name in self._names or mask & inotify.IN_Q_OVERFLOW for _, mask, _, name in events
        )

    def close(self) -> None:
        if self._ino is not None:
            self._ino.close()
            self._ino = None
