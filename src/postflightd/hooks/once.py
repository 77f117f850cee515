"""One answer per stop when a runtime runs the hook twice for it.

GitHub Copilot CLI runs the stop hooks of ``.github/hooks/*.json`` and those of the project's
``.claude/settings.json``: a project with both set up gets two ``postflightd`` runs for one
stop, one after the other. The runtime names the stop (its session, the agent, the stop's
time), so the first run takes it by creating a marker named by a hash of that name in the
user's state directory (never in the project tree, which agents write), and a run that finds
the marker already there answers nothing and does no work.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Final

DIR_NAME: Final = "hook-stops"
#: Markers older than this are removed when a new one is made: the second run of a stop
#: comes seconds after the first.
KEEP_S: Final = 3600.0


def default_dir() -> Path:
    """``<user state dir>/postflightd/hook-stops`` (platformdirs)."""
    from platformdirs import user_state_path

    return user_state_path("postflightd") / DIR_NAME


def first_run(stop: str, folder: Path | None = None, now: float | None = None) -> bool:
    """Whether this is the first run of the hook for the stop named ``stop``. When the marker
    cannot be made (a read-only state directory), every run is the first: the stop is then
    post-flighted twice, as without the marker, never not at all."""
    import hashlib

    folder = default_dir() if folder is None else folder
    name = hashlib.sha256(stop.encode("utf-8", "replace")).hexdigest()[:40]
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(folder / name, flags, 0o600)
    except FileExistsError:
        return False
    except OSError:
        return True
    os.close(fd)
    _forget_old(folder, name, time.time() if now is None else now)
    return True


def _forget_old(folder: Path, keep: str, now: float) -> None:
    # Best effort: a marker that cannot be listed or removed is only kept a while longer.
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            if entry.name == keep:
                continue
            with contextlib.suppress(OSError):
                if entry.stat(follow_symlinks=False).st_mtime < now - KEEP_S:
                    Path(entry.path).unlink()
