"""``postflightd history``: the runs the journal recorded and how each ended, newest last
(``--events``: its rows as recorded)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from postflightd.commands.arguments import add_format, open_journal, parse_since_arg
from postflightd.config import load_config
from postflightd.errors import ExitCode, UsageError
from postflightd.journal.database import format_ts
from postflightd.journal.rows import Observation
from postflightd.project.root import project_marker, why_not_a_directory
from postflightd.reporters.history import REPORTERS, History
from postflightd.reporters.style import Options
from postflightd.stats.runs import Run, RunKey, fold, no_runs_recorded, observation_row


def _known_root(raw: str, root: Path, config_path: str | None) -> None:
    """``--root`` with no rows: fine for a project (nothing recorded yet), a usage error for a
    directory that is none, so that a mistyped path is not an empty, green answer."""
    if not root.is_dir():
        raise UsageError(
            f"--root {raw}: {why_not_a_directory(root)}, and the journal has no runs of it"
        )
    if project_marker(root, lambda rs: load_config(config_path, rs)):
        return
    raise UsageError(
        f"--root {raw}: not a project root (a directory holding the specs directory or "
        ".postflightd.toml), and no journal row matches it"
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``history``'s options."""
    parser.add_argument(
        "--task", type=_journal_int, metavar="N", help="only the runs of task N (project_number)"
    )
    parser.add_argument(
        "--session", metavar="S", help="only the runs of session S (metadata.session_id)"
    )
    parser.add_argument(
        "--limit", type=_journal_int, default=200, metavar="N", help="the latest N runs (rows)"
    )
    parser.add_argument("--root", metavar="DIR", help="only this project root")
    parser.add_argument(
        "--since",
        metavar="WHEN",
        help="only since then: a duration back (30m, 2h, 7d), a date, or all",
    )
    parser.add_argument(
        "--events", action="store_true", help="one line per journal row instead of per run"
    )
    parser.add_argument(
        "--show", action="store_true", help="the rows (--events), each with its recorded file"
    )
    add_format(parser, REPORTERS)
    parser.add_argument("--config", metavar="PATH", help="configuration file (TOML)")


def _journal_int(text: str) -> int:
    """An integer the journal can be asked about: SQLite's are 64-bit, and a larger one made
    ``history --limit 99999999999999999999`` an internal error (exit 70)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if not -(2**63) <= value < 2**63:
        raise argparse.ArgumentTypeError(f"{text}: out of range (at most {2**63 - 1})")
    return value


def without_effect(args: argparse.Namespace) -> str | None:
    """``--show`` with a ``--format`` it changes nothing in: said, not silently ignored."""
    if args.show and args.format != "text":
        return (
            f"--show adds the recorded content to the text form; --format {args.format} "
            "always carries it with --events: give --events instead of --show"
        )
    return None


def run(args: argparse.Namespace) -> int:
    return run_history(
        task=args.task,
        session=args.session,
        limit=args.limit,
        fmt=args.format,
        config_path=args.config,
        root=args.root,
        since=args.since,
        show=args.show,
        events=args.events,
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
    events: bool = False,
) -> int:
    """The latest ``limit`` runs (``--events``: rows); ``--show`` lists the rows, each with
    its recorded file content."""
    events = events or show
    if limit < 1:
        # Else "no runs recorded": an untrue answer about a journal that may hold many.
        raise UsageError(f"--limit {limit}: give how many of the latest runs to show, at least 1")
    since_at = parse_since_arg(since, datetime.now(UTC)) if since is not None else None
    # The journal records resolved roots: `--root .` matches what the daemon wrote.
    root_s = str(Path(root).expanduser().resolve()) if root is not None else None
    config = load_config(config_path)
    journal = open_journal(config)
    try:
        if not journal.enabled:
            raise UsageError(f"the journal cannot be opened: {journal.error}")

        def read(n: int) -> list[Observation]:
            return journal.history(task=task, session=session, limit=n, root=root_s, since=since_at)

        runs: list[tuple[RunKey, Run]] | None = None
        if events:
            rows = read(limit)
            complete = len(rows) < max(limit, 0)
        else:
            rows, runs, complete = _latest_runs(read, limit)
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
    if pruned is not None and complete:
        note = (
            f"note: journal rows before {pruned} were pruned ([journal] keep_days = "
            f"{config.journal.keep_days:g}); older runs are not shown"
        )
    filtered = any(x is not None for x in (task, session, root, since))
    history = History(rows, note, filtered, show, runs)
    REPORTERS[fmt](history, sys.stdout, Options(notes=sys.stderr))
    scope = " for that filter" if filtered else ""
    if runs is not None and not runs:
        print(f"postflightd: {no_runs_recorded(scope)}", file=sys.stderr)
    elif runs is None and not rows:
        print(f"postflightd: no journal rows recorded{scope}", file=sys.stderr)
    return int(ExitCode.OK)


#: Rows read per run wanted, at first: a run is a few rows, more when a daemon journals
#: every progress write.
_ROWS_PER_RUN = 10
#: SQLite's largest LIMIT.
_MAX_ROWS = 2**63 - 1


def _latest_runs(
    read: Callable[[int], list[Observation]], limit: int
) -> tuple[list[Observation], list[tuple[RunKey, Run]], bool]:
    """The latest ``limit`` runs, folded from the latest rows (as ``report`` folds them),
    and whether they are all the runs the journal holds for the filters.

    The rows are read newest first, more each time, until they hold more runs than asked
    for: the oldest run of a window may have begun before it, and is then left out."""
    want = max(limit, 0)
    row_limit = min(max(want * _ROWS_PER_RUN, 1000), _MAX_ROWS)
    while True:
        rows = read(row_limit)
        runs = fold(observation_row(r) for r in rows).runs
        read_all = len(rows) < row_limit or row_limit == _MAX_ROWS
        if read_all or len(runs) > want:
            shown = runs[len(runs) - want :] if want else []
            return rows, shown, read_all and len(shown) == len(runs)
        row_limit = min(row_limit * 4, _MAX_ROWS)
