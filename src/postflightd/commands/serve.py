"""``postflightd serve``: the live dashboard (``serve``) on an address of this machine.

The web stack is the ``[web]`` extra: without it, ``serve`` says what to install (exit 2) and
nothing else in postflightd needs it. The runs in flight are read by the same code as
``status`` (``commands.status.collect_status``), handed to the server as a function.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import secrets
import signal
import socket
import sys
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from postflightd.commands.arguments import parse_interval
from postflightd.commands.status import collect_status, status_target
from postflightd.config import ENV_TOKEN
from postflightd.errors import ExitCode, UsageError

if TYPE_CHECKING:
    from postflightd.rules.findings import Finding
    from postflightd.runs.status import RootStatus

DEFAULT_PORT: Final = 8427
WEB_MODULES: Final = ("starlette", "uvicorn", "sse_starlette", "prometheus_client")
#: postflightd is installed from a clone (the Install section of the README), not from an index:
#: a bare `pip install 'postflightd[web]'` would ask an index for a project of that name.
INSTALL_HINT: Final = (
    "install postflightd again with it, from the directory holding your clone: "
    "pipx install --force './postflightd[web]', or pip install './postflightd[web]' "
    "into the environment postflightd runs in"
)
#: How often the trees and the journal are looked at: a change reaches the page within it.
DEFAULT_POLL_S: Final = 0.2
#: A token is what a browser's address and an Authorization header can carry as it is.
_TOKEN_MAX: Final = 200


def resolve_token(token_file: str | None, *, given_inline: bool = False) -> str | None:
    """The dashboard's token: ``--token-file PATH``, then ``$POSTFLIGHTD_TOKEN``, else none.

    Never from the command line: every user of the machine can read a process's arguments.
    """
    if given_inline:
        raise UsageError(
            "--token would show the token to every user of this machine (a process's arguments "
            f"are public): put it in a file only you can read and give --token-file PATH, or "
            f"set {ENV_TOKEN}"
        )
    if token_file is not None:
        try:
            with Path(token_file).open(encoding="utf-8") as handle:
                text = handle.read(_TOKEN_MAX + 2)
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror.lower() if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise UsageError(f"--token-file {token_file}: cannot read it: {why}") from None
        return _checked_token(text.strip(), f"--token-file {token_file}")
    value = os.environ.get(ENV_TOKEN)
    if value is None:
        return None
    return _checked_token(value.strip(), ENV_TOKEN)


def _checked_token(token: str, source: str) -> str:
    if not token:
        raise UsageError(f"{source}: the token is empty")
    if len(token) > _TOKEN_MAX or not all("!" <= c <= "~" for c in token):
        raise UsageError(
            f"{source}: a token is 1 to {_TOKEN_MAX} printable ASCII characters without spaces "
            "(secrets.token_urlsafe(24) makes one)"
        )
    return token


def missing_web_modules() -> list[str]:
    """The modules of the ``[web]`` extra that cannot be imported here."""
    missing = []
    for name in WEB_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    return missing


def require_web() -> None:
    """A UsageError naming what to install when the ``[web]`` extra is missing."""
    missing = missing_web_modules()
    if missing:
        raise UsageError(
            f"serve needs the web extra ({', '.join(missing)} not installed): {INSTALL_HINT}"
        )


def build_app(
    *,
    roots: Sequence[str],
    host: str,
    port: int,
    token: str | None,
    config_path: str | None,
    poll_s: float = DEFAULT_POLL_S,
) -> Any:
    """The guarded ASGI application for these roots (``serve.app.create_app``)."""
    require_web()
    from postflightd.journal.database import journal_path
    from postflightd.serve.app import Settings, create_app
    from postflightd.serve.follow import Tree
    from postflightd.serve.security import is_loopback

    if not 0 < port < 65536:
        raise UsageError(f"--port {port}: give a port between 1 and 65535")
    if not is_loopback(host) and not token:
        raise UsageError(
            f"--host {host} is reachable from other machines: give --token-file or {ENV_TOKEN}"
        )
    resolved, user, configs = status_target(roots, config_path, (), ())

    def collect(now: datetime) -> tuple[list[RootStatus], dict[tuple[str, str], list[Finding]]]:
        findings: dict[tuple[str, str], list[Finding]] = {}
        # Without status's healing counts: reading them opens the journal for writing.
        return collect_status(resolved, configs, now, findings), findings

    settings = Settings(
        roots=[
            Tree(
                root,
                configs[root][0].specs_dir,
                configs[root][0].postflight.state_file,
                configs[root][0].postflight.errors_file,
                configs[root][0].watch.observer,
            )
            for root in resolved
        ],
        journal=journal_path(user.journal.path),
        host=host,
        port=port,
        token=token,
        # The report's process runs from outside the project: a relative path made absolute.
        config_path=str(Path(config_path).absolute()) if config_path else None,
        poll_s=poll_s,
    )
    return create_app(settings, collect)


#: What a failed bind means, in words that say what to do.
_BIND_PROBLEMS: Final = {
    errno.EADDRINUSE: "the port is in use (another serve, or another program): choose one with "
    "--port",
    errno.EADDRNOTAVAIL: "this machine has no such address: give one of its own (127.0.0.1 is "
    "the default)",
    errno.EACCES: "a port below 1024 needs privileges: choose one above it with --port",
}


def _listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` and listening, bound here rather than by the server so
    that an address in use is one clear message before anything is announced."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
        listener.listen(128)
    except OSError as exc:
        listener.close()
        why = _BIND_PROBLEMS.get(exc.errno or 0) or (exc.strerror or str(exc)).lower()
        raise UsageError(f"cannot serve on {host}:{port}: {why}") from None
    return listener


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``serve``'s options."""
    parser.add_argument("roots", nargs="*", metavar="ROOT", help="default: as for status")
    parser.add_argument("--host", default="127.0.0.1", help="default: 127.0.0.1 (loopback)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"default: {DEFAULT_PORT}")
    parser.add_argument(
        "--token-file",
        metavar="PATH",
        help="a file holding the token every request must give (also $POSTFLIGHTD_TOKEN); "
        "needed beyond loopback (else one is generated and printed)",
    )
    # A token on the command line is readable by every local user (/proc/PID/cmdline): taken
    # only to say where to put it instead.
    parser.add_argument("--token", help=argparse.SUPPRESS)
    parser.add_argument("--interval", help="how often to look for changes (default: 200ms)")
    parser.add_argument("--config", metavar="PATH", help="configuration file (TOML)")


def run(args: argparse.Namespace) -> int:
    token = resolve_token(args.token_file, given_inline=args.token is not None)
    return run_serve(
        roots=args.roots,
        host=args.host,
        port=args.port,
        interval=args.interval,
        token=token,
        config_path=args.config,
    )


def run_serve(
    *,
    roots: Sequence[str],
    host: str,
    port: int,
    token: str | None,
    config_path: str | None,
    interval: str | None = None,
) -> int:
    """Serve until SIGINT or SIGTERM (exit 0); 2 for a usage problem (the extra missing, a bad
    address, a port in use)."""
    require_web()
    from postflightd.serve.security import is_loopback

    if not is_loopback(host) and not token:
        token = secrets.token_urlsafe(24)
        print(
            f"postflightd: {host} is reachable from other machines: every request needs this "
            f"token (generated; --token-file PATH or {ENV_TOKEN} to choose one)",
            file=sys.stderr,
        )
    poll_s = parse_interval(interval) if interval else DEFAULT_POLL_S
    app = build_app(
        roots=roots, host=host, port=port, token=token, config_path=config_path, poll_s=poll_s
    )
    listener = _listen(host, port)
    shown = f"[{host}]" if ":" in host else host
    address = f"http://{shown}:{port}/" + (f"?token={token}" if token else "")
    print(f"postflightd: dashboard at {address} (Ctrl-C stops it)", file=sys.stderr, flush=True)
    import uvicorn

    from postflightd.serve.server import Server

    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    # SIGINT and SIGTERM stop the server gracefully (it handles them while it runs, then
    # raises them again once it has stopped): a stop asked for is the normal end, exit 0, as
    # for the daemon.
    stopped: list[int] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda signum, _frame: stopped.append(signum))
    with listener:
        Server(config).run(sockets=[listener])
    print("postflightd: dashboard stopped", file=sys.stderr, flush=True)
    return int(ExitCode.OK)
