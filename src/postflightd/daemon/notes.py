"""What a running daemon tells ``postflightd status`` about its roots (the polling fallback, a
stalled root).

One JSON file per daemon, named by its pid, in the user state directory (not the project tree:
the tree is the agents' to write). ``status`` finds the pid through ``fs.locks.lock_holder``;
for a stalled root it cannot (reading the root's lock file would hang as the daemon did), so
``stalled_roots`` reads every live daemon's notes instead, without touching any root.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from platformdirs import user_state_path

from postflightd.fs.atomic import write_file
from postflightd.fs.directory import StoreError
from postflightd.logs import get_logger

log = get_logger()


def _notes_dir() -> Path:
    return user_state_path("postflightd")


def _notes_path(pid: int) -> Path:
    return _notes_dir() / f"daemon-{pid}.json"


def _read_notes(path: Path) -> tuple[int | None, dict[str, str]]:
    """The pid a notes file names and its notes by root; (None, {}) for a file that cannot be
    read or is not a daemon's notes (a torn or foreign file is no note)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None, {}
    if not isinstance(data, dict):
        return None, {}
    pid, roots = data.get("pid"), data.get("roots")
    notes = (
        {str(r): n for r, n in roots.items() if isinstance(n, str)}
        if isinstance(roots, dict)
        else {}
    )
    usable = isinstance(pid, int) and not isinstance(pid, bool) and pid > 0
    return (pid if usable else None), notes


def write_daemon_notes(notes: Mapping[str, str]) -> None:
    """What ``status`` should say about each root this daemon watches (polling fallback ...).

    In the user state directory, not the project tree: the tree is the agents' to write.
    """
    path = _notes_path(os.getpid())
    try:
        if not notes:
            path.unlink(missing_ok=True)
            return
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_file(path, json.dumps({"pid": os.getpid(), "roots": dict(notes)}).encode("utf-8"))
    except OSError as exc:
        log.warning("status_note_failed", path=str(path), error=exc.strerror or str(exc))
    except StoreError as exc:
        log.warning("status_note_failed", path=str(path), error=str(exc))


class DaemonNotes:
    """This daemon's notes by root, written out at each change: a root's fallback to polling
    (a root's worker may add one, hence the lock) and a stalled root's."""

    def __init__(self) -> None:
        self._fallbacks: dict[str, str] = {}
        self._stalled: dict[str, str] = {}
        self._lock = threading.Lock()

    def fell_back(self, root: Path, why: str) -> None:
        with self._lock:
            self._fallbacks[str(root)] = f"polling: {why}"
        self._write()

    def clear_fallbacks(self) -> None:
        with self._lock:
            self._fallbacks.clear()
        self._write()

    def stalled(self, root: Path, note: str) -> None:
        with self._lock:
            self._stalled[str(root)] = note
        self._write()

    def resumed(self, root: Path) -> None:
        with self._lock:
            self._stalled.pop(str(root), None)
        self._write()

    def _write(self) -> None:
        with self._lock:
            write_daemon_notes({**self._fallbacks, **self._stalled})


def remove_daemon_notes() -> None:
    with contextlib.suppress(OSError):
        _notes_path(os.getpid()).unlink(missing_ok=True)


#: How a daemon's note for a root it found stalled begins.
STALLED: Final = "stalled"


def stalled_roots() -> dict[str, tuple[int, str]]:
    """root -> (pid, note) of the roots a live daemon reports stalled, read from the notes in
    the user state directory only."""
    out: dict[str, tuple[int, str]] = {}
    try:
        paths = list(_notes_dir().glob("daemon-*.json"))
    except OSError:
        return out
    for path in paths:
        pid, notes = _read_notes(path)
        if pid is None or not _alive(pid):
            continue
        for root, note in notes.items():
            if note.startswith(STALLED):
                out[root] = (pid, note)
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's process: alive
    return True


def daemon_note(root: Path, pid: int | None) -> str | None:
    """The note the daemon with ``pid`` (the instance lock's holder) left for ``root``."""
    if not pid:
        return None
    return _read_notes(_notes_path(pid))[1].get(str(root))
