"""Logging for the daemon: structlog configured once, from ``cli.main``'s watch command.

JSON lines when stderr is not a terminal (journald, files), readable console lines when it
is. Every event carries ``root``, ``task``, ``session`` and ``file`` (null when it is about a
root or the daemon as a whole), so a journal query can follow one task or one agent session.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any, Final, Literal, TextIO

import structlog

LogFormat = Literal["auto", "json", "console"]
LogLevel = Literal["debug", "info", "warning", "error"]

CONTEXT_KEYS: Final = ("root", "task", "session", "file")

_LEVELS: Final = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


def _with_context_keys(
    _logger: object, _method: str, event: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    for key in CONTEXT_KEYS:
        event.setdefault(key, None)
    return event


def resolve_format(fmt: LogFormat, stream: TextIO) -> Literal["json", "console"]:
    if fmt != "auto":
        return fmt
    isatty = getattr(stream, "isatty", None)
    return "console" if isatty is not None and isatty() else "json"


def configure_logging(
    fmt: LogFormat = "auto", level: LogLevel = "info", stream: TextIO | None = None
) -> None:
    """Configure structlog for the whole process (called again on SIGHUP, with the new config)."""
    out = stream if stream is not None else sys.stderr
    renderer: Any
    if resolve_format(fmt, out) == "json":
        renderer = structlog.processors.JSONRenderer(sort_keys=False, ensure_ascii=False)
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=out.isatty(), sort_keys=False)
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            _with_context_keys,
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[level]),
        logger_factory=structlog.PrintLoggerFactory(file=out),
        # Not cached: a SIGHUP may change the level or the format of loggers already bound.
        cache_logger_on_first_use=False,
    )
