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
