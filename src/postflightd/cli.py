"""The command line: the table of commands, the parser, and ``main``, which runs one of them.

A command is a module of ``commands/`` owning ``add_arguments(parser)`` and ``run(args) -> int``
(and ``without_effect(args)``: an option given where it changes nothing). Its parser is made and
its module imported only when argparse meets its name: ``--version`` and ``--help`` import no
command, a hook or a scan its own alone (all would cost 7 ms of a start-up kept under 250 ms).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from postflightd import __version__

#: ``typing.TYPE_CHECKING``, without importing typing (3 ms of ``--version``'s start-up).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from types import ModuleType
    from typing import NoReturn

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


def command_module(name: str) -> ModuleType:
    """The module of command ``name`` (one of ``COMMANDS``), imported now."""
    # Not importlib's import_module: `completion` would load importlib for it. (A fromlist makes
    # __import__ return the module itself, not the package.)
    return __import__(f"postflightd.commands.{name.replace('-', '_')}", fromlist=["run"])


def _parser_class() -> type[argparse.ArgumentParser]:
    """The class of postflightd's parser and of each command's. Made here, on the first
    parser, not at import: the stop hook makes none (``_plain_hook``), and argparse with
    ``gettext`` is 8 million instructions of a stop with nothing to do."""
    import argparse

    class _Parser(argparse.ArgumentParser):
        """The parser of postflightd and of each command, made with ``allow_abbrev=False``:
        an abbreviation accepted today would change meaning the day another option starts the
        same way (``--statistic``), and a CI job would not notice."""

        def error(self, message: str) -> NoReturn:
            """argparse's error, with the command meant by a near miss (``scna``), as options
            get."""
            if message.startswith(prefix := "argument COMMAND: invalid choice: "):
                given = message[len(prefix) :].split(" (choose from", 1)[0].strip("'\"")
                from postflightd.commands.arguments import meant

                message += meant(given, COMMANDS, 0.6)
            super().error(message)

    return _Parser


class _Parsers(dict[str, "argparse.ArgumentParser"]):
    """The commands' parsers by name, each made by its module when argparse first asks for it."""

    def __init__(self, make: type[argparse.ArgumentParser]) -> None:
        super().__init__()
        self.make = make

    def __missing__(self, name: str) -> argparse.ArgumentParser:
        parser = self[name] = self.make(prog=f"postflightd {name}", allow_abbrev=False)
        command_module(name).add_arguments(parser)
        return parser


def parser(*, whole: bool = False) -> argparse.ArgumentParser:
    """The parser; ``whole``: every command's parser made now (the docs list them all)."""
    make = _parser_class()
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
    sub._name_parser_map = _Parsers(make)
    sub._choices_actions = [sub._ChoicesPseudoAction(n, (), h) for n, h in COMMANDS.items()]
    for name in COMMANDS if whole else ():
        sub._name_parser_map[name]  # made now
    return top


def _run(argv: Sequence[str] | None) -> int:
    words = sys.argv[1:] if argv is None else argv
    completing = COMPLETING_ENV in os.environ
    runtime = None if completing else _plain_hook(words)
    if runtime is None:
        top = parser()
        if completing:
            # The shell's completion function is asking (argcomplete's protocol): it makes the
            # parser of the command being completed alone.
            from postflightd.commands.completion import complete_and_exit

            complete_and_exit(top)
        args = _parsed(top, words)
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


def _plain_hook(words: Sequence[str]) -> str | None:
    """The runtime of ``hook RUNTIME`` alone, as ``init`` writes it into each runtime's
    settings, read as the parser reads it (a test holds the two equal) without making one: it
    runs at every agent stop, and importing argparse and making the parser (its messages
    import ``locale``) is 16 million instructions of a stop with nothing to do. None for any
    other command line."""
    if len(words) == 2 and words[0] == "hook" and words[1] in command_module("hook").RUNTIME_NAMES:
        return words[1]
    return None


def _parsed(top: argparse.ArgumentParser, words: Sequence[str]) -> argparse.Namespace:
    """The command line parsed by ``top``, or the command's usage error (exit 2)."""
    import argparse

    args, extra = top.parse_known_args(words)
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    command: argparse.ArgumentParser = sub._name_parser_map[args.command] if args.command else top
    check = getattr(command_module(args.command), "without_effect", None) if args.command else None
    if extra or (check is not None and (problem := check(args)) is not None):
        from postflightd.commands.arguments import unrecognized

        # The command's own usage, not the top-level one argparse gives an unknown option.
        command.error(unrecognized(command, extra) if extra else problem)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; return its exit code (failures: ``errors.exit_code_of``)."""
    try:
        code = _run(argv)
        # Flushed here, not at exit: a reader gone is a broken pipe (141), not an "Exception
        # ignored" message and 120. (No stdout when started with it closed: `watch` prints none.)
        if sys.stdout is not None:
            sys.stdout.flush()
    except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - the one place they become codes
        from postflightd.errors import exit_code_of

        return int(exit_code_of(exc))
    return code
