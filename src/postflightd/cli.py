"""The command line: the table of commands, the parser, and ``main``, which runs one of them.

A command is a module of ``commands/`` owning ``add_arguments(parser)`` and ``run(args) -> int``
(and ``without_effect(args)``: an option given where it changes nothing). Its parser is made and
its module imported only when argparse meets its name (``commands.parsing``): ``--version`` and
``--help`` import no command, a hook or a scan its own alone (all would cost 7 ms of a start-up
kept under 250 ms).
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Sequence

from postflightd import __version__
from postflightd.commands.parsing import Parsers, command_module, parsed, parser_class

#: ``typing.TYPE_CHECKING``, without importing typing (3 ms of ``--version``'s start-up).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

    from _typeshed import ReadableBuffer

#: Every command, in the order ``--help`` lists them, with its line there; its module is
#: ``postflightd.commands.<name>`` (``-`` spelled ``_``).
COMMANDS = {
    "scan": "validate every metadata file; report stuck agents",
    "process": "validate one metadata file and apply its outcome now (for a workflow)",
    "hook": "adapter for an agent runtime's stop hook",
    "history": "what the journal recorded",
    "check-return": "validate a subagent's console return",
    "schema": "print the JSON Schema of the metadata file",
    "mcp": "an MCP server for agents to check their metadata ([mcp] extra)",
    "rules": "list the rule codes, or explain one (rules PF405)",
    "watch": "the daemon: watch roots, post-flight as agents finish",
    "status": "the runs in flight: stage, phases, elapsed, STUCK",
    "verify": "outcomes the journal recorded that state.json or TODO.md no longer shows",
    "init": "set a project up: .gitignore, stop hook, config file (the hook only validates "
    "where a skill or hook script already reads or deletes metadata files)",
    "completion": "print the shell completion script",
    "report": "analytics from the journal: outcomes, durations, timeouts, findings",
    "serve": "the live dashboard and /metrics (the [web] extra)",
}
#: fs.faults.FAULT_ENV and commands.completion.COMPLETING_ENV, named here: start-up imports
#: neither module to look them up.
FAULT_ENV, COMPLETING_ENV = "POSTFLIGHTD_FAULT_AT", "_ARGCOMPLETE"


def parser(*, whole: bool = False) -> argparse.ArgumentParser:
    """The parser; ``whole``: every command's parser made now (the docs list them all)."""
    make = parser_class(COMMANDS)
    top = make(
        prog="postflightd",
        allow_abbrev=False,
        description="Validate AI agents' .return-meta.json files and apply their outcome to "
        "specs/state.json and TODO.md.",
    )
    top.add_argument("--version", action="version", version=f"postflightd {__version__}")
    sub = top.add_subparsers(dest="command", metavar="COMMAND")
    # Names, not parsers, are argparse's (and argcomplete's) choices: it only checks and lists
    # them, and no parser is made for that.
    sub.choices = {name: name for name in COMMANDS}  # type: ignore[misc]
    sub._name_parser_map = Parsers(make)
    sub._choices_actions = [sub._ChoicesPseudoAction(n, (), h) for n, h in COMMANDS.items()]
    for name in COMMANDS if whole else ():
        sub._name_parser_map[name]  # made now
    return top


def _run(argv: Sequence[str] | None) -> int:
    words = sys.argv[1:] if argv is None else argv
    if words[:1] != ["hook"]:
        return _run_words(words)
    import gc  # here: the other commands leave the collector alone

    if not gc.isenabled():
        return _run_words(words)
    # A stop (every agent's) is a short process that frees nearly all it makes as it goes: the
    # cyclic collector's passes over its growing heap, and its last one over every module at
    # exit, find next to nothing to free and were 7 to 9 % of a stop's instructions.
    gc.disable()
    try:
        return _run_words(words)
    finally:
        if argv is None:
            # The process ends now: what it holds is the operating system's to free, not a
            # last pass of the collector's over every module (nothing of it is written at exit:
            # the answer is flushed, the journal and every file closed).
            gc.freeze()
        gc.enable()


