"""The artifact probe: what an artifact path named in a metadata file is on disk.

The rules ask it for each artifact path (relative to the project root); it answers with an
``ArtifactState`` (ok, missing, empty, not a file, outside the root, or no name the OS can
take), resolving symbolic links
on the way. It is the scan's hot loop at 10,000 files, hence ``os.path`` on plain strings
rather than ``pathlib``.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import Final

from postflightd.rules.probe import ArtifactState

#: How many resolved directories an artifact probe remembers (``artifact_probe``).
PROBE_CACHE_DIRS: Final = 4096


def artifact_probe(root: Path, *, anchored: bool = False) -> DiskProbe:
    """An ArtifactProbe for paths relative to ``root``, resolving symlinks on the way.

    ``anchored``: the probe holds a descriptor of the root and asks the disk relative to it
    (close it with ``close()``, as ``Project`` does).
    """
    return DiskProbe(root, anchored=anchored)


#: Opening the root only to stat relative to it: no read access needed, no inotify events.
_ANCHOR_FLAGS: Final = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_CLOEXEC


class DiskProbe:
    """What an artifact path relative to the root is on disk (an ``ArtifactProbe``).

    Directories are resolved one component at a time through a bounded cache of their real
    paths; ``known_directory`` tells it of a directory the reader has just opened without
    following links, so the probe does not ``lstat`` it again.

    Anchored, a path whose directories hold no link (the usual case) is asked relative to a
    descriptor of the root: the kernel walks the path's few components, not the root's
    absolute path again for every ``lstat`` (two lstats an artifact: 8.5 -> 5.0 us at
    10,000 artifacts). Any link on the way, or a name that is not plain, takes the absolute
    resolution below, as unanchored.
    """

    __slots__ = (
        "_anchor",
        "_anchored",
        "_parents",
        "_plain",
        "_prefix",
        "_root_real",
    )

    def __init__(self, root: Path, *, anchored: bool = False) -> None:
        self._root_real = os.path.realpath(root)
        self._prefix = self._root_real.rstrip(os.sep) + os.sep
        self._parents: dict[str, str] = {self._root_real: self._root_real}
        #: root-relative directories reached through plain names and no link ("" the root).
        self._plain: set[str] = {""}
        self._anchored = anchored and os.stat in os.supports_dir_fd
        self._anchor = -1

    def close(self) -> None:
        """Close the root's descriptor, if it was opened; the probe answers on, unanchored."""
        fd, self._anchor, self._anchored = self._anchor, -1, False
        if fd >= 0:
            os.close(fd)

    def __del__(self) -> None:
        # A safety net, as for fs.directory.Directory: every owner closes it.
        if getattr(self, "_anchor", -1) >= 0:
            self.close()

    def known_directory(self, rel: str, name: str | None = None) -> None:
        """``rel`` (relative to the root, ``/``-separated; with ``name``, its entry ``name``)
        was just opened component by component without following a link: it is its own real
        path. A name that is not plain (an empty, ``.`` or ``..`` component) is ignored: the
        probe resolves it as before."""
        if name is not None:
            if "/" in name:  # not one entry
                return
            rel = f"{rel}/{name}"
        if not self._plain_text(rel):
            return
        if self._anchored:
            # Asked relative to the root from here; the absolute resolution, for a link
            # further down, lstats it once should it come to that.
            self._remember_plain(rel)
        else:
            path = self._prefix + rel.replace("/", os.sep)
            self._remember(path, path)

    @staticmethod
    def _plain_text(rel: str) -> bool:
        """Whether every ``/``-separated component of ``rel`` is a plain name."""
        parts = rel.split("/")
        return not ("" in parts or "." in parts or ".." in parts)

    def _remember_plain(self, rel: str) -> None:
        plain = self._plain
        if len(plain) >= PROBE_CACHE_DIRS:
            plain.clear()  # bounded as _parents is
            plain.add("")
        plain.add(rel)

    def _is_plain_dir(self, rel: str, fd: int) -> bool:
        """Whether directory ``rel`` is reached through plain names and no link (asked
        relative to the root's descriptor ``fd``, one component at a time, through the cache,
        in a loop: an artifact path may hold a thousand components)."""
        plain = self._plain
        below: list[str] = []  # names from the nearest directory known plain down to rel
        head = rel
        while head not in plain:
            head, _, tail = head.rpartition("/")
            if not tail or tail in {".", ".."}:
                return False
            below.append(tail)
        for tail in reversed(below):
            head = f"{head}/{tail}" if head else tail
            try:
                if stat.S_ISLNK(os.stat(head, dir_fd=fd, follow_symlinks=False).st_mode):
                    return False
            except OSError:
                pass  # nothing there (or not a directory): the file under it is missing
            self._remember_plain(head)
        return True

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
        # A loop, not a recursion: an artifact path may hold a thousand components.
        unknown: list[str] = []  # the path and its ancestors up to one already resolved
        current = path
        while (real := self._parents.get(current)) is None:
            head, tail = os.path.split(current)
            if not tail or head == current:
                real = os.path.realpath(current)
                self._remember(current, real)
                break
            unknown.append(current)
            current = head
        for each in reversed(unknown):
            tail = os.path.basename(each)
            if tail in {".", ".."}:
                real = os.path.realpath(os.path.join(real, tail))
            else:
                real = os.path.join(real, tail)
                with contextlib.suppress(OSError):
                    if stat.S_ISLNK(os.lstat(real).st_mode):
                        real = os.path.realpath(real)
            self._remember(each, real)
        return real

    def __call__(self, rel: str) -> ArtifactState:
        try:
            return self._state(rel)
        except ValueError:
            # What the OS cannot be handed as a file name: a lone surrogate (other than those
            # standing for a byte of a name that is not UTF-8) fails to encode
            # (UnicodeEncodeError), a NUL is refused (ValueError). Caught here, where paths
            # become OS calls, it is one artifact's finding, not every command's crash. No
            # cache holds a part of it: each is filled only after its call returned.
            return ArtifactState.UNNAMEABLE

    def _state(self, rel: str) -> ArtifactState:
        if self._anchored:
            fd = self._anchor
            if fd < 0:
                try:
                    fd = self._anchor = os.open(self._root_real, _ANCHOR_FLAGS)
                except OSError:
                    self._anchored = False
                    return self._absolute(rel)
            head, _, tail = rel.rpartition("/")
            if tail and tail not in {".", ".."} and self._is_plain_dir(head, fd):
                try:
                    st = os.stat(rel, dir_fd=fd, follow_symlinks=False)
                except OSError:
                    return ArtifactState.MISSING  # under a directory inside the root
                if stat.S_ISLNK(st.st_mode):
                    return self._absolute(rel)
                if not stat.S_ISREG(st.st_mode):
                    return ArtifactState.NOT_A_FILE
                return ArtifactState.EMPTY if st.st_size == 0 else ArtifactState.OK
        return self._absolute(rel)

    def _absolute(self, rel: str) -> ArtifactState:
        """The state of ``rel`` resolved from the root's absolute path, links followed."""
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
