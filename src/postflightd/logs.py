"""Logging: structlog on stderr, set up by ``cli.main`` for every command (``watch`` applies
``[log]`` at start and again on SIGHUP).

JSON lines when stderr is not a terminal (journald, files), readable console lines when it
is. Values come from the project tree: console lines escape their control characters and
JSON lines stay valid UTF-8 (SPEC 7.1, ``inert``). Every event carries ``root``, ``task``,
``session`` and ``file`` (null when it is about a root or the daemon as a whole), so a journal
query can follow one task or one agent session.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from typing import Any, Final, Literal, TextIO

import structlog

from postflightd.inert import inert, json_text

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


def _drop_none(
    _logger: object, _method: str, event: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    # Console lines are read by a person: `task=None session=None` is noise. JSON lines keep
    # every context key (a query on `.task` must not find the key missing).
    for key in [k for k, v in event.items() if v is None]:
        del event[key]
    return event


#: syslog priorities (sd-daemon(3)) of structlog's method names
_PRIORITY: Final = {
    "critical": 2,
    "exception": 3,
    "error": 3,
    "warning": 4,
    "warn": 4,
    "info": 6,
    "debug": 7,
}


def under_journald(stream: TextIO, env: Mapping[str, str] | None = None) -> bool:
    """True when ``stream`` is the journal stream systemd connected ($JOURNAL_STREAM)."""
    import os

    value = (os.environ if env is None else env).get("JOURNAL_STREAM", "")
    dev, _, ino = value.partition(":")
    if not (dev.isdigit() and ino.isdigit()):
        return False
    try:
        st = os.fstat(stream.fileno())
    except (OSError, ValueError, AttributeError):
        return False
    return (st.st_dev, st.st_ino) == (int(dev), int(ino))


class _WithPriority:
    """Prefix each rendered line with ``<N>`` so journald records its priority: then
    ``journalctl -p warning`` shows stuck runs (journald strips the prefix)."""

    def __init__(self, renderer: Any) -> None:
        self._renderer = renderer

    def __call__(self, logger: object, method: str, event: MutableMapping[str, Any]) -> str:
        text = str(self._renderer(logger, method, event))
        prefix = f"<{_PRIORITY.get(method, 6)}>"
        return "\n".join(prefix + line for line in text.split("\n"))


def _inert_values(
    _logger: object, _method: str, event: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    # The console renderer prints str values raw (other values go through repr, which
    # escapes): an ESC or a line break in a task directory name would reach the terminal.
    for key, value in event.items():
        if key == "exception" and isinstance(value, str):
            # Our own traceback: kept on its lines, each line escaped.
            event[key] = "\n".join(inert(line) for line in value.split("\n"))
        elif isinstance(value, str):
            event[key] = inert(value)
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
    console = resolve_format(fmt, out) == "console"
    if console:
        renderer = structlog.dev.ConsoleRenderer(colors=out.isatty(), sort_keys=False)
    else:
        renderer = structlog.processors.JSONRenderer(serializer=json_text, sort_keys=False)
    if under_journald(out):
        renderer = _WithPriority(renderer)
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            _with_context_keys,
            *([_drop_none] if console else []),
            structlog.processors.format_exc_info,
            *([_inert_values] if console else []),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[level]),
        logger_factory=structlog.PrintLoggerFactory(file=out),
        # Not cached: a SIGHUP may change the level or the format of loggers already bound.
        cache_logger_on_first_use=False,
    )


@contextmanager
def command_logging() -> Iterator[None]:
    """Logging for one command of ``cli.main``: on stderr, warnings and up (``watch`` then
    reconfigures from ``[log]``); the previous configuration comes back afterwards, so that
    ``main`` called in-process (tests, embedding) leaves structlog as it found it."""
    previous = structlog.get_config()
    configure_logging("auto", "warning")
    try:
        yield
    finally:
        structlog.configure(**previous)
