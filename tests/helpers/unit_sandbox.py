"""A systemd unit's sandbox without systemd, read from the unit itself: bubblewrap's namespaces
and mounts, ``setpriv --no-new-privs``, and a seccomp filter that libseccomp builds from
systemd's own list of the calls in each ``@group`` (``systemd-analyze syscall-filter``).

Tests cannot ask a service manager to start the unit (none runs on the test machines), so
``sandbox_argv`` turns the unit's hardening keys into the equivalent command line. The home
directory seen inside is ``HOME_INSIDE``, bound from a directory of the test, so that the
unit's ``PrivateTmp=`` may hide the test's own temporary directory as it would. A key it does
not know how to apply is an error, not something it leaves out: docs/systemd.md says which keys
are exercised this way and which are checked only as text.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import socket
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Final

from helpers.paths import REPO

#: The home directory inside the sandbox (ProtectHome= applies to it).
HOME_INSIDE: Final = Path("/home/postflightd")
#: The user's state directory inside (``%S`` of a user unit: $XDG_STATE_HOME).
STATE_INSIDE: Final = HOME_INSIDE / ".local" / "state"
#: What PrivateTmp= replaces with an empty directory of the service's own.
PRIVATE_TMP: Final = (Path("/tmp"), Path("/var/tmp"))

#: The keys ``sandbox_argv`` applies, with the values it knows how to apply.
APPLIED: Final[dict[str, frozenset[str]]] = {
    "ProtectSystem": frozenset({"strict"}),
    "ProtectHome": frozenset({"read-only"}),
    "PrivateTmp": frozenset({"yes"}),
    "PrivateDevices": frozenset({"yes"}),
    "PrivateNetwork": frozenset({"yes"}),
    "PrivateUsers": frozenset({"yes"}),
    "ProtectHostname": frozenset({"yes"}),
    "NoNewPrivileges": frozenset({"yes"}),
    "SystemCallErrorNumber": frozenset({"EPERM"}),
    "RestrictAddressFamilies": frozenset({"AF_UNIX"}),
}


def syscall_groups(systemd_analyze: str) -> dict[str, list[str]]:
    """Each ``@group`` of ``systemd-analyze syscall-filter``, with its calls and groups."""
    out = subprocess.run(
        [systemd_analyze, "syscall-filter"], capture_output=True, text=True, check=True
    ).stdout
    groups: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in out.splitlines():
        if line.startswith("@"):
            current = groups.setdefault(line.strip(), [])
        elif current is not None and line.strip() and not line.lstrip().startswith("#"):
            current.append(line.strip())
    return groups


def syscalls(spec: str, groups: Mapping[str, list[str]]) -> set[str]:
    """The calls a ``SystemCallFilter=`` allow-list names, its groups expanded."""
    names: set[str] = set()
    for item in spec.split():
        names |= syscalls(" ".join(groups[item]), groups) if item.startswith("@") else {item}
    return names


def write_seccomp_program(allowed: Iterable[str], *, unix_sockets_only: bool, out: Path) -> None:
    """A BPF program allowing ``allowed`` (native calls only), every other call failing with
    EPERM; with ``unix_sockets_only``, ``socket()`` only for AF_UNIX (RestrictAddressFamilies=)."""
    lib = ctypes.CDLL(ctypes.util.find_library("seccomp") or "libseccomp.so.2", use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.c_void_p,
    ]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]

    class ArgCmp(ctypes.Structure):  # struct scmp_arg_cmp
        _fields_ = [
            ("arg", ctypes.c_uint),
            ("op", ctypes.c_int),
            ("datum_a", ctypes.c_uint64),
            ("datum_b", ctypes.c_uint64),
        ]

    allow, cmp_eq = 0x7FFF0000, 4  # SCMP_ACT_ALLOW, SCMP_CMP_EQ
    ctx = lib.seccomp_init(0x00050000 | errno.EPERM)  # SCMP_ACT_ERRNO(EPERM), native arch
    assert ctx, "seccomp_init failed"
    try:
        for name in sorted(allowed):
            number = lib.seccomp_syscall_resolve_name(name.encode())
            if number < 0:  # not a call of this architecture
                continue
            if name == "socket" and unix_sockets_only:
                only_unix = ArgCmp(0, cmp_eq, socket.AF_UNIX, 0)
                code = lib.seccomp_rule_add_array(ctx, allow, number, 1, ctypes.byref(only_unix))
            else:
                code = lib.seccomp_rule_add_array(ctx, allow, number, 0, None)
            assert code == 0, f"seccomp_rule_add({name}) = {code}"
        with out.open("wb") as fh:
            assert lib.seccomp_export_bpf(ctx, fh.fileno()) == 0, "seccomp_export_bpf failed"
    finally:
        lib.seccomp_release(ctx)


def _expand(value: str, specifiers: Mapping[str, str]) -> str:
    for key, replacement in specifiers.items():
        value = value.replace(key, replacement)
    assert "%" not in value, f"a specifier the sandbox does not know: {value}"
    return value


def sandbox_argv(
    service: Mapping[str, str],
    *,
    bwrap: str,
    setpriv: str,
    home: Path,
    instance_root: str,
    seccomp_fd: int,
) -> list[str]:
    """The command line that runs a command under ``service``'s sandbox: the home directory
    ``home`` is seen as ``HOME_INSIDE``, ``%f`` is ``instance_root`` (a path inside)."""
    hardening = {key: value for key, value in service.items() if key in APPLIED}
    for key, value in hardening.items():
        assert value in APPLIED[key], f"the sandbox cannot apply {key}={value}"
    assert hardening.get("ProtectSystem") == "strict", "the sandbox starts from a read-only /"
    specifiers = {"%h": str(HOME_INSIDE), "%S": str(STATE_INSIDE), "%f": instance_root}
    argv = [bwrap, "--die-with-parent", "--cap-drop", "ALL", "--ro-bind", "/", "/"]
    if hardening.get("PrivateUsers") == "yes":  # root and nothing else mapped
        argv += ["--unshare-user", "--uid", "0", "--gid", "0"]
    if hardening.get("PrivateNetwork") == "yes":
        argv += ["--unshare-net"]
    if hardening.get("ProtectHostname") == "yes":
        argv += ["--unshare-uts"]
    if hardening.get("PrivateDevices") == "yes":  # null, zero, full, random, urandom, tty, pts
        argv += ["--dev", "/dev"]
    if hardening.get("PrivateTmp") == "yes":
        for tmp in PRIVATE_TMP:
            argv += ["--tmpfs", str(tmp)]
        # A checkout under /tmp (CI's may be) must still hold the interpreter and the code.
        for needed in sorted({REPO, Path(sys.prefix), Path(sys.base_prefix)}):
            if any(needed.is_relative_to(tmp) for tmp in PRIVATE_TMP):
                argv += ["--ro-bind", str(needed), str(needed)]
    # The home: read-only (ProtectSystem=strict makes it so, and ProtectHome=read-only too),
    # with what ReadWritePaths= names bound writable inside it.
    argv += ["--tmpfs", str(HOME_INSIDE.parent), "--ro-bind", str(home), str(HOME_INSIDE)]
    for path in _expand(service.get("ReadWritePaths", ""), specifiers).split():
        inside = Path(path)
        assert inside.is_relative_to(HOME_INSIDE), f"ReadWritePaths= outside the home: {path}"
        outside = home / inside.relative_to(HOME_INSIDE)
        outside.mkdir(parents=True, exist_ok=True)
        argv += ["--bind", str(outside), str(inside)]
    argv += ["--remount-ro", str(HOME_INSIDE.parent)]
    if "SystemCallFilter" in service:
        argv += ["--seccomp", str(seccomp_fd)]
    argv += ["--chdir", "/", "--"]
    if hardening.get("NoNewPrivileges") == "yes":
        argv += [setpriv, "--no-new-privs", "--"]
    return argv


def inside_env() -> dict[str, str]:
    """The environment of a user service, its paths as seen inside the sandbox."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(HOME_INSIDE),
        "XDG_CONFIG_HOME": str(HOME_INSIDE / ".config"),
        "XDG_STATE_HOME": str(STATE_INSIDE),
        "PYTHONUNBUFFERED": "1",
    }
