"""``postflightd status [--watch]``: the runs in flight (read by status.py, drawn by live.py)."""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from postflightd.commands.arguments import parse_interval, policy
from postflightd.config import Config, load_config
from postflightd.errors import ExitCode, UsageError
from postflightd.project.root import resolve_root
from postflightd.reporters.live import HIDE_CURSOR, SHOW_CURSOR, LiveView, draw
from postflightd.reporters.status import REPORTERS
from postflightd.reporters.style import use_color
from postflightd.rules.findings import Policy
from postflightd.runs.status import add_healing, collect_status, status_exit_code


def status_target(
    roots: Sequence[str], config_path: str | None, select: Sequence[str], ignore: Sequence[str]
) -> tuple[list[Path], Config, Policy]:
    """The roots ``status`` looks at (the arguments, else ``[watch] roots``, else the current
    directory), their configuration and the code filter."""
    if roots:
        resolved = [resolve_root(r) for r in roots]
        config = load_config(config_path, resolved)
    else:
        config = load_config(config_path, [Path.cwd()])
        resolved = [resolve_root(r) for r in config.watch.roots or ["."]]
    return resolved, config, policy(config, select, ignore)


def run_status(
    roots: Sequence[str],
    fmt: str,
    config_path: str | None,
    select: Sequence[str] = (),
    ignore: Sequence[str] = (),
    color: str = "auto",
) -> int:
    """Exit 1 when a run is stuck (as ``scan`` does), 4 when a specs directory is refused."""
    resolved, config, chosen = status_target(roots, config_path, select, ignore)
    now = datetime.now(UTC)
    statuses = collect_status(resolved, config, chosen, now)
    add_healing(statuses, config, now)
    REPORTERS[fmt](statuses, sys.stdout, use_color(color, sys.stdout, os.environ))
    return int(status_exit_code(statuses))


def run_status_watch(
    roots: Sequence[str],
    interval_text: str,
    config_path: str | None,
    fmt: str = "text",
    select: Sequence[str] = (),
    ignore: Sequence[str] = (),
) -> int:
    """``status --watch``: refresh every ``--interval`` until Ctrl-C (exit 0)."""
    if fmt != "text":
        raise UsageError("--watch shows the text table; for JSON, run `status --format json`")
    interval = parse_interval(interval_text)
    resolved, config, chosen = status_target(roots, config_path, select, ignore)
    out = sys.stdout
    ansi = out.isatty()
    view = LiveView(hold_s=max(2 * interval, 3.0))
    try:
        if ansi:
            out.write(HIDE_CURSOR)
        while True:
            now = datetime.now(UTC)
            statuses = collect_status(resolved, config, chosen, now)
            clock = now.astimezone().strftime("%H:%M:%S")
            changed = view.update(statuses, time.monotonic(), clock)
            header = f"postflightd status --watch  every {interval:g}s  {clock}  (Ctrl-C quits)"
            if ansi:
                width = shutil.get_terminal_size((100, 24)).columns
                draw(out, view.lines(statuses, header, width, ansi=True), view.frames == 1)
            elif changed or view.frames == 1:
                out.write("\n".join(view.lines(statuses, header, 10_000, ansi=False)) + "\n\n")
                out.flush()
            time.sleep(interval)
    except KeyboardInterrupt:
        pass
    finally:
        if ansi:
            out.write(SHOW_CURSOR)
            out.flush()
    return int(ExitCode.OK)  # leaving a live view is not a failure
