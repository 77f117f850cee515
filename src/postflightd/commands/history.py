"""``postflightd history``: what the journal recorded, newest first."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

from postflightd.commands.arguments import open_journal, parse_since_arg
from postflightd.config import load_config
from postflightd.errors import ExitCode, UsageError
from postflightd.journal.database import format_ts
from postflightd.reporters.history import REPORTERS, History
from postflightd.reporters.style import Options


def _known_root(raw: str, root: Path, config_path: str | None) -> None:
    """``--root`` with no rows: fine for a project (nothing recorded yet), a usage error for a
    directory that is none, so that a mistyped path is not an empty, green answer."""
    from postflightd.project.root import project_marker

    if root.is_dir() and project_marker(root, lambda rs: load_config(config_path, rs)):
        return
    raise UsageError(
        f"--root {raw}: not a project root (a directory holding the specs directory or "
        ".postflightd.toml), and no journal row matches it"
    )


def run_history(
    *,
    task: int | None,
    session: str | None,
    limit: int,
    fmt: str,
    config_path: str | None,
    root: str | None = None,
    since: str | None = None,
    show: bool = False,
) -> int:
    """What the journal recorded; ``--show`` adds each row's recorded file content."""
    since_at = parse_since_arg(since, datetime.now(UTC)) if since is not None else None
    # The journal records resolved roots: `--root .` matches what the daemon wrote.
    root_s = str(Path(root).expanduser().resolve()) if root is not None else None
    config = load_config(config_path)
    journal = open_journal(config)
    try:
        if not journal.enabled:
            raise UsageError(f"the journal cannot be opened: {journal.error}")
        rows = journal.history(task=task, session=session, limit=limit, root=root_s, since=since_at)
        pruned = journal.pruned_before()
    finally:
        journal.close()
    if root is not None and root_s is not None and not rows:
        _known_root(root, Path(root_s), config_path)
    # Showing everything that is left (fewer rows than the limit) of a journal whose older
    # rows were pruned: say so, or a missing run would look like it never happened.
    note = None
    if since_at is not None and pruned is not None and format_ts(since_at) >= pruned:
        pruned = None  # the range asked for starts after the pruned edge
    if pruned is not None and len(rows) < max(limit, 0):
        note = (
            f"note: observations before {pruned} were pruned ([journal] keep_days = "
            f"{config.journal.keep_days:g}); older runs are not shown"
        )
    filtered = any(x is not None for x in (task, session, root, since))
    REPORTERS[fmt](History(rows, note, filtered, show), sys.stdout, Options(notes=sys.stderr))
    return int(ExitCode.OK)
