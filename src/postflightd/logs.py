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

import os
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
    # reads as the rest of the product writes it (``elapsed=321d07h``). JSON keeps the
    # numbers, for machines.
    for key in list(event):
        value = event[key]
        if key.endswith("_s") and isinstance(value, int | float) and not isinstance(value, bool):
            seconds = float(value)
            # Under a minute the fraction matters (a lock waited on for 0.25 s).
            shown = f"{seconds:.3g}s" if abs(seconds) < 60 else format_duration(seconds)
            event[key.removesuffix("_s")] = shown
            del event[key]
    return event


#: Fields a console line shows in its own place (time, task, event, status, codes, agent,
#: file), or leaves to the JSON log: a session id, the root of a task's event, a process id
#: and a run's phase counts are there for queries, not for a person following the daemon.
_PLACED: Final = frozenset(
    {
        "timestamp",
        "level",
        "event",
        "exception",
        "root",
        "task",
        "session",
        "file",
        "status",
        "agent",
        "code",
        "findings",
        "warnings",
        "stage",
        "message",
        "replaced_session",
        "pid",
        "specs_dir",
        "phases_completed",
        "phases_total",
        "root_configs",
    }
)

#: The most characters of one value on a console line (an error message, a reason): the
#: line stays a line on a terminal; the JSON log keeps the value whole.
MAX_CONSOLE_VALUE_CHARS: Final = 80

_COLORS: Final = {"error": "\x1b[31m", "critical": "\x1b[31m", "warning": "\x1b[33m"}


def _codes(event: Mapping[str, Any]) -> list[str]:
    """The rule codes an event names: its ``code``, its ``warnings`` (codes already) and the
    first word of each of its ``findings`` (``PF303 completion_data: message``)."""
    codes: list[str] = []
    found = [event.get("code"), *(event.get("warnings") or ()), *(event.get("findings") or ())]
    for item in found:
        if isinstance(item, str) and item:
            code = item.split(":", 1)[0].split(" ", 1)[0]
            if code not in codes:
                codes.append(code)
    return codes


def _shown(value: object) -> str:
    if isinstance(value, list | tuple):
        text = ", ".join(str(v) for v in value)
    elif isinstance(value, dict):
        text = ", ".join(f"{k}: {v}" for k, v in value.items())
    else:
        text = str(value)
    text = inert(clip(text, MAX_CONSOLE_VALUE_CHARS))
    return repr(text) if " " in text or not text else text


class _ConsoleLine:
    """One short line per event, for a person: ``12:04:31 262 applied researched
    (python-implementation-agent)``; ``12:04:31 260 invalid PF203, PF502 (planner-agent):
    specs/260_lsp_setup/.return-meta.json``. The time, the task, what happened (the event, the
    status, the codes of the findings, never their text), the agent, then the few other
    fields the event has (durations, an error's message), and the file where a warning or an
    error asks a person to look. Every value is written by ``inert``; the JSON log keeps every
    field whole."""

    def __init__(self, colors: bool) -> None:
        self._colors = colors

    def __call__(self, _logger: object, method: str, event: MutableMapping[str, Any]) -> str:
        level = str(event.get("level", method))
        parts = [str(event.get("timestamp", ""))]
        if event.get("task") is not None:
            parts.append(inert(str(event["task"])))
        name = inert(str(event.get("event", "")))
        color = _COLORS.get(level) if self._colors else None
        parts.append(f"{color}{name}\x1b[0m" if color else name)
        problem = _LEVELS.get(level, 40) >= _LEVELS["warning"]
        # A problem's line names its codes; the status is the JSON log's to keep.
        if isinstance(event.get("status"), str) and not problem:
            parts.append(inert(clip(event["status"], MAX_CONSOLE_VALUE_CHARS)))
        if isinstance(event.get("stage"), str):
            parts.append(inert(clip(event["stage"], MAX_CONSOLE_VALUE_CHARS)))
        if codes := _codes(event):
            parts.append(inert(clip(", ".join(codes), MAX_CONSOLE_VALUE_CHARS)))
        extras = [
            f"{key}={_shown(value)}"
            for key, value in event.items()
            if key not in _PLACED and value is not None
        ]
        if event.get("task") is None and event.get("root") is not None:
            extras.insert(0, f"root={_shown(event['root'])}")
        parts.extend(extras)
        if isinstance(event.get("agent"), str):
            parts.append(f"({inert(clip(event['agent'], MAX_CONSOLE_VALUE_CHARS))})")
        line = " ".join(p for p in parts if p)
        file = event.get("file")
        if isinstance(file, str) and problem:
            line += f": {inert(clip(file, MAX_CONSOLE_VALUE_CHARS * 2))}"
        exception = event.get("exception")
        if isinstance(exception, str) and exception:
            line += "\n" + "\n".join(inert(x) for x in exception.split("\n"))
        return line


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
        renderer = _ConsoleLine(colors=out.isatty())
    else:
        renderer = structlog.processors.JSONRenderer(serializer=json_text, sort_keys=False)
    if under_journald(out):
        renderer = _WithPriority(renderer)
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            # A person at a terminal reads the time of day where they are; machines get UTC.
            structlog.processors.TimeStamper(fmt="%H:%M:%S", utc=False)
            if console
            else structlog.processors.TimeStamper(fmt="iso", utc=True),
            _with_context_keys,
            *([_drop_none] if console else []),
            structlog.processors.format_exc_info,
            _bounded_values,
            *([_human_values] if console else []),
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
