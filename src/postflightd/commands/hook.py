"""``postflightd hook claude``: the stop-hook adapter's command (the protocol is ``hook.py``)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from postflightd.commands.arguments import open_journal
from postflightd.config import load_config
from postflightd.errors import ExitCode, PostflightError, write_crash_log
from postflightd.hooks.claude import (
    HookInputError,
    answer,
    parse_hook_input,
    read_hook_input,
    system_message,
)
from postflightd.inert import inert, json_text


def run_hook(*, config_path: str | None) -> int:
    """Stop-hook adapter: exactly one JSON object on stdout, and never exit 2.

    Exit 2 means "block and show stderr to the agent" to the runtime: so malformed stdin is
    exit 1 (one line on stderr), and every problem that is not the metadata's is a
    ``systemMessage`` for the person, exit 0.
    """
    reply: Mapping[str, object]
    try:
        # Descriptor 0 itself: the runtime's pipe, and no AttributeError when sys.stdin is
        # None (started with stdin closed): read_hook_input turns EBADF into HookInputError.
        hook_input = parse_hook_input(read_hook_input(0))
    except HookInputError as exc:
        print(f"postflightd: {inert(str(exc))}", file=sys.stderr)
        print("{}")
        return int(exc.exit_code)
    try:
        reply = answer(
            hook_input,
            lambda start: load_config(config_path, [start]),
            open_journal,
            os.environ,
        )
    except PostflightError as exc:
        reply = system_message([str(exc)])
    except Exception as exc:  # noqa: BLE001 - the hook must answer the runtime whatever happens
        where = write_crash_log(exc)
        reply = system_message([f"internal error ({type(exc).__name__}); details in {where}"])
    print(json_text(reply))
    return int(ExitCode.OK)
