"""``postflightd completion SHELL``: the shell completion script (see completion.py)."""

from __future__ import annotations

import sys

from postflightd.completion import completion_script
from postflightd.errors import ExitCode


def run_completion(shell: str) -> int:
    sys.stdout.write(completion_script(shell))
    return int(ExitCode.OK)
