"""sd_notify(3) without libsystemd: datagrams on a real socket, the watchdog interval, no-ops.

(test_journald.py checks what the daemon sends over its whole life, in a subprocess.)"""

from __future__ import annotations

import os
import socket
import tempfile
import uuid

import pytest
from structlog.testing import capture_logs

from postflightd.daemon.sdnotify import SystemdNotifier


def test_lines_go_out_as_one_datagram(listener: socket.socket) -> None:
    notifier = SystemdNotifier({"NOTIFY_SOCKET": listener.getsockname()})
    try:
        assert notifier.notify("READY=1", "STATUS=watching 1 root(s)") is True
        assert listener.recv(4096) == b"READY=1\nSTATUS=watching 1 root(s)"
    finally:
        notifier.close()


def test_an_abstract_socket_address_starts_with_at() -> None:
    name = f"postflightd-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        sock.settimeout(5)
        notifier = SystemdNotifier({"NOTIFY_SOCKET": "@" + name})
        try:
            assert notifier.notify("WATCHDOG=1")
            assert sock.recv(4096) == b"WATCHDOG=1"
        finally:
            notifier.close()


def test_outside_systemd_it_does_nothing() -> None:
    notifier = SystemdNotifier({"WATCHDOG_USEC": "2000000"})
    assert notifier.notify("READY=1") is False
    assert notifier.watchdog_interval_s is None, "no socket: no pings"
    notifier.close()


@pytest.mark.parametrize(
    ("usec", "pid", "interval"),
    [
        ("2000000", None, 1.0),  # pinged at half the interval (sd_watchdog_enabled(3))
        ("2000000", "self", 1.0),
        ("2000000", "1", None),  # the watchdog is another process's
        ("0", None, None),
        ("", None, None),
        ("soon", None, None),
        ("-5", None, None),
    ],
)
def test_the_watchdog_interval_is_half_of_watchdog_usec_and_only_for_this_process(
    listener: socket.socket, usec: str, pid: str | None, interval: float | None
) -> None:
    env = {"NOTIFY_SOCKET": listener.getsockname(), "WATCHDOG_USEC": usec}
    if pid is not None:
        env["WATCHDOG_PID"] = str(os.getpid()) if pid == "self" else pid
    notifier = SystemdNotifier(env)
    try:
        assert notifier.watchdog_interval_s == interval
    finally:
        notifier.close()


def test_a_socket_that_is_gone_is_logged_not_raised() -> None:
    with tempfile.TemporaryDirectory(prefix="pf-") as tmp:
        missing = os.path.join(tmp, "nobody")
        notifier = SystemdNotifier({"NOTIFY_SOCKET": missing})
        try:
            with capture_logs() as logs:
                assert notifier.notify("READY=1") is False
            (event,) = logs
            assert (event["event"], event["socket"]) == ("sd_notify failed", missing)
        finally:
            notifier.close()
        notifier.close()  # twice is harmless
