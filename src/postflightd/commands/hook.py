"""``postflightd hook RUNTIME``: the stop-hook adapters' command (each protocol is a module
of ``hooks``; what they share is ``hooks.decision``).

The hook runs at every agent stop, so it imports only what the stop needs: the one runtime
module asked for (``_runtime``), and the pipeline's apply and check only when the project has
metadata files (``hooks.decision``). ``tests/commands/test_hook_imports.py`` checks that.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any, Final

from postflightd.commands.arguments import open_journal
from postflightd.config import load_config
from postflightd.errors import ExitCode, PostflightError, internal_error_text
from postflightd.hooks.decision import Runtime, Verdict, answer, message_of
from postflightd.hooks.stdin import HookInputError, load_object, read_hook_input
from postflightd.inert import inert, json_text

if TYPE_CHECKING:
    import argparse

#: project.hook_files.RUNTIME_NAMES (a test keeps the two equal), named here: the hook runs at
#: every agent stop, and looking them up would import the set-up layer for it.
RUNTIME_NAMES: Final = ("claude", "codex", "gemini", "copilot", "cursor", "opencode")


def _runtime(name: str) -> Runtime:
    """The protocol of ``hook NAME``, its module imported alone."""
    match name:
        case "codex":
            from postflightd.hooks import codex

            return codex.RUNTIME
        case "gemini":
            from postflightd.hooks import gemini

            return gemini.RUNTIME
        case "copilot":
            from postflightd.hooks import copilot

            return copilot.RUNTIME
        case "cursor":
            from postflightd.hooks import cursor

            return cursor.RUNTIME
        case "opencode":
            from postflightd.hooks import opencode

            return opencode.RUNTIME
        case _:
            from postflightd.hooks import claude

            return claude.RUNTIME


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``hook``'s options."""
    parser.add_argument(
        "runtime", choices=RUNTIME_NAMES, help="the hook protocol spoken on stdin/stdout"
    )
    parser.add_argument("--config", metavar="PATH", help="configuration file (TOML)")


def run(args: argparse.Namespace) -> int:
    return run_hook(args.runtime, config_path=args.config)


def run_hook(runtime_name: str = "claude", *, config_path: str | None) -> int:
    """Stop-hook adapter: exactly one JSON object on stdout, never the runtime's blocking
    exit code.

    Malformed stdin is the runtime's non-blocking error (one line on stderr, ``{}``), and every
    problem that is not the metadata's is a message for the person, exit 0. ``hook claude``
    answers Copilot CLI and Cursor in their own protocols (``hooks.claude.caller``).
    """
    runtime = _runtime(runtime_name)
    if os.isatty(0):  # a person trying it by hand: say what it waits for
        print(
            f"postflightd hook {runtime_name}: reading the runtime's JSON on stdin (Ctrl-D ends)",
            file=sys.stderr,
        )
    try:
        # Descriptor 0 itself: the runtime's pipe, and no AttributeError when sys.stdin is
        # None (started with stdin closed): read_hook_input turns EBADF into HookInputError.
        doc = load_object(read_hook_input(0))
        if runtime.name == "claude":
            from postflightd.hooks.claude import caller

            runtime = caller(doc)
        request = runtime.parse(doc, os.environ)
    except HookInputError as exc:
        print(f"postflightd: {inert(str(exc))}", file=sys.stderr)
        _say("{}")
        return runtime.malformed_exit
    if request.stop is not None:
        from postflightd.hooks.once import first_run

        if not first_run(request.stop):
            print("{}")  # the same stop's first run answers it
            return int(ExitCode.OK)
    try:
        verdict = answer(request, lambda start: load_config(config_path, [start]), open_journal)
    except PostflightError as exc:
        verdict = Verdict(message=message_of([str(exc)]))
    except Exception as exc:  # noqa: BLE001 - the hook must answer the runtime whatever happens
        verdict = Verdict(message=message_of([internal_error_text(exc)]))
    reply: dict[str, Any] = runtime.render(verdict)
    if verdict.message is not None and runtime.person != "answer":
        print(verdict.message, file=sys.stderr)
    _say(json_text(reply))
    return int(ExitCode.OK)


def _say(answer: str) -> None:
    """Print the answer on stdout, flushed. A runtime that stopped reading it (OpenCode's
    `run` may end while its plugin's hook runs) is no failure of the hook: the post-flight is
    done, and the hook still exits as it would have, never 141."""
    try:
        print(answer)
        sys.stdout.flush()
    except BrokenPipeError:
        # What is still buffered goes nowhere, or the flush at exit would fail again.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        except (OSError, AttributeError, ValueError):
            pass  # no stdout descriptor to replace: nothing left to flush
