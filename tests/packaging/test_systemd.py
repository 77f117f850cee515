"""The systemd units shipped in the package (postflightd/data/systemd/): what they promise,
``systemd-analyze verify`` and ``security`` on them, and the daemon run under their sandbox.

No service manager runs on the test machines, so the sandbox is built from the unit's own keys
by helpers.unit_sandbox: bubblewrap's namespaces and mounts, ``setpriv --no-new-privs``, and a
seccomp filter libseccomp builds from ``systemd-analyze syscall-filter``. Exercised that way:
ProtectSystem=strict, ProtectHome=read-only, ReadWritePaths=, PrivateTmp=, PrivateDevices=,
PrivateNetwork=, PrivateUsers=, ProtectHostname=, NoNewPrivileges=, SystemCallFilter=,
SystemCallErrorNumber= and RestrictAddressFamilies=. Checked only as text (their presence):
ProtectKernelTunables=, ProtectKernelModules=, ProtectControlGroups=, ProtectClock=,
ProtectKernelLogs=, RestrictNamespaces=, RestrictRealtime=, RestrictSUIDSGID=,
LockPersonality=, SystemCallArchitectures=, UMask= (docs/systemd.md says the same).
"""

from __future__ import annotations

import configparser
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers.documents import researched_doc, task_entry
from helpers.needs import require, require_tool, unavailable
from helpers.paths import REPO
from helpers.project import project, write_artifact, write_meta
from helpers.unit_sandbox import (
    APPLIED,
    HOME_INSIDE,
    STATE_INSIDE,
    inside_env,
    sandbox_argv,
    syscall_groups,
    syscalls,
    write_seccomp_program,
)
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
    tool = require_tool("systemd-analyze", "it verifies the units (the systemd package)")
    escape = require_tool("systemd-escape", "it names the template's instance")
    # %h/.local/bin/postflightd must exist for verify: a home with our console script in it.
    home = tmp_path / "home"
    (home / ".local" / "bin").mkdir(parents=True)
    script = Path(sys.executable).with_name("postflightd")
    require(script.exists(), f"no postflightd console script next to {sys.executable}")
    (home / ".local" / "bin" / "postflightd").symlink_to(script)
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    root = tmp_path / "project"
    root.mkdir()
    instance = subprocess.run(
        [escape, "--path", str(root)], capture_output=True, text=True, check=True
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
        unavailable(f"systemd-analyze cannot run here: {out.stderr.strip()}")
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
    tool = require_tool("systemd-analyze", "it rates the units (the systemd package)")
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
        unavailable(f"this systemd-analyze has no --offline: {out.stderr.strip()}")
    if "Failed to initialize manager" in out.stderr:
        unavailable(f"systemd-analyze cannot run here: {out.stderr.strip()}")
    match = re.search(r"Overall exposure level for \S+: (\d+\.\d)", out.stdout + out.stderr)
    assert match, out.stdout + out.stderr
    # Offline, the analysis assumes root and counts capabilities a user service never has.
    assert float(match.group(1)) < 4.0


def test_the_daemon_works_in_a_private_network_namespace(tmp_path: Path) -> None:
    """PrivateNetwork=yes: no network at all, and $NOTIFY_SOCKET (a path) is still reached."""
    unshare = require_tool("unshare", "it makes the network namespace (util-linux)")
    probe = subprocess.run([unshare, "-n", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        unavailable(f"cannot create a network namespace here: {probe.stderr.decode().strip()}")
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


# --- the daemon under the unit's sandbox -------------------------------------------------------

#: What a process inside the sandbox reports: each write it tries, an AF_INET socket, a call
#: outside @system-service (ptrace(PTRACE_TRACEME) succeeds anywhere else), its status bits.
PROBE = """
import ctypes, errno, json, os, socket, sys

def outcome(action):
    try:
        action()
        return "ok"
    except OSError as exc:
        return errno.errorcode[exc.errno]

def write(path):
    with open(path, "w") as fh:
        fh.write("x")

report = {path: outcome(lambda path=path: write(path)) for path in sys.argv[1:]}
report["AF_INET"] = outcome(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).close())
libc = ctypes.CDLL(None, use_errno=True)
traced = libc.ptrace(0, 0, None, None)
report["ptrace"] = "ok" if traced == 0 else errno.errorcode[ctypes.get_errno()]
with open("/proc/self/status") as fh:
    status = dict(line.rstrip("\\n").split(":\\t", 1) for line in fh if ":\\t" in line)
for key in ("NoNewPrivs", "Seccomp", "CapEff"):
    report[key] = status[key].strip()
report["/dev"] = sorted(os.listdir("/dev"))
print(json.dumps(report))
"""


@dataclass(frozen=True, slots=True)
class Sandboxed:
    """How to run a command under a unit's sandbox: ``argv`` + the command, ``pass_fds``."""

    argv: list[str]
    pass_fds: tuple[int, ...]
    home: Path


@pytest.fixture
def sandboxed(tmp_path: Path) -> Iterator[Callable[[str], Sandboxed]]:
    """A factory: the sandbox of a shipped unit, for a home directory in tmp_path."""
    bwrap = require_tool("bwrap", "it builds the unit's sandbox (the bubblewrap package)")
    setpriv = require_tool("setpriv", "it sets NoNewPrivileges (util-linux)")
    analyze = require_tool("systemd-analyze", "it lists @system-service (the systemd package)")
    groups = syscall_groups(analyze)
    home = tmp_path / "home"
    home.mkdir()
    opened: list[int] = []

    def make(name: str) -> Sandboxed:
        service = unit(name)["Service"]
        program = tmp_path / f"{name}.bpf"
        write_seccomp_program(
            syscalls(service["SystemCallFilter"], groups),
            unix_sockets_only=service.get("RestrictAddressFamilies") == "AF_UNIX",
            out=program,
        )
        fd = os.open(program, os.O_RDONLY)
        opened.append(fd)
        argv = sandbox_argv(
            dict(service),
            bwrap=bwrap,
            setpriv=setpriv,
            home=home,
            instance_root=str(HOME_INSIDE / "proj"),
            seccomp_fd=fd,
        )
        return Sandboxed(argv, (fd,), home)

    yield make
    for fd in opened:
        os.close(fd)


#: The [Service] keys that are not hardening: how the daemon is started, watched and stopped.
SERVICE_KEYS = {
    "Type",
    "NotifyAccess",
    "ExecStart",
    "ExecReload",
    "Restart",
    "RestartSec",
    "RestartPreventExitStatus",
    "WatchdogSec",
    "TimeoutStopSec",
    "Environment",
    "StateDirectory",
}
#: Hardening the sandbox does not apply: checked only as text (docs/systemd.md lists them).
TEXT_ONLY = {
    "ProtectKernelTunables",
    "ProtectKernelModules",
    "ProtectControlGroups",
    "ProtectClock",
    "ProtectKernelLogs",
    "RestrictNamespaces",
    "RestrictRealtime",
    "RestrictSUIDSGID",
    "LockPersonality",
    "SystemCallArchitectures",
    "UMask",
}


@pytest.mark.parametrize("name", ["postflightd.service", "postflightd@.service"])
def test_each_hardening_key_is_exercised_or_named_as_checked_only_as_text(name: str) -> None:
    """A key added to a unit must be applied by the test sandbox or named in TEXT_ONLY (and in
    docs/systemd.md): the sandbox's tests never silently leave one out."""
    hardening = set(unit(name)["Service"]) - SERVICE_KEYS
    exercised = set(APPLIED) | {"SystemCallFilter", "ReadWritePaths"}
    assert hardening - exercised == TEXT_ONLY - exercised
    assert not TEXT_ONLY & exercised
    docs = (REPO / "docs" / "systemd.md").read_text(encoding="utf-8")
    for key in TEXT_ONLY | exercised:
        assert f"`{key}=" in docs, key


#: A write's outcome in the home directory but outside the project and the state directory.
HOME_WRITE = {"postflightd@.service": "EROFS", "postflightd.service": "ok"}


@pytest.mark.parametrize("name", sorted(HOME_WRITE))
def test_inside_the_units_sandbox_only_its_writable_paths_take_a_write(
    sandboxed: Callable[[str], Sandboxed], name: str
) -> None:
    box = sandboxed(name)
    (box.home / "proj").mkdir(exist_ok=True)
    # Made before the sandbox, as systemd makes StateDirectory= (the daemon its own otherwise).
    (box.home / ".local" / "state" / "postflightd").mkdir(parents=True, exist_ok=True)
    scratch = f"/tmp/postflightd-probe-{os.getpid()}-{name}"
    paths = {
        "project": str(HOME_INSIDE / "proj" / "written"),
        "state": str(STATE_INSIDE / "postflightd" / "written"),
        "home": str(HOME_INSIDE / "written"),
        "system": "/etc/postflightd-probe",
        "checkout": str(REPO / "postflightd-probe"),
        "tmp": scratch,
    }
    done = subprocess.run(
        [*box.argv, sys.executable, "-c", PROBE, *paths.values()],
        capture_output=True,
        text=True,
        env=inside_env(),
        pass_fds=box.pass_fds,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    got = {what: report[path] for what, path in paths.items()}
    assert got == {
        "project": "ok",  # ReadWritePaths=
        "state": "ok",
        "home": HOME_WRITE[name],  # ProtectHome=read-only, or ReadWritePaths=%h
        "system": "EROFS",  # ProtectSystem=strict
        "checkout": "EROFS",
        "tmp": "ok",  # PrivateTmp=: a /tmp of its own ...
    }
    assert not Path(scratch).exists()  # ... that is not the machine's
    assert (box.home / "proj" / "written").read_text() == "x"
    assert (box.home / ".local" / "state" / "postflightd" / "written").read_text() == "x"
    assert report["AF_INET"] == "EPERM"  # RestrictAddressFamilies=AF_UNIX
    assert report["ptrace"] == "EPERM"  # SystemCallFilter=@system-service, ErrorNumber=EPERM
    assert report["NoNewPrivs"] == "1"
    assert report["Seccomp"] == "2"  # a filter
    assert int(report["CapEff"], 16) == 0  # a user service holds no capabilities
    assert "fuse" not in report["/dev"] and "null" in report["/dev"]  # PrivateDevices=


def test_the_daemon_postflights_under_the_template_units_sandbox(
    tmp_path: Path, sandboxed: Callable[[str], Sandboxed]
) -> None:
    """postflightd@.service's sandbox: the daemon gets ready, applies an agent's file in its
    root, journals it in its state directory and stops on SIGTERM with exit 0."""
    box = sandboxed("postflightd@.service")
    root = project(box.home / "proj", [task_entry(259, "prove_completeness")])
    write_artifact(root, "specs/259_prove_completeness/reports/research-001.md")
    address = box.home / "notify.sock"
    info_read, info_write = os.pipe()
    with (
        socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock,
        (tmp_path / "daemon.log").open("wb") as log,
    ):
        sock.bind(str(address))
        sock.settimeout(30)
        inside = str(HOME_INSIDE / "proj")
        proc = subprocess.Popen(
            [
                box.argv[0],
                "--info-fd",
                str(info_write),
                *box.argv[1:],
                sys.executable,
                "-m",
                "postflightd",
                "watch",
                "--log-format",
                "json",
                inside,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**inside_env(), "NOTIFY_SOCKET": str(HOME_INSIDE / "notify.sock")},
            pass_fds=(*box.pass_fds, info_write),
        )
        os.close(info_write)
        try:
            with os.fdopen(info_read, "rb") as info:
                daemon_pid = json.loads(info.read())["child-pid"]
            seen: list[str] = []
            while "READY=1" not in seen:
                seen.extend(sock.recv(4096).decode().splitlines())
            meta = write_meta(root, "259_prove_completeness", researched_doc())
            wait_until("the daemon to apply the file", lambda: not meta.exists())
            state = json.loads((root / "specs" / "state.json").read_text(encoding="utf-8"))
            assert state["active_projects"][0]["status"] == "researched"
            assert (box.home / ".local" / "state" / "postflightd" / "journal.sqlite3").is_file()
            os.kill(daemon_pid, signal.SIGTERM)
            while "STOPPING=1" not in seen:
                seen.extend(sock.recv(4096).decode().splitlines())
            assert proc.wait(10) == 0, (tmp_path / "daemon.log").read_text()
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)
