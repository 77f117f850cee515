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

from postflightd.rules.context import ArtifactProbe, ArtifactState

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
        head, _, tail = path.rpartition(os.sep)
        if head and tail and tail not in {".", ".."} and not head.endswith(os.sep):
            # The usual case, ".../specs/14_x/reports": what os.path.split gives, for less.
            parent = real_dir(head)
            real = (parent if parent.endswith(os.sep) else parent + os.sep) + tail
            with contextlib.suppress(OSError):
                if stat.S_ISLNK(os.lstat(real).st_mode):
                    real = os.path.realpath(real)
            parents[path] = real
            return real
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
        path = prefix + rel
        head, _, tail = path.rpartition(os.sep)
        if tail and not head.endswith(os.sep):
            # What os.path.split and os.path.join give here, for less (the scan's hot loop).
            parent = parents.get(head) or real_dir(head)
            full = (parent if parent.endswith(os.sep) else parent + os.sep) + tail
        else:
            head, tail = os.path.split(path)
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
