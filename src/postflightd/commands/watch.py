"""``postflightd watch [ROOT ...]``: the daemon, in this process, until SIGTERM or SIGINT."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from postflightd.config import Config, LogFormat, LogLevel, load_config
from postflightd.daemon.loop import Daemon
from postflightd.logs import configure_logging
from postflightd.project.root import find_project, resolve_root


def serve(roots: Sequence[Path], config: Config, reload: Callable[[Path | None], Config]) -> int:
    """Run the daemon in this process until SIGTERM/SIGINT; ``reload(None)`` re-reads the
    user's configuration on SIGHUP, ``reload(root)`` each root's own."""
    return Daemon(roots, config, reload).run()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``watch``'s options."""
    parser.add_argument(
        "roots", nargs="*", metavar="ROOT", help="default: [watch] roots, else the project here"
    )
    parser.add_argument("--config", metavar="PATH", help="configuration file (TOML)")
    parser.add_argument("--log-format", choices=("auto", "json", "console"), default=None)
    parser.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default=None)


def run(args: argparse.Namespace) -> int:
    return run_watch(
        roots=args.roots,
        config_path=args.config,
        log_format=args.log_format,
        log_level=args.log_level,
    )


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
            log = replace(
                config.log,
                format=log_format or config.log.format,
                level=log_level or config.log.level,
            )
            config = replace(config, log=log)
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
