"""sd_notify(3) for ``postflightd watch`` under systemd: READY, STATUS, RELOADING, WATCHDOG.

Datagrams to ``$NOTIFY_SOCKET``, without libsystemd; a no-op outside systemd.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping

from postflightd.logs import get_logger

log = get_logger()


class SystemdNotifier:
    """sd_notify(3) without libsystemd: datagrams to ``$NOTIFY_SOCKET``."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        self._sock: socket.socket | None = None
        self._addr = ""
        address = env.get("NOTIFY_SOCKET", "")
        if address:
            # A leading '@' names a socket in the abstract namespace.
            self._addr = "\0" + address[1:] if address.startswith("@") else address
            self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        self.watchdog_interval_s: float | None = None
        usec, pid = env.get("WATCHDOG_USEC", ""), env.get("WATCHDOG_PID", "")
        for_us = not pid or (pid.isdigit() and int(pid) == os.getpid())
        if self._sock is not None and usec.isdigit() and int(usec) > 0 and for_us:
            # Ping at half the interval, as sd_watchdog_enabled(3) recommends.
            self.watchdog_interval_s = int(usec) / 1e6 / 2

    def notify(self, *lines: str) -> bool:
        if self._sock is None:
            return False
        try:
            self._sock.sendto("\n".join(lines).encode(), self._addr)
        except OSError as exc:
            log.warning("sd_notify failed", error=str(exc), socket=self._addr)
            return False
        return True

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
