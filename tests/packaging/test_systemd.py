"""The systemd units shipped in the package (postflightd/data/systemd/): what they promise,
and ``systemd-analyze verify`` on them."""

from __future__ import annotations

import configparser
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.documents import researched_doc, task_entry
from helpers.paths import REPO
from helpers.project import project, write_artifact, write_meta
from helpers.waiting import wait_until

#: Real daemons and console-script runs in bulk: `pytest -m "not slow"` leaves them out.
pytestmark = pytest.mark.slow

UNITS = REPO / "src" / "postflightd" / "data" / "systemd"


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


HARDENING = {
    "PrivateNetwork": "yes",
    "SystemCallFilter": "@system-service",
    "SystemCallErrorNumber": "EPERM",
    "ProtectClock": "yes",
    "ProtectKernelLogs": "yes",
    "ProtectHostname": "yes",
    "RestrictSUIDSGID": "yes",
    "PrivateUsers": "yes",
    "NoNewPrivileges": "yes",  # SystemCallFilter= in a user unit needs it
}


@pytest.mark.parametrize("name", ["postflightd.service", "postflightd@.service"])
def test_units_carry_the_hardening_the_daemon_tolerates(name: str) -> None:
    service = unit(name)["Service"]
    for key, value in HARDENING.items():
        assert service.get(key) == value, key
    # A user manager cannot change capabilities: these would make the unit fail (status 218).
    assert "CapabilityBoundingSet" not in service
    assert "AmbientCapabilities" not in service


@pytest.mark.parametrize("name", ["postflightd.service", "postflightd@.service"])
def test_systemd_analyze_security_rates_the_units_ok(tmp_path: Path, name: str) -> None:
    """`systemd-analyze security --offline` (systemd >= 250): exposure below 4.0 ("OK")."""
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.skip("systemd-analyze is not installed")
    home = tmp_path / "home"
    (home / ".local" / "bin").mkdir(parents=True)
    script = Path(sys.executable).with_name("postflightd")
    (home / ".local" / "bin" / "postflightd").symlink_to(script)
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    target = tmp_path / name.replace("@", f"@{'tmp'}")
    shutil.copy(UNITS / name, target)
    out = subprocess.run(
        [tool, "security", "--offline=yes", "--user", str(target)],
        capture_output=True,
        text=True,
        env={**os.environ, "HOME": str(home), "XDG_RUNTIME_DIR": str(runtime)},
        check=False,
    )
    if "Unknown option" in out.stderr or "unrecognized option" in out.stderr:
        pytest.skip(f"this systemd-analyze has no --offline: {out.stderr.strip()}")
    if "Failed to initialize manager" in out.stderr:
        pytest.skip(f"systemd-analyze cannot run here: {out.stderr.strip()}")
    match = re.search(r"Overall exposure level for \S+: (\d+\.\d)", out.stdout + out.stderr)
    assert match, out.stdout + out.stderr
    # Offline, the analysis assumes root and counts capabilities a user service never has.
    assert float(match.group(1)) < 4.0


def test_the_daemon_works_in_a_private_network_namespace(tmp_path: Path) -> None:
    """PrivateNetwork=yes: no network at all, and $NOTIFY_SOCKET (a path) is still reached."""
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("unshare is not installed")
    probe = subprocess.run([unshare, "-n", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"cannot create a network namespace here: {probe.stderr.decode().strip()}")
    root = project(tmp_path / "proj", [task_entry(259, "prove_completeness")])
    write_artifact(root, "specs/259_prove_completeness/reports/research-001.md")
    address = str(tmp_path / "notify.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(address)
        sock.settimeout(30)
        proc = subprocess.Popen(
            [unshare, "-n", sys.executable, "-m", "postflightd", "watch", str(root)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env={**os.environ, "NOTIFY_SOCKET": address},
        )
        try:
            seen: list[str] = []
            while "READY=1" not in seen:
                seen.extend(sock.recv(4096).decode().splitlines())
            meta = write_meta(root, "259_prove_completeness", researched_doc())
            wait_until("the daemon to apply the file", lambda: not meta.exists())
            proc.send_signal(signal.SIGTERM)
            while "STOPPING=1" not in seen:
                seen.extend(sock.recv(4096).decode().splitlines())
            assert proc.wait(10) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)
            assert proc.stderr is not None
            proc.stderr.close()