def _run_words(words: Sequence[str]) -> int:
    completing = COMPLETING_ENV in os.environ
    runtime = None if completing else _plain_hook(words)
    if runtime is None:
        top = parser()
        if completing:
            # The shell's completion function is asking (argcomplete's protocol): it makes the
            # parser of the command being completed alone.
            from postflightd.commands.completion import complete_and_exit

            complete_and_exit(top)
        args = parsed(top, words)
    from postflightd.logs import command_logging

    # Once, for every command, on stderr: structlog's default prints to stdout, where a
    # warning would corrupt a JSON report or the hook's answer.
    with command_logging():
        if FAULT_ENV in os.environ:
            # Test hook: an error no command expects, to prove the crash log and exit 70.
            from postflightd.fs.faults import fault_point

            fault_point("command")
        if runtime is not None:
            # What commands.hook.run does with the Namespace the parser makes of these words.
            return int(command_module("hook").run_hook(runtime, config_path=None))
        if args.command is None:
            from postflightd.errors import ExitCode

            top.print_help(sys.stderr)
            return int(ExitCode.USAGE)
        return int(command_module(args.command).run(args))


class _Output(io.FileIO):
    """stdout's descriptor, a failed write (but a broken pipe) an ``OutputError``."""

    def write(self, data: ReadableBuffer, /) -> int:
        try:
            return super().write(data)
        except BrokenPipeError:
            raise  # the reader left on purpose (`| head`): 141, nothing said
        except OSError as exc:
            from postflightd.errors import OutputError

            why = exc.strerror or str(exc)
            raise OutputError(
                f"cannot write to stdout ({why}): what it shows is incomplete"
            ) from exc


def _plain_hook(words: Sequence[str]) -> str | None:
    """The runtime of ``hook RUNTIME`` alone, as ``init`` writes it into each runtime's
    settings, read as the parser reads it (a test holds the two equal) without making one: it
    runs at every agent stop, and importing argparse and making the parser (its messages
    import ``locale``) is 16 million instructions of a stop with nothing to do. None for any
    other command line."""
    if len(words) == 2 and words[0] == "hook" and words[1] in command_module("hook").RUNTIME_NAMES:
        return words[1]
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; return its exit code (failures: ``errors.exit_code_of``)."""
    try:
        if argv is None and sys.argv[1:2] != ["hook"]:
            _checked_stdout()
        try:
            code = _run(argv)
        except SystemExit:
            _flush_stdout()  # argparse's --help and --version print, then exit
            raise
        _flush_stdout()
    except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - the one place they become codes
        from postflightd.errors import exit_code_of

        return int(exit_code_of(exc))
    return code


def _flush_stdout() -> None:
    # Flushed here, not at exit: a reader gone is a broken pipe (141), not an "Exception
    # ignored" message and 120. (No stdout when started with it closed: `watch` prints none.)
    if sys.stdout is not None:
        sys.stdout.flush()


def _checked_stdout() -> None:
    """The process's stdout, its writes failing with ``OutputError`` where they fail other
    than by a reader gone: a report to a full disk is the user's to fix (exit 74), not a bug
    to report. Text, encoding and line buffering are the interpreter's own. Not for a hook (its
    reader is the runtime: gone is a broken pipe) nor a stdout that is not the process's."""
    out = sys.stdout
    if out is None or out is not sys.__stdout__ or not isinstance(out, io.TextIOWrapper):
        return
    try:
        fd = out.fileno()
        out.flush()
        raw = _Output(fd, "w", closefd=False)
    except (OSError, ValueError):
        return  # a stdout without a descriptor of its own: left as it is
    # Unbuffered (`python -u`, PYTHONUNBUFFERED) where the interpreter's is: its text layer
    # then writes straight to the descriptor.
    unbuffered = isinstance(out.buffer, io.RawIOBase)
    sys.stdout = io.TextIOWrapper(
        raw if unbuffered else io.BufferedWriter(raw),
        encoding=out.encoding,
        errors=out.errors,
        line_buffering=out.line_buffering,
        write_through=out.write_through,
    )
