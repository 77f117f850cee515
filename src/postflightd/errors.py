"""The one table of exit codes, the errors a user can fix, and ``exit_code_of``:
the one place a failure becomes an exit code.

A command's own verdict comes from its result object (``Tally``, ``ReturnReport``,
``VerifyReport``, ``Processed``, ``status_exit_code``), always as an ``ExitCode`` member;
everything that stops a command early is an exception mapped here.
"""

from __future__ import annotations

import os
import sys
from enum import IntEnum


class ExitCode(IntEnum):
    #: clean; an outcome applied; a report written
    OK = 0
    #: findings (errors, or warnings with --strict), a stuck run, an outcome lost (verify),
    #: changes init showed and did not write
    FINDINGS = 1
    #: a usage or configuration error; the project lock held past the wait
    USAGE = 2
    #: ``process``: the run is still in progress (interrupted)
    IN_PROGRESS = 3
    #: state.json unusable (PF604), specs/ refused, a project file unreadable or unwritable
    STATE_UNUSABLE = 4
    #: a bug: the traceback is in the crash log (BSD sysexits' EX_SOFTWARE)
    INTERNAL = 70
    #: stdout could not be written (a full disk, an I/O error): the report is incomplete, so
    #: its verdict is unknown (BSD sysexits' EX_IOERR)
    OUTPUT = 74
    #: Ctrl-C (128 + SIGINT, as a shell reports a command the signal ended)
    INTERRUPTED = 130
    #: the reader of stdout went away (128 + SIGPIPE, what the shell reports for grep or git
    #: in ``| head``): the report was cut short, so its verdict is unknown; never 0
    BROKEN_PIPE = 141


class PostflightError(Exception):
    """An error the user can fix; ``main`` prints the message and exits with ``exit_code``."""

    exit_code: ExitCode = ExitCode.USAGE


class UsageError(PostflightError):
    exit_code = ExitCode.USAGE


class ConfigError(PostflightError):
    exit_code = ExitCode.USAGE


class StateUnusableError(PostflightError):
    exit_code = ExitCode.STATE_UNUSABLE


class MalformedInputError(PostflightError):
    """What a protocol sends us on stdin is not what it promised (the hook's input): exit 1,
    which an agent runtime shows without blocking the agent (2 would block it)."""

    exit_code = ExitCode.FINDINGS


class ProjectLockedError(PostflightError):
    """Another process held the project lock past the wait: the user finds it and retries."""

    exit_code = ExitCode.USAGE


class OutputError(PostflightError):
    """Writing stdout failed other than by its reader leaving (``cli``): the disk it goes to
    is full, or the device failed. The user's to fix, not a bug."""

    exit_code = ExitCode.OUTPUT


class ProjectFileError(PostflightError):
    """A project file could not be read or written (the file layer's errors, ``fs``)."""

    exit_code = ExitCode.STATE_UNUSABLE


def exit_code_of(exc: Exception | KeyboardInterrupt) -> ExitCode:
    """The exit code of a command that raised ``exc``, with its one line on stderr."""
    if isinstance(exc, PostflightError):
        from postflightd.inert import inert

        if isinstance(exc, OutputError):
            _discard_stdout()  # as for a broken pipe: the interpreter's last flush fails too
        print(f"postflightd: {inert(str(exc))}", file=sys.stderr)
        return exc.exit_code
    if isinstance(exc, KeyboardInterrupt):
        print("postflightd: interrupted", file=sys.stderr)
        return ExitCode.INTERRUPTED
    if isinstance(exc, BrokenPipeError):
        # Nothing said: the reader left on purpose (`| head`). What is still buffered for
        # stdout goes nowhere, or the interpreter's flush at exit fails again (and exits 120).
        _discard_stdout()
        return ExitCode.BROKEN_PIPE
    print(f"postflightd: {internal_error_text(exc)}", file=sys.stderr)
    return ExitCode.INTERNAL


def internal_error_text(exc: BaseException) -> str:
    """What an error no command expects says, once its traceback is in the crash log: that it
    is a bug, and what to do with it."""
    where = write_crash_log(exc)
    return (
        f"internal error ({type(exc).__name__}), a bug in postflightd: please report it, "
        f"with the details in {where}"
    )


def _discard_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, AttributeError, ValueError):
        pass  # no stdout descriptor to replace (captured, or closed): nothing will be flushed


def write_crash_log(exc: BaseException) -> str:
    """Write the traceback of an unexpected error to the crash log; return where it went."""
    # Imported here: only a crash needs them, and this module is imported by every command
    # (tempfile, traceback and platformdirs are a tenth of a stop's start-up).
    import tempfile
    import traceback
    from datetime import UTC, datetime
    from pathlib import Path

    from postflightd import __version__

    try:
        from platformdirs import user_log_path

        log_dir = user_log_path("postflightd")
        log_dir.mkdir(parents=True, exist_ok=True)
    except Exception:  # noqa: BLE001 - the crash log must be written somewhere
        log_dir = Path(tempfile.gettempdir())
    path = log_dir / "crash.log"
    try:
        with path.open("a", encoding="utf-8") as fh:
            fh.write(f"--- {datetime.now(UTC).isoformat()} postflightd {__version__}\n")
            fh.write("".join(traceback.format_exception(exc)))
    except OSError:
        return "(the crash log could not be written)"
    return str(path)
