"""``postflightd completion SHELL`` and shell completion itself: argcomplete's scripts for
bash, zsh and fish, answered from our parser.

argcomplete rather than shtab: shtab writes static scripts for bash, zsh and tcsh but not
fish; argcomplete's shell code covers all three. Its script calls ``postflightd`` back with
``_ARGCOMPLETE`` set, and ``cli.main`` hands the parser to ``complete_and_exit`` before
anything else runs: argcomplete is imported only then, so ``--version`` and every other
command never load it.
"""

from __future__ import annotations

import argparse
import sys
from typing import Final

from postflightd.errors import ExitCode

SHELLS: Final = ("bash", "zsh", "fish")
PROG: Final = "postflightd"
#: Set when the shell's completion function is asking (argcomplete's protocol).
COMPLETING_ENV: Final = "_ARGCOMPLETE"
#: Where each shell's completion script goes: ``completion --help`` says it, and so does the
#: script's first comment (docs/index.md too).
INSTALL: Final = {
    "bash": "postflightd completion bash > ~/.local/share/bash-completion/completions/postflightd",
    "zsh": 'postflightd completion zsh > "${fpath[1]}/_postflightd"  (or any directory on $fpath)',
    "fish": "postflightd completion fish > ~/.config/fish/completions/postflightd.fish",
}


def completion_script(shell: str, install: str = "") -> str:
    """The script to source (bash, zsh) or save as ``completions/postflightd.fish``, starting
    with a comment that says where to put it (``install``, the command that does)."""
    from argcomplete.shell_integration import shellcode

    script: str = shellcode([PROG], shell=shell)
    script = script if script.endswith("\n") else script + "\n"
    if not install:
        return script
    comment = f"# postflightd's {shell} completion; install it with:\n#   {install}\n"
    # zsh reads a completion file's first line for its #compdef tag: the comment goes after.
    first, newline, rest = script.partition("\n")
    if first.startswith("#compdef"):
        return first + newline + comment + rest
    return comment + script


def complete_and_exit(parser: argparse.ArgumentParser) -> None:
    """Answer the shell's completion request and exit (argcomplete writes to fd 8)."""
    import argcomplete

    argcomplete.autocomplete(parser)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``completion``'s argument, and its help: where each shell's script goes."""
    places = "\n".join(f"  {shell}: {line}" for shell, line in INSTALL.items())
    parser.description = "Print the completion script of SHELL, to save where the shell reads it."
    parser.epilog = f"install it where the shell looks for it (then start a new shell):\n{places}"
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("shell", choices=tuple(INSTALL))


def run(args: argparse.Namespace) -> int:
    return run_completion(shell=args.shell, install=INSTALL[args.shell])


def run_completion(*, shell: str, install: str = "") -> int:
    """Print the completion script of ``shell`` (``install``: how to install it, said first)."""
    sys.stdout.write(completion_script(shell, install))
    return int(ExitCode.OK)
