"""`postflightd completion SHELL`: argcomplete's script for each shell, answered by our parser."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.needs import require_tool

SCRIPT = Path(sys.executable).with_name("postflightd")


def _env() -> dict[str, str]:
    # The completion scripts call `postflightd` by name: the one of this venv.
    return {**os.environ, "PATH": f"{SCRIPT.parent}{os.pathsep}{os.environ.get('PATH', '')}"}


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_script_for_each_shell(shell: str) -> None:
    out = subprocess.run(
        [str(SCRIPT), "completion", shell], capture_output=True, text=True, check=True, timeout=60
    )
    assert "postflightd" in out.stdout
    assert "_ARGCOMPLETE" in out.stdout
    tool = shutil.which(shell)
    if tool is None:
        return  # generated; the syntax check needs the shell itself
    check = {"bash": ["-n"], "zsh": ["-n"], "fish": ["--no-execute"]}[shell]
    syntax = subprocess.run(
        [tool, *check], input=out.stdout, capture_output=True, text=True, check=False
    )
    assert syntax.returncode == 0, syntax.stderr


def test_unknown_shell_is_a_usage_error() -> None:
    out = subprocess.run(
        [str(SCRIPT), "completion", "tcsh"], capture_output=True, text=True, check=False
    )
    assert out.returncode == 2
    assert "invalid choice" in out.stderr


def test_bash_completes_subcommands_and_options_through_the_real_script(tmp_path: Path) -> None:
    """Source the script in bash and call its completion function as bash would on <TAB>."""
    bash = require_tool("bash", "the script is sourced in bash")
    script = tmp_path / "postflightd.bash"
    script.write_text(
        subprocess.run(
            [str(SCRIPT), "completion", "bash"], capture_output=True, text=True, check=True
        ).stdout,
        encoding="utf-8",
    )

    def complete(*words: str) -> list[str]:
        line = " ".join(words)
        program = (
            f"source {script}; COMP_LINE='{line}'; COMP_POINT=${{#COMP_LINE}}; "
            f"COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; "
            f"_python_argcomplete postflightd '{words[-1]}' '{words[-2]}'; "
            'printf "%s\\n" "${COMPREPLY[@]}"'
        )
        out = subprocess.run(
            [bash, "-c", program],
            capture_output=True,
            text=True,
            env=_env(),
            timeout=60,
            check=False,
        )
        return [w.strip() for w in out.stdout.splitlines() if w.strip()]

    assert complete("postflightd", "sta") == ["status"]
    assert set(complete("postflightd", "s")) >= {"scan", "status", "schema"}
    assert "--format" in complete("postflightd", "scan", "--fo")
    assert set(complete("postflightd", "completion", "")) >= {"bash", "zsh", "fish"}


def test_version_does_not_import_argcomplete() -> None:
    """Completion support costs nothing unless the shell is completing."""
    code = (
        "import sys\n"
        "from postflightd.cli import main\n"
        "try:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
        "print('argcomplete' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip().splitlines()[-1] == "False"


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_each_script_and_the_help_say_where_to_install_it(
    shell: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from postflightd.cli import main

    places = {
        "bash": "~/.local/share/bash-completion/completions/postflightd",
        "zsh": '"${fpath[1]}/_postflightd"',
        "fish": "~/.config/fish/completions/postflightd.fish",
    }
    assert main(["completion", shell]) == 0
    script = capsys.readouterr().out
    head = script.splitlines()[:3]
    if head[0] == "#compdef postflightd":  # zsh reads the tag on the first line: kept there
        head = head[1:]
    assert head[0] == f"# postflightd's {shell} completion; install it with:"
    assert head[1].startswith(f"#   postflightd completion {shell} > {places[shell]}")
    with pytest.raises(SystemExit):
        main(["completion", "--help"])
    assert f"{shell}: postflightd completion {shell} > {places[shell]}" in capsys.readouterr().out


def _answer(
    tmp_path: Path, line: str, asker: str = "bash", prefix: str = "postflightd.commands."
) -> tuple[list[str], list[str]]:
    """argcomplete's answer for the command line ``line`` as the shell ``asker`` asks it, and the
    modules named ``prefix...`` (of ``commands/``) that answering it imported."""
    answer = tmp_path / "answer"
    env = {
        **os.environ,
        "_ARGCOMPLETE": "1",
        "_ARGCOMPLETE_SHELL": asker,
        "COMP_LINE": line,
        "COMP_POINT": str(len(line)),
        "COMP_TYPE": "9",
        "_ARGCOMPLETE_STDOUT_FILENAME": str(answer),
    }
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "postflightd"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    imported = [
        row.rsplit("|", 1)[1].strip()
        for row in done.stderr.splitlines()
        if row.startswith("import time:")
        and row.rsplit("|", 1)[1].strip().startswith(prefix)
        # The machinery every start-up imports; the commands are the rest.
        and "postflightd.commands.parsing" not in row
    ]
    return answer.read_text().split("\v"), sorted(imported)


def test_completing_a_command_name_imports_no_command(tmp_path: Path) -> None:
    words, imported = _answer(tmp_path, "postflightd sc")
    assert sorted(words) == ["scan", "schema"]
    assert imported == ["postflightd.commands.completion"]


def test_each_command_name_is_offered_with_its_own_help(tmp_path: Path) -> None:
    """zsh shows each command's line of ``--help`` beside its name."""
    words, _ = _answer(tmp_path, "postflightd s", asker="zsh")
    assert words == [
        "scan:validate every metadata file; report stuck agents",
        "schema:print the JSON Schema of the metadata file",
        "status:the runs in flight: stage, phases, elapsed, STUCK",
        "serve:the live dashboard and /metrics (the [web] extra)",
    ]


def test_completing_an_option_imports_that_command_alone(tmp_path: Path) -> None:
    words, imported = _answer(tmp_path, "postflightd scan --st")
    assert sorted(words) == ["--statistics", "--strict"]
    assert imported == [
        "postflightd.commands.arguments",
        "postflightd.commands.completion",
        "postflightd.commands.scan",
    ]


def test_completing_the_options_of_a_command_that_checks_with_pydantic_imports_no_pydantic(
    tmp_path: Path,
) -> None:
    # A key press waits for the answer: the checks (and pydantic) load when the command runs.
    words, heavy = _answer(tmp_path, "postflightd check-return --di", prefix="pydantic")
    assert [w.strip() for w in words] == ["--dialect"]
    assert heavy == []
