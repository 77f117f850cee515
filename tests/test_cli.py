"""cli: the parser's ``--format`` choices come from the reporter registries; ``main`` maps
failures to exit codes (70 with a crash log, 130 on Ctrl-C, 141 on a broken pipe)."""

from __future__ import annotations

import subprocess
import sys
from importlib import import_module

import pytest

from postflightd.cli import main

#: Each command with a --format, and the registry whose keys are its choices.
REGISTRIES = [
    ("scan", "postflightd.reporters.scan", "WRITERS"),
    ("process", "postflightd.reporters.process", "REPORTERS"),
    ("history", "postflightd.reporters.history", "REPORTERS"),
    ("check-return", "postflightd.reporters.check_return", "REPORTERS"),
    ("status", "postflightd.reporters.status", "REPORTERS"),
    ("verify", "postflightd.reporters.verify", "REPORTERS"),
    ("report", "postflightd.report_render", "RENDERERS"),
]


@pytest.mark.parametrize(("command", "module", "registry"), REGISTRIES)
def test_format_choices_are_the_registry_keys(
    command: str, module: str, registry: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unknown --format is exit 2, and the choices offered are exactly the registry's keys."""
    keys = list(getattr(import_module(module), registry))
    assert "text" in keys
    with pytest.raises(SystemExit) as exc:
        main([command, "--format", "no-such-format"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"(choose from {', '.join(map(repr, keys))})" in err


@pytest.mark.parametrize(("command", "module", "registry"), REGISTRIES)
def test_usage_lists_the_registry_keys(
    command: str, module: str, registry: str, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = list(getattr(import_module(module), registry))
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0
    assert "--format {" + ",".join(keys) + "}" in capsys.readouterr().out


def test_version_imports_no_registry_and_no_command() -> None:
    """--version builds the parser without importing a reporter, a renderer or a command."""
    code = (
        "import sys\n"
        "from postflightd.cli import main\n"
        "try:\n"
        "    main(['--version'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(('postflightd.reporters', "
        "'postflightd.report', 'postflightd.commands', 'postflightd.pipeline')))\n"
        "print(loaded)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert out.splitlines()[-1] == "[]"
