"""Conditions a user can fix, and the one table of exit codes (SPEC 4)."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    FINDINGS = 1
    USAGE = 2
    IN_PROGRESS = 3
    STATE_UNUSABLE = 4
    INTERNAL = 70
    INTERRUPTED = 130


class PostflightError(Exception):
    """An error the user can fix; ``main`` prints the message and exits with ``exit_code``."""

    exit_code: ExitCode = ExitCode.USAGE


class UsageError(PostflightError):
    exit_code = ExitCode.USAGE


class ConfigError(PostflightError):
    exit_code = ExitCode.USAGE


class StateUnusableError(PostflightError):
    exit_code = ExitCode.STATE_UNUSABLE


def write_crash_log(exc: BaseException) -> str:
    """Write the traceback of an unexpected error to the crash log; return where it went."""
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
