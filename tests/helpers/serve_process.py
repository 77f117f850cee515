"""``postflightd serve`` as a real process on a free loopback port."""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from helpers.waiting import wait_until


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def answers(port: int, path: str = "/api/state", token: str | None = None) -> bool:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        conn.request("GET", path, headers=headers)
        ok = conn.getresponse().status == 200
        conn.close()
    except OSError:
        return False
    return ok


@contextmanager
def served(
    *roots: Path,
    extra: tuple[str, ...] = (),
    port: int | None = None,
    cwd: Path | None = None,
    token: str | None = None,
    env: dict[str, str] | None = None,
    wrapper: tuple[str, ...] = (),
) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """A dashboard on the roots (on ``port``, else a free one), answering (with ``token``, if
    it asks for one); stopped (SIGTERM) at the end. With ``cwd``, started there by its console
    script, as a person would; ``env`` is added to its environment; ``wrapper`` runs it (the
    command that execs its arguments)."""
    port = port or free_port()
    command = [*wrapper, str(Path(sys.executable).with_name("postflightd"))]
    if cwd is None:
        command = [*wrapper, sys.executable, "-m", "postflightd"]
    argv = [*command, "serve", *map(str, roots), "--port", str(port)]
    server = subprocess.Popen(
        [*argv, *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        cwd=cwd,
    )
    try:
        assert server.stderr is not None
        line = server.stderr.readline().decode()
        assert f":{port}/" in line, line
        wait_until("the server answers", lambda: answers(port, token=token), timeout=30)
        yield server, port
    finally:
        server.terminate()
        server.wait(10)
        if server.stderr is not None:
            server.stderr.close()
