"""postflightd's own bound on sending an agent back: at most MAX_BLOCKS times per session and
file, whatever the runtime's loop guard says.

A runtime's flag (``stop_hook_active``, ``loop_count``, the plugin's ``attempt``) is
honoured, but not relied on: Gemini CLI sets ``stop_hook_active`` only when the retry's turn
ends without a tool call, so an agent that rewrites its file, still invalid, at every try
would be sent back forever. So the hook counts, per session, project and file, how many times
in a row it sent the agent back over that file; past the bound it lets the agent stop and
tells the person (``hooks.decision``). A file that validates (or is gone) starts again at 0.

The counts live in the user's state directory (never in the project tree, which agents write,
nor in the workflows' own ``.postflight-loop-guard`` there, which an agent can delete), one
line ``<key> <count>`` each, the most recent last, at most MAX_KEYS of them. The key is a hash
of the project, the session and the file's path. Two hooks of different sessions updating at
once never lose each other's counts (``fs.atomic.replace_if_unchanged``); a file that cannot
be read or written only loses the bound, never the answer (the runtime's own guard remains).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Final

from platformdirs import user_state_path

from postflightd.fs.atomic import Snapshot, replace_if_unchanged
from postflightd.fs.directory import Directory, StoreError

FILE_NAME: Final = "hook-blocks"
#: The most times one session is sent back over one file.
MAX_BLOCKS: Final = 3
#: Keys kept: the file stays small whatever happens.
MAX_KEYS: Final = 4096
#: How much of the file is read: MAX_KEYS lines of a 64-digit key, a space, a count.
MAX_BYTES: Final = 2 * MAX_KEYS * 72


def default_path() -> Path:
    """``<user state dir>/postflightd/hook-blocks`` (platformdirs)."""
    return user_state_path("postflightd") / FILE_NAME


def block_key(root: Path, session: str | None, rel_path: str) -> str:
    """The key of one file of one session (no session: the file's alone)."""
    import hashlib  # only with a file to count: loading OpenSSL costs a stop 2.5 ms

    digest = hashlib.sha256()
    for part in (str(root), session or "", rel_path):
        raw = part.encode("utf-8", "surrogateescape")
        digest.update(len(raw).to_bytes(8, "big"))
        digest.update(raw)
    return digest.hexdigest()


def _parse(raw: bytes | None) -> dict[str, int]:
    """The counts a file holds, in order; a line that is not ``<key> <count>`` is skipped."""
    counts: dict[str, int] = {}
    if not raw:
        return counts
    for line in raw[:MAX_BYTES].decode("ascii", errors="replace").splitlines():
        fields = line.split()
        if len(fields) == 2 and len(fields[0]) == 64 and fields[1].isdigit():
            counts.pop(fields[0], None)
            counts[fields[0]] = int(fields[1])
    return counts


def _text(counts: dict[str, int]) -> bytes:
    kept = list(counts.items())[-MAX_KEYS:]
    return "".join(f"{key} {count}\n" for key, count in kept).encode("ascii")


class Blocks:
    """The counts, read once; ``update`` writes the changes back."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            with path.open("rb") as fh:
                raw = fh.read(MAX_BYTES)
        except OSError:
            raw = None  # nothing counted yet (or unreadable: the bound restarts, never worse)
        self._counts = _parse(raw)

    @property
    def kept(self) -> bool:
        """Whether the file held any count when read."""
        return bool(self._counts)

    def count(self, key: str) -> int:
        """How many times in a row the agent was sent back over this file."""
        return self._counts.get(key, 0)

    def claim(
        self, wanted: Iterable[str], cleared: Iterable[str], limit: int = MAX_BLOCKS
    ) -> tuple[set[str], str | None]:
        """The keys of ``wanted`` granted one more block (those still under ``limit``, one more
        each), and none left for each of ``cleared``; and None, or why the counts could not be
        written. Decided on the counts as written, in the write itself: two hooks of one
        session stopping at once (OpenCode's two plugins under ``opencode run``) never both
        take the last block. Where the counts cannot be written, the counts read decide (the
        bound is then lost for them, never the answer)."""
        want, gone = list(wanted), set(cleared)
        if not want and not gone & self._counts.keys():
            return set(), None
        granted: set[str] = set()

        def transform(snapshot: Snapshot) -> bytes | None:
            counts = _parse(snapshot.raw)
            granted.clear()
            for key in gone:
                counts.pop(key, None)
            for key in want:
                if counts.get(key, 0) < limit:
                    counts[key] = counts.pop(key, 0) + 1
                    granted.add(key)
            self._counts = counts
            return _text(counts)

        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with Directory.anchor(self.path.parent) as directory:
                replace_if_unchanged(directory, self.path.name, transform)
        except (OSError, StoreError) as exc:
            problem = f"cannot keep the hook's count of blocks in {self.path}: {exc}"
            return {key for key in want if self._counts.get(key, 0) < limit}, problem
        return granted, None
