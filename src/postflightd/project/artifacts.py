"""The artifact probe: what an artifact path named in a metadata file is on disk.

The rules ask it for each artifact path (relative to the project root); it answers with an
``ArtifactState`` (ok, missing, empty, not a file, outside the root), resolving symbolic links
on the way. It is the scan's hot loop at 10,000 files, hence ``os.path`` on plain strings
rather than ``pathlib``.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import Final

from postflightd.rules.context import ArtifactState

#: How many resolved directories an artifact probe remembers (``artifact_probe``).
PROBE_CACHE_DIRS: Final = 4096


def artifact_probe(root: Path) -> DiskProbe:
    """An ArtifactProbe for paths relative to ``root``, resolving symlinks on the way."""
    return DiskProbe(root)


class DiskProbe:
    """What an artifact path relative to the root is on disk (an ``ArtifactProbe``).

    Directories are resolved one component at a time through a bounded cache of their real
    paths; ``known_directory`` tells it of a directory the reader has just opened without
    following links, so the probe does not ``lstat`` it again.
    """

    __slots__ = ("_parents", "_prefix", "_root_real")

    def __init__(self, root: Path) -> None:
        self._root_real = os.path.realpath(root)
        self._prefix = self._root_real.rstrip(os.sep) + os.sep
        self._parents: dict[str, str] = {self._root_real: self._root_real}

    def known_directory(self, rel: str) -> None:
        """``rel`` (relative to the root, ``/``-separated) was just opened component by component
        without following a link: it is its own real path. A name that is not plain (an empty,
        ``.`` or ``..`` component) is ignored: the probe resolves it as before."""
        parts = rel.split("/")
        if "" in parts or "." in parts or ".." in parts:
            return
        path = self._prefix + rel.replace("/", os.sep)
        self._remember(path, path)

    def _remember(self, path: str, real: str) -> None:
        parents = self._parents
        if len(parents) >= PROBE_CACHE_DIRS:
            # Bounded: files are checked task by task, so a task's directories are not asked
            # for again; emptied, the cache costs one lstat per shared parent (specs/) to
            # refill, where unbounded it held ~200 bytes a task for the whole scan.
            parents.clear()
            parents[self._root_real] = self._root_real
        parents[path] = real

    def _inside(self, real: str) -> bool:
        return real == self._root_real or real.startswith(self._prefix)

    def _real_dir(self, path: str) -> str:
        # Resolved one component at a time through the cache: a new task directory costs
        # one lstat, where os.path.realpath would lstat every component of the path again.
        known = self._parents.get(path)
        if known is not None:
            return known
        head, _, tail = path.rpartition(os.sep)
        if head and tail and tail not in {".", ".."} and not head.endswith(os.sep):
            # The usual case, ".../specs/14_x/reports": what os.path.split gives, for less.
            parent = self._real_dir(head)
            real = (parent if parent.endswith(os.sep) else parent + os.sep) + tail
            with contextlib.suppress(OSError):
                if stat.S_ISLNK(os.lstat(real).st_mode):
                    real = os.path.realpath(real)
            self._remember(path, real)
            return real
        head, tail = os.path.split(path)
        if not tail or head == path:
            real = os.path.realpath(path)
        elif tail in {".", ".."}:
            real = os.path.realpath(os.path.join(self._real_dir(head), tail))
        else:
            real = os.path.join(self._real_dir(head), tail)
            with contextlib.suppress(OSError):
                if stat.S_ISLNK(os.lstat(real).st_mode):
                    real = os.path.realpath(real)
        self._remember(path, real)
        return real

    def __call__(self, rel: str) -> ArtifactState:
        # rel is relative (the rules refuse absolute paths before probing): plain concatenation.
        path = self._prefix + rel
        head, _, tail = path.rpartition(os.sep)
        if tail and not head.endswith(os.sep):
            # What os.path.split and os.path.join give here, for less (the scan's hot loop).
            parent = self._parents.get(head) or self._real_dir(head)
            full = (parent if parent.endswith(os.sep) else parent + os.sep) + tail
        else:
            head, tail = os.path.split(path)
            parent = self._real_dir(head)
            full = os.path.join(parent, tail) if tail else parent
        try:
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                full = os.path.realpath(full)
                st = os.stat(full)
        except FileNotFoundError:
            return ArtifactState.OUTSIDE if not self._inside(full) else ArtifactState.MISSING
        except OSError:
            return ArtifactState.MISSING
        if not self._inside(full):
            return ArtifactState.OUTSIDE
        if not stat.S_ISREG(st.st_mode):
            return ArtifactState.NOT_A_FILE
        return ArtifactState.EMPTY if st.st_size == 0 else ArtifactState.OK
