"""The README's Install section (pipx or pip from the clone, each building a wheel): the wheel
`python -m build` makes installs into a fresh environment and runs."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from helpers.needs import require_module
from helpers.paths import REPO


@pytest.mark.slow
def test_built_wheel_installs_into_a_fresh_venv_and_runs(tmp_path: Path) -> None:
    require_module("build", "the `build` frontend is a dev extra")
    out = tmp_path / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(REPO)],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    (wheel,) = out.glob("postflightd-*.whl")
    # The systemd units and the OpenCode plugin are package data: `init --systemd` and
    # `init --runtime opencode` write them from any install.
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    for unit in ("postflightd.service", "postflightd@.service"):
        assert f"postflightd/data/systemd/{unit}" in names
    assert "postflightd/data/opencode/postflightd.ts" in names
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", str(wheel)],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert installed.returncode == 0, installed.stderr[-2000:]
    version = subprocess.run(
        [str(env_dir / "bin" / "postflightd"), "--version"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert version.stdout.startswith("postflightd ")
    # The rule explanations and completion support ship in the wheel.
    rules = subprocess.run(
        [str(env_dir / "bin" / "postflightd"), "rules", "PF405"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert "What it checks" in rules.stdout
    completion = subprocess.run(
        [str(env_dir / "bin" / "postflightd"), "completion", "fish"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert "complete --command postflightd" in completion.stdout
    # Installed from the wheel alone, init finds the unit it installs in the package.
    root = tmp_path / "proj"
    root.mkdir()
    init = subprocess.run(
        [str(env_dir / "bin" / "postflightd"), "init", str(root), "--systemd", "--yes"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert init.returncode == 0, init.stderr
    unit = Path(os.environ["XDG_CONFIG_HOME"]) / "systemd" / "user" / "postflightd@.service"
    assert "Type=notify" in unit.read_text(encoding="utf-8")
