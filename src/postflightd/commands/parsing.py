"""The command line's machinery: each command's module found by name, the parser class every
parser is made of, the commands' parsers made as argparse asks for them, and a command line
parsed with the command's own usage errors.

Nothing is imported here at import time: ``cli`` imports this module at every start-up, the
stop hook and ``--version`` included, and argparse is imported with the first parser.
"""

from __future__ import annotations

#: ``typing.TYPE_CHECKING``, without importing typing (3 ms of ``--version``'s start-up).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Mapping, Sequence
    from types import ModuleType
    from typing import NoReturn


def command_module(name: str) -> ModuleType:
    """The module of command ``name`` (one of ``cli.COMMANDS``), imported now."""
    # Not importlib's import_module: `completion` would load importlib for it. (A fromlist makes
    # __import__ return the module itself, not the package.)
    return __import__(f"postflightd.commands.{name.replace('-', '_')}", fromlist=["run"])


def parser_class(commands: Mapping[str, str]) -> type[argparse.ArgumentParser]:
    """The class of postflightd's parser and of each command's (``commands``: the names a
    mistyped command is matched against). Made with the first parser, not at import: the stop
    hook makes none, and argparse with ``gettext`` is 8 million instructions of a stop with
    nothing to do."""
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

                message += meant(given, commands, 0.6)
            super().error(message)

    return _Parser


class Parsers(dict[str, "argparse.ArgumentParser"]):
    """The commands' parsers by name, each made by its module when argparse first asks for it."""

    def __init__(self, make: type[argparse.ArgumentParser]) -> None:
        super().__init__()
        self.make = make

    def __missing__(self, name: str) -> argparse.ArgumentParser:
        parser = self[name] = self.make(prog=f"postflightd {name}", allow_abbrev=False)
        command_module(name).add_arguments(parser)
        return parser


def parsed(top: argparse.ArgumentParser, words: Sequence[str]) -> argparse.Namespace:
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
