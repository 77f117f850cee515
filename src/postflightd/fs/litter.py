"""Crash litter: the files a writer of ours killed mid-step leaves behind, found and settled.

A writer killed mid-step leaves two kinds of files of ours: the temporary file of
``atomic._replace`` (``.state.json.PID.HEX.tmp``) and the metadata file renamed aside by
``atomic.delete_if_unchanged`` (``..return-meta.json.PID.HEX.deleting``). Both names are made
in ``atomic`` by ``temp_name`` and ``aside_name``, next to the patterns (``TEMP_RE``,
``ASIDE_RE``) this module matches them with, so the two sides cannot drift apart. Every
postflightd writer takes the project lock before making either, so a caller holding the lock
knows no live writer of ours is using them; the pid and age checks are a second guard (a writer
from another pid namespace, a stale lock).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from postflightd.fs.atomic import ASIDE_RE, TEMP_RE
from postflightd.fs.directory import Directory

#: A leftover this old is removed even when its pid is alive again (pid reuse): a write or a
#: delete takes milliseconds.
LEFTOVER_MAX_AGE_S: Final = 600.0


@dataclass(frozen=True, slots=True)
class Leftover:
    """One file a killed writer of ours left behind."""

    path: Path  # for messages; ``entry`` is its name in the directory it was found in
    #: the file it belonged to (``state.json``, ``.return-meta.json``, ...)
    name: str
    entry: str


def _writer_gone(pid: int, st: os.stat_result, now: float) -> bool:
    if now - st.st_mtime > LEFTOVER_MAX_AGE_S:
        return True
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # EPERM: alive, someone else's
    return False


def _leftovers(
    directory: Directory, pattern: re.Pattern[str], names: frozenset[str]
) -> list[Leftover]:
    out: list[Leftover] = []
    now = time.time()
    try:
        entries = directory.names()
    except OSError:
        return out
    for entry in entries:
        match = pattern.fullmatch(entry.name)
        if match is None or match["name"] not in names or len(match["pid"]) > 7:
            continue
        try:
            st = directory.lstat(entry.name)
        except OSError:
            continue
        if st is not None and stat.S_ISREG(st.st_mode) and _writer_gone(int(match["pid"]), st, now):
            out.append(Leftover(directory.child(entry.name), match["name"], entry.name))
    return out


def remove_stale_temps(directory: Directory, names: frozenset[str]) -> list[Path]:
    """Remove the temporary files of ``names`` that a killed writer left in ``directory``.

    Call with the project lock held. Returns the paths removed.
    """
    removed: list[Path] = []
    for leftover in _leftovers(directory, TEMP_RE, names):
        with contextlib.suppress(FileNotFoundError):
            directory.unlink(leftover.entry)
            removed.append(leftover.path)
    return removed


def deletions_left_aside(task: Directory, name: str) -> list[Leftover]:
    """Files named ``name`` that a killed ``delete_if_unchanged`` left renamed aside in the
    (listable) task directory ``task``."""
    return _leftovers(task, ASIDE_RE, frozenset({name}))


def read_leftover(task: Directory, leftover: Leftover, max_bytes: int) -> bytes | None:
    """Its bytes (None when unreadable or larger than ``max_bytes``), never through a link."""
    try:
        data, st = task.read(leftover.entry, max_bytes)
    except OSError:
        return None
    return data if max(st.st_size, len(data)) <= max_bytes else None


def settle_leftover(task: Directory, leftover: Leftover, *, recorded: bool) -> str:
    """Finish or undo an interrupted deletion; what was done: removed, restored or kept.

    ``recorded``: the content is safely recorded elsewhere (the journal), so it goes. Otherwise
    it is put back under its own name, unless a newer file took that name meanwhile: then it is
    kept, for a person to look at, since nothing else holds what it says.
    """
    if recorded:
        task.unlink(leftover.entry)
        return "removed"
    try:
        task.link(leftover.entry, leftover.name)
    except FileExistsError:
        return "kept"
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EMLINK, errno.EXDEV):
            raise
        if task.lstat(leftover.name) is not None:
            return "kept"
        task.rename(leftover.entry, leftover.name)
        return "restored"
    task.unlink(leftover.entry)
    return "restored"
