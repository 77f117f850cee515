"""``postflightd history``: what the journal recorded, newest first."""

from __future__ import annotations

import sys
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

from postflightd.commands.arguments import open_journal, parse_since_arg
from postflightd.config import load_config
from postflightd.errors import ExitCode, UsageError
from postflightd.inert import inert, json_text
from postflightd.journal import format_ts


def run_history(
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
    config = load_config(config_path, [Path.cwd()])
    journal = open_journal(config)
    try:
        if not journal.enabled:
            raise UsageError(f"the journal cannot be opened: {journal.error}")
        rows = journal.history(task=task, session=session, limit=limit, root=root_s, since=since_at)
        pruned = journal.pruned_before()
    finally:
        journal.close()
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
    if fmt == "json":
        # The JSON rows always carry `content` (a fixed shape); --show is for the text form.
        sys.stdout.write(json_text([asdict(r) for r in rows], indent=2) + "\n")
        if note:
            print(note, file=sys.stderr)
        return int(ExitCode.OK)
    if note:
        print(note)
    for r in rows:
        task_s = "-" if r.task is None else str(r.task)
        pruned_content = " (content pruned)" if r.kind == "postflighted" and not r.content else ""
        print(
            f"{inert(r.ts)}  {inert(r.kind):<13} task {task_s:<5} {inert(r.status or '-'):<12} "
            f"{inert(r.session or '-')}  {inert(r.root)}/{inert(r.file)}{pruned_content}"
        )
        if show and r.content is not None:
            # The recorded file, one output line per line of it (splitlines also splits on
            # CR, VT, FF, NEL, U+2028: each piece is then escaped whole).
            for line in r.content.splitlines():
                print(f"    {inert(line)}")
    if not rows:
        filtered = any(x is not None for x in (task, session, root, since))
        print("no observations recorded" + (" for that filter" if filtered else ""))
    return int(ExitCode.OK)
