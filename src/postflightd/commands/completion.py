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


def completion_script(shell: str) -> str:
    """The script to source (bash, zsh) or save as ``completions/postflightd.fish``."""
    from argcomplete.shell_integration import shellcode

    script: str = shellcode([PROG], shell=shell)
    return script if script.endswith("\n") else script + "\n"


def complete_and_exit(parser: argparse.ArgumentParser) -> None:
    """Answer the shell's completion request and exit (argcomplete writes to fd 8)."""
    import argcomplete

    argcomplete.autocomplete(parser)


def run_completion(*, shell: str) -> int:
    """Print the completion script of ``shell``."""
    sys.stdout.write(completion_script(shell))
    return int(ExitCode.OK)
