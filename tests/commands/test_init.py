"""`postflightd init --systemd`: the packaged user unit installed where the user manager reads
it, the exact enable command, and the warning for a root PrivateTmp hides."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from postflightd.cli import main
from postflightd.project.setup import systemd_escape_path
from postflightd.project.units import packaged_unit

SCRIPT = Path(sys.executable).with_name("postflightd")


def _root(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "specs").mkdir(parents=True)
    return root


def _unit_path() -> Path:
    return Path(os.environ["XDG_CONFIG_HOME"]) / "systemd" / "user" / "postflightd@.service"


def test_systemd_installs_the_packaged_unit_and_prints_the_enable_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _root(tmp_path)
    assert main(["init", str(root), "--systemd", "--yes"]) == 0
    out = capsys.readouterr().out
    unit_path = _unit_path()
    assert unit_path.read_text(encoding="utf-8") == packaged_unit("postflightd@.service")
    assert f"+++ {unit_path}" in out  # shown as a diff before it is written
    assert f"created {unit_path}" in out
    enable = f"systemctl --user enable --now 'postflightd@{systemd_escape_path(str(root))}.service'"
    assert enable in out
    assert f"  postflightd init --systemd {root}\n" not in out  # installed already

    # A second run: the project and the unit are set up, nothing is written.
    assert main(["init", str(root), "--systemd", "--yes"]) == 0
    again = capsys.readouterr().out
    assert "nothing to change" in again
    assert enable in again


def test_without_systemd_no_unit_is_written_and_the_flag_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _root(tmp_path)
    assert main(["init", str(root), "--yes"]) == 0
    out = capsys.readouterr().out
    assert not _unit_path().exists()
    assert f"  postflightd init --systemd {root}\n" in out
    assert str(_unit_path()) in out


def test_without_yes_or_a_terminal_the_unit_is_shown_but_not_written(tmp_path: Path) -> None:
    """The real console script, stdin a pipe: the diff, exit 1, nothing written."""
    root = _root(tmp_path)
    run = subprocess.run(
        [str(SCRIPT), "init", str(root), "--systemd"],
        input="",
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert run.returncode == 1, run.stderr
    assert "+ExecStart=%h/.local/bin/postflightd watch --log-format json %f" in run.stdout
    assert not _unit_path().exists()


def test_a_unit_the_user_changed_is_left_as_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _root(tmp_path)
    unit_path = _unit_path()
    unit_path.parent.mkdir(parents=True)
    mine = packaged_unit("postflightd@.service").replace("RestartSec=2", "RestartSec=5")
    unit_path.write_text(mine, encoding="utf-8")
    assert main(["init", str(root), "--systemd", "--yes"]) == 0
    assert "left as it is" in capsys.readouterr().out
    assert unit_path.read_text(encoding="utf-8") == mine


def test_a_root_under_tmp_is_warned_about_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _root(tmp_path)
    assert str(root).startswith("/tmp/"), "pytest's temporary directories are under /tmp here"
    assert main(["init", str(root), "--yes"]) == 0
    err = capsys.readouterr().err
    assert f"warning: {root} is under /tmp" in err
    assert "PrivateTmp=yes" in err
    assert "PrivateTmp=no" in err
    assert "Traceback" not in err


def test_no_warning_when_the_installed_unit_turns_private_tmp_off(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _root(tmp_path)
    unit_path = _unit_path()
    unit_path.parent.mkdir(parents=True)
    unit_path.write_text(
        packaged_unit("postflightd@.service").replace("PrivateTmp=yes", "PrivateTmp=no"),
        encoding="utf-8",
    )
    assert main(["init", str(root), "--yes"]) == 0
    assert "PrivateTmp" not in capsys.readouterr().err
