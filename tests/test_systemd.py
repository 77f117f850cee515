"""The systemd units in systemd/: what they promise, and ``systemd-analyze verify`` on them."""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

UNITS = Path(__file__).resolve().parent.parent / "systemd"


def unit(name: str) -> configparser.RawConfigParser:
    # strict=False: systemd allows a key to repeat (ReadWritePaths=, Environment=).
    parser = configparser.RawConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys are case-sensitive
    parser.read(UNITS / name, encoding="utf-8")
    return parser


@pytest.mark.parametrize("name", ["postflightd.service", "postflightd@.service"])
def test_units_are_notify_services_with_a_watchdog_and_restart(name: str) -> None:
    service = unit(name)["Service"]
    assert service["Type"] == "notify"
    assert " watch" in service["ExecStart"]
    assert service["Restart"] == "on-failure"
    assert int(service["WatchdogSec"]) > 0
    assert service["RestartPreventExitStatus"] == "2"
    assert service["ProtectSystem"] == "strict"
    assert service["ReadWritePaths"]
    assert unit(name)["Install"]["WantedBy"] == "default.target"


def test_template_watches_and_may_write_only_its_instance_root() -> None:
    service = unit("postflightd@.service")["Service"]
    assert service["ExecStart"].endswith(" %f")
    assert "%f" in service["ReadWritePaths"].split()
    assert service["ProtectHome"] == "read-only"


def test_systemd_analyze_verify_accepts_both_units(tmp_path: Path) -> None:
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.skip("systemd-analyze is not installed")
    # %h/.local/bin/postflightd must exist for verify: a home with our console script in it.
    home = tmp_path / "home"
    (home / ".local" / "bin").mkdir(parents=True)
    script = Path(sys.executable).with_name("postflightd")
    if not script.exists():
        pytest.skip(f"no postflightd console script next to {sys.executable}")
    (home / ".local" / "bin" / "postflightd").symlink_to(script)
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    root = tmp_path / "project"
    root.mkdir()
    instance = subprocess.run(
        ["systemd-escape", "--path", str(root)], capture_output=True, text=True, check=True
    ).stdout.strip()
    units = tmp_path / "units"
    units.mkdir()
    shutil.copy(UNITS / "postflightd.service", units / "postflightd.service")
    shutil.copy(UNITS / "postflightd@.service", units / f"postflightd@{instance}.service")
    env = {**os.environ, "HOME": str(home), "XDG_RUNTIME_DIR": str(runtime)}
    out = subprocess.run(
        [tool, "--user", "verify", *sorted(str(p) for p in units.iterdir())],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if "Failed to initialize manager" in out.stderr:
        pytest.skip(f"systemd-analyze cannot run here: {out.stderr.strip()}")
    # verify exits 0 even for unknown keys: any line naming our units is a problem too.
    complaints = [line for line in out.stderr.splitlines() if str(units) in line]
    assert out.returncode == 0, out.stderr
    assert complaints == []
