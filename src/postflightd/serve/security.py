"""The dashboard's rules for every request, checked before any route sees it.

* The ``Host`` header must name the address served (a page on another site that resolves its
  own name to 127.0.0.1, DNS rebinding, gets 421 and nothing else): on loopback, a loopback
  name; beyond it, the address the request arrived at or one of the machine's own names (so
  ``--host 0.0.0.0`` answers at ``127.0.0.1`` and ``localhost``, at each of its addresses and
  at its name).
* Only GET and HEAD (405 otherwise): the dashboard reads, it never acts.
* Only the query parameters a route knows (``range``, ``token``), each of a fixed form: no
  parameter names a file.
* Beyond loopback, a token on every request: the ``Authorization: Bearer`` header, or the
  cookie that a first visit with ``?token=`` sets (then redirected to the same page without it,
  so the token does not stay in the address bar or the history; the redirect is always a path
  of this server, never ``//another.host/``). On loopback, the token is checked when one is
  given: other users of the machine can reach loopback too.
* Headers on every answer: a Content-Security-Policy that allows only the page's own script,
  style and connections (no inline script, no other origin, no framing by another site),
  ``nosniff``, no referrer, no caching.
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import socket
from collections.abc import Callable
from typing import Final
from urllib.parse import parse_qsl, quote, urlencode

from starlette.datastructures import Headers, MutableHeaders
from starlette.requests import cookie_parser
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

COOKIE: Final = "postflightd_token"
PAGE_CSP: Final = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; frame-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
#: The query parameters any route accepts, and the values each may take.
RANGES: Final = ("24h", "7d", "30d", "90d", "all")
_PARAMS: Final[dict[str, Callable[[str], bool]]] = {
    "range": lambda v: v in RANGES,
    "token": lambda v: 0 < len(v) <= 200 and v.isascii(),
}
_COMMON_HEADERS: Final = {
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-resource-policy": "same-origin",
}
#: The policy of the guard's own plain-text answers: nothing at all may load.
_PLAIN_CSP: Final = "default-src 'none'; frame-ancestors 'none'"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def is_wildcard(host: str) -> bool:
    """Whether ``host`` is an address that binds every interface (``0.0.0.0``, ``::``)."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False


def machine_names() -> set[str]:
    """This machine's own names: its host name and its fully qualified name."""
    names = {socket.gethostname()}
    # A resolver that cannot answer leaves the host name alone.
    with contextlib.suppress(OSError, UnicodeError):
        names.add(socket.getfqdn())
    return {name.lower().rstrip(".") for name in names if name}


def allowed_hosts(host: str, port: int) -> frozenset[str]:
    """The ``Host`` values that name the address served (with and without the port); beyond
    loopback, the machine's names too. The address a request arrived at is also accepted
    (``Guard``): for a wildcard address, those are all of the machine's."""
    names = {host}
    if ":" in host and not host.startswith("["):
        names = {f"[{host}]"}
    if is_loopback(host) or is_wildcard(host):
        # A wildcard address is reached at loopback too: ``localhost`` is one of the machine's
        # names whatever its fully qualified name is (no other site can be called that).
        names |= {"localhost", "127.0.0.1", "[::1]"}
    if not is_loopback(host):
        names |= machine_names()
    out = set()
    for name in names:
        out.add(f"{name}:{port}".lower())
        if port == 80:
            out.add(name.lower())
    return frozenset(out)


class Guard:
    """The ASGI middleware that applies the rules above."""

    def __init__(self, app: ASGIApp, *, hosts: frozenset[str], token: str | None) -> None:
        self.app = app
        self.hosts = hosts
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def refuse(status: int, body: str, **headers: str) -> None:
            answer = {"content-security-policy": _PLAIN_CSP, **_COMMON_HEADERS, **headers}
            await PlainTextResponse(body, status, answer)(scope, receive, send)

        headers = Headers(scope=scope)
        host = headers.get("host", "").lower()
        if host not in self.hosts and not names_local_address(host, scope.get("server")):
            await refuse(421, "this dashboard answers only for its own address\n")
            return
        if scope["method"] not in ("GET", "HEAD"):
            await refuse(405, "the dashboard only reads: GET or HEAD\n", allow="GET, HEAD")
            return
        query = scope.get("query_string", b"").decode("latin-1")
        try:
            params = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
        except ValueError:
            await refuse(400, "a malformed query string\n")
            return
        for name, value in params:
            check = _PARAMS.get(name)
            if check is None or not check(value):
                await refuse(400, f"unknown parameter or value: {name[:40]!r}\n")
                return
        if self.token is not None:
            given = dict(params).get("token")
            if given is not None and _same(given, self.token):
                rest = urlencode([(k, v) for k, v in params if k != "token"])
                location = same_origin_path(scope["path"]) + (f"?{rest}" if rest else "")
                cookie = f"{COOKIE}={self.token}; HttpOnly; SameSite=Strict; Path=/"
                await refuse(303, "signed in\n", location=location, **{"set-cookie": cookie})
                return
            if not self._authorized(headers):
                await refuse(401, "a token is needed: open the address serve printed\n")
                return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                answer = MutableHeaders(scope=message)
                for name, value in _COMMON_HEADERS.items():
                    answer.setdefault(name, value)
                answer.setdefault("content-security-policy", PAGE_CSP)
            await send(message)

        await self.app(scope, receive, send_with_headers)

    def _authorized(self, headers: Headers) -> bool:
        if self.token is None:
            return True
        auth = headers.get("authorization", "")
        if auth.startswith("Bearer ") and _same(auth[7:].strip(), self.token):
            return True
        given = cookie_parser(headers.get("cookie", "")).get(COOKIE)
        return given is not None and _same(given, self.token)


def names_local_address(host: str, server: tuple[str, int | None] | None) -> bool:
    """Whether a ``Host`` value is the IP address and port that the request arrived at."""
    if server is None or server[1] is None:
        return False
    if host.startswith("["):
        address, _, rest = host[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ("" if not rest else "x")
    else:
        address, _, port = host.partition(":")
    if port and not (port.isascii() and port.isdigit()):
        return False
    if int(port or 80) != server[1]:
        return False
    try:
        given = ipaddress.ip_address(address)
        local = ipaddress.ip_address(server[0])
    except ValueError:
        return False
    if isinstance(local, ipaddress.IPv6Address) and local.ipv4_mapped is not None:
        local = local.ipv4_mapped  # an IPv4 client of a dual-stack socket
    return given == local


def same_origin_path(path: str) -> str:
    """``path`` as a path of this server: a browser reads ``//host/`` or ``/\\host/`` as another
    site, so leading slashes and backslashes collapse to one, and the rest is quoted."""
    return "/" + quote(path.lstrip("/\\"), safe="/-._~!$&'()*+,;=:@")


def _same(given: str, token: str) -> bool:
    """Constant-time comparison (any characters: header bytes arrive as latin-1 text)."""
    return hmac.compare_digest(given.encode("utf-8", "replace"), token.encode("utf-8"))
