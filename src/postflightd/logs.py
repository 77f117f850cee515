"""Logging: structlog on stderr, set up by ``cli.main`` for every command (``watch`` applies
``[log]`` at start and again on SIGHUP).

Most commands never log (a scan, a report): structlog and the asyncio it imports cost about
45 ms of a 180 ms start-up, so a command's logging is configured at the first use of a logger
from ``get_logger`` and structlog is not imported before. Every module gets its logger here,
never from structlog directly: a logger structlog made would print with structlog's defaults
(stdout) until something configured it (``tests/test_logs.py`` checks that).

JSON lines when stderr is not a terminal (journald, files), readable console lines when it
is. Values come from the project tree, which is not trusted: console lines escape their
control characters and JSON lines stay valid UTF-8 (``inert``). Every event carries ``root``,
``task``, ``session`` and ``file`` (null when it is about a root or the daemon as a whole), so
a journal query can follow one task or one agent session.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from typing import Any, Final, Literal, TextIO

from postflightd.durations import format_duration
from postflightd.inert import clip, inert, json_text

LogFormat = Literal["auto", "json", "console"]
LogLevel = Literal["debug", "info", "warning", "error"]

CONTEXT_KEYS: Final = ("root", "task", "session", "file")

#: the standard library's logging levels (not imported for four constants)
_LEVELS: Final = {"debug": 10, "info": 20, "warning": 30, "error": 40}


def _with_context_keys(
    _logger: object, _method: str, event: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    for key in CONTEXT_KEYS:
        event.setdefault(key, None)
    return event


def _is_container(value: object) -> bool:
    return isinstance(value, list | tuple | dict)


def _drop_none(
    _logger: object, _method: str, event: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    # Console lines are read by a person: `task=None session=None` or an empty `warnings=` is
    # noise. JSON lines keep every context key (a query on `.task` must not find the key
    # missing).
    for key in [k for k, v in event.items() if v is None or (_is_container(v) and not v)]:
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


#: The most characters of one field of a log line (a path, a session id, a message): the values
#: come from files agents write, and a line per rewrite of a file must stay a line.
MAX_LOG_FIELD_CHARS: Final = 1000


def _bounded_values(
    _logger: object, _method: str, event: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    for key, value in event.items():
        if key == "exception":
            continue  # our own traceback, whole
        if isinstance(value, str):
            event[key] = clip(value, MAX_LOG_FIELD_CHARS)
        elif isinstance(value, list | tuple):
            event[key] = [clip(v, MAX_LOG_FIELD_CHARS) if isinstance(v, str) else v for v in value]
    return event


def _human_values(
    _logger: object, _method: str, event: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    # On a terminal a person reads the line: a duration in seconds (``elapsed_s=27762005.6``)
    # reads as the rest of the product writes it (``elapsed=321d07h``), and a list (findings)
    # as its items, not a Python repr. JSON keeps the numbers and the list, for machines.
    for key in list(event):
        value = event[key]
        if key.endswith("_s") and isinstance(value, int | float) and not isinstance(value, bool):
            seconds = float(value)
            # Under a minute the fraction matters (a lock waited on for 0.25 s).
            shown = f"{seconds:.3g}s" if abs(seconds) < 60 else format_duration(seconds)
            event[key.removesuffix("_s")] = shown
            del event[key]
        elif isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
            event[key] = "; ".join(value)
    return event


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
    import structlog

    _pending.clear()
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
            _bounded_values,
            *([_human_values, _inert_values] if console else []),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[level]),
        logger_factory=structlog.PrintLoggerFactory(file=out),
        # Not cached: a SIGHUP may change the level or the format of loggers already bound.
        cache_logger_on_first_use=False,
    )


#: The configuration waiting for the first logger used (``command_logging``), if any.
_pending: list[tuple[LogFormat, LogLevel]] = []


class _Logger:
    """structlog's logger, behind a first use that imports and configures structlog."""

    __slots__ = ("_logger",)

    def __init__(self) -> None:
        self._logger: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._logger is None:
            import structlog

            # A copy: two threads' first loggers may both get here; configuring twice is
            # harmless, reading a list another thread just emptied is not.
            pending = _pending[:]
            if pending:
                configure_logging(*pending[0])
            # structlog's own lazy proxy: it reads the configuration at each call, so a
            # SIGHUP's new level or format applies to loggers already made.
            self._logger = structlog.get_logger()
        return getattr(self._logger, name)


def get_logger() -> Any:
    """A logger for a module (``log = get_logger()`` at its top): structlog's, on first use."""
    return _Logger()


@contextmanager
def command_logging() -> Iterator[None]:
    """Logging for one command of ``cli.main``: on stderr, warnings and up (``watch`` then
    reconfigures from ``[log]``); the previous configuration comes back afterwards, so that
    ``main`` called in-process (tests, embedding) leaves structlog as it found it.

    When structlog is not imported yet (a fresh process), it stays so until a logger is used.
    """
    if "structlog" not in sys.modules:
        _pending[:] = [("auto", "warning")]
        try:
            yield
        finally:
            _pending.clear()
            if (module := sys.modules.get("structlog")) is not None:
                # It was imported during the command, with the defaults before it.
                module.reset_defaults()
        return
    import structlog

    previous = structlog.get_config()
    configure_logging("auto", "warning")
    try:
        yield
    finally:
        structlog.configure(**previous)
