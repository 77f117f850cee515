"""Shell completion: argcomplete's scripts for bash, zsh and fish, answered from our parser.

argcomplete rather than shtab: shtab writes static scripts for bash, zsh and tcsh but not fish
(tqdm/shtab#134 is open); argcomplete's shell code covers all three. Its script calls
``postflightd`` back with ``_ARGCOMPLETE`` set, and ``cli.main`` hands the parser to
``complete_and_exit`` before anything else runs: argcomplete is imported only then, so
``--version`` and every other command never load it.
"""

from __future__ import annotations

import argparse
import os
from typing import Final

SHELLS: Final = ("bash", "zsh", "fish")
PROG: Final = "postflightd"


def completion_script(shell: str) -> str:
    """The script to source (bash, zsh) or save as ``completions/postflightd.fish``."""
    from argcomplete.shell_integration import shellcode

    script: str = shellcode([PROG], shell=shell)
    return script if script.endswith("\n") else script + "\n"


def completing() -> bool:
    """True when the shell's completion function is asking (argcomplete's protocol)."""
    return "_ARGCOMPLETE" in os.environ


def complete_and_exit(parser: argparse.ArgumentParser) -> None:
    """Answer the shell's completion request and exit (argcomplete writes to fd 8)."""
    import argcomplete

    argcomplete.autocomplete(parser)
