"""Fixtures of the daemon's tests: real ``postflightd watch`` processes, and systemd's end of
the notification socket."""

from __future__ import annotations

import os
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.daemon_process import DaemonFactory, daemons


@pytest.fixture
def start_daemon(tmp_path: Path) -> Iterator[DaemonFactory]:
    """Start daemons; every one of them is killed at the end, whatever happens."""
    with daemons(tmp_path) as start:
        yield start


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """systemd's end: a datagram socket on a short path (AF_UNIX allows ~108 bytes)."""
    with tempfile.TemporaryDirectory(prefix="pf-") as tmp:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(os.path.join(tmp, "notify"))
        sock.settimeout(5)
        try:
            yield sock
        finally:
            sock.close()
