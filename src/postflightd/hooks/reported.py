"""What the stop hook already told the person, so that it is said once per file content.

Other runs' invalid metadata files are not the stopping agent's to repair; they are said to
the person in a ``systemMessage``, but a stale broken file would otherwise be repeated at every
stop of every agent. Each one reported is remembered by a hash of its path and bytes, in the
user's state directory (never in the project tree, which agents write): a file that changes
is new content and is reported again.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Final

from platformdirs import user_state_path

from postflightd.fs.atomic import write_file
from postflightd.fs.directory import StoreError

FILE_NAME: Final = "hook-reported"
#: Keys remembered, the most recent last: the file stays small whatever happens.
MAX_KEYS: Final = 4096
#: How much of the file is read: MAX_KEYS keys of 64 hex digits and a newline, with room.
MAX_BYTES: Final = 2 * MAX_KEYS * 65


def default_path() -> Path:
    """``<user state dir>/postflightd/hook-reported`` (platformdirs)."""
    return user_state_path("postflightd") / FILE_NAME


def content_key(root: Path, rel_path: str, raw: bytes | None, problem: str) -> str:
    """The key of one report: the project, the file and its bytes (or, when it could not be
    read, why)."""
    import hashlib  # only with a file to report: loading OpenSSL costs a stop 2.5 ms

    digest = hashlib.sha256()
    for part in (str(root).encode(), rel_path.encode(), raw if raw is not None else b"\0"):
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    if raw is None:
        digest.update(problem.encode())
    return digest.hexdigest()


class Reported:
    """The keys already reported, read once; ``remember`` writes the new ones back."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._keys: list[str] = []
        try:
            with path.open("rb") as fh:
                text = fh.read(MAX_BYTES).decode("ascii", errors="replace")
            self._keys = [k for k in text.split() if len(k) == 64][-MAX_KEYS:]
        except OSError:
            pass  # nothing remembered yet (or unreadable: reported again, never lost)
        self._known = set(self._keys)

    def __contains__(self, key: object) -> bool:
        return key in self._known

    def remember(self, keys: Iterable[str]) -> None:
        """Add ``keys``; a failure to write is ignored (the next stop says them again)."""
        new = [k for k in keys if k not in self._known]
        if not new:
            return
        self._keys = (self._keys + new)[-MAX_KEYS:]
        self._known = set(self._keys)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_file(self.path, ("\n".join(self._keys) + "\n").encode("ascii"))
        except (OSError, StoreError):
            pass
