"""``postflightd watch [ROOT ...]``: the daemon, in this process, until SIGTERM or SIGINT."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from postflightd.config import Config, LogFormat, LogLevel, load_config
from postflightd.daemon.loop import Daemon
from postflightd.logs import configure_logging
from postflightd.project.root import find_project, resolve_root


def serve(roots: Sequence[Path], config: Config, reload: Callable[[Path | None], Config]) -> int:
    """Run the daemon in this process until SIGTERM/SIGINT; ``reload(None)`` re-reads the
    user's configuration on SIGHUP, ``reload(root)`` each root's own."""
    return Daemon(roots, config, reload).run()


def run_watch(
    *,
    roots: Sequence[str],
    config_path: str | None,
    log_format: LogFormat | None,
    log_level: LogLevel | None,
) -> int:
    """``postflightd watch [ROOT ...]``: roots from the arguments, else the user's ``[watch]
    roots``, else the project the current directory is in. Each root is governed by its own
    configuration; the process-wide settings (log, journal, observer) are the user's."""

    def load(root: Path | None) -> Config:
        config = load_config(config_path, [root] if root is not None else [])
        if log_format or log_level:
            # argparse has already limited both flags to LogConfig's choices.
            log = config.log.replace(
                format=log_format or config.log.format,
                level=log_level or config.log.level,
            )
            config = config.replace(log=log)
        return config

    config = load(None)
    if roots or config.watch.roots:
        resolved = [resolve_root(r) for r in roots or config.watch.roots]
    else:
        resolved = [find_project(lambda paths: load_config(config_path, paths))]
    # Two spellings of one root would take the instance lock twice and deadlock on it.
    resolved = list(dict.fromkeys(resolved))
    configure_logging(config.log.format, config.log.level)
    return serve(resolved, config, load)
