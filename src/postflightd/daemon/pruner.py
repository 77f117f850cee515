"""Journal retention for the daemon: a background thread prunes by ``[journal] keep_days``
and ``max_content_mb``."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Final

from postflightd.journal.database import Journal
from postflightd.logs import get_logger

log = get_logger()

#: The first pruning this long after the daemon starts...
PRUNE_FIRST_S: Final = 5.0
#: ...then one every this long.
PRUNE_EVERY_S: Final = 6 * 3600.0


class JournalPruner(threading.Thread):
    """Prunes the journal in the background (``[journal] keep_days``, ``max_content_mb``).

    Its own connection, chunked transactions (``Journal.prune``): the loop's commits never
    wait for more than one chunk. First run shortly after start, then every PRUNE_EVERY_S.
    """

    def __init__(self, path: Path, keep_days: float, max_content_mb: float) -> None:
        super().__init__(name="postflightd-journal-pruner", daemon=True)
        self._path = path
        self._keep_days = keep_days
        self._max_bytes = int(max_content_mb * 1024 * 1024)
        self.stopped = threading.Event()

    def run(self) -> None:
        delay = PRUNE_FIRST_S
        while not self.stopped.wait(delay):
            delay = PRUNE_EVERY_S
            journal = Journal.open(self._path)
            try:
                if not journal.enabled:
                    continue
                result = journal.prune(
                    keep_days=self._keep_days,
                    max_content_bytes=self._max_bytes,
                    stop=self.stopped,
                )
            finally:
                journal.close()
            if result.rows or result.contents:
                log.info(
                    "journal_pruned",
                    path=str(self._path),
                    rows=result.rows,
                    contents=result.contents,
                    keep_days=self._keep_days,
                )

    def stop(self) -> None:
        self.stopped.set()
        self.join(2.0)
