"""The dashboard's web application: the page, its data as JSON, the live events, the report's
figures and ``/metrics``.

Routes (all GET, none takes a file name):

* ``/``, ``/static/dashboard.js``, ``/static/dashboard.css``: the page, its one script and its
  one style sheet, shipped in the package; nothing is loaded from anywhere else.
* ``/api/state``: the runs in flight and the invalid files now; ``/api/outcomes``: the latest
  outcomes. ``/events``: the same, live, as server-sent events.
* ``/figures?range=7d``: the HTML report (``postflightd report --format html``, run as its own
  process so that a 100,000-run report never lives in the server's memory), shown in a frame.
* ``/metrics``: Prometheus' text format (``serve.metrics``).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import html
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any, Final

import anyio
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from postflightd.config import ENV_CONFIG, ENV_TOKEN
from postflightd.serve.feed import page_json
from postflightd.serve.follow import Tree
from postflightd.serve.live import Collect, Event, Hub, Poller
from postflightd.serve.metrics import metrics_registry, metrics_text
from postflightd.serve.security import RANGES, Guard, allowed_hosts

#: How long a rendered figures page is reused once the journal has a new row.
FIGURES_TTL_S: Final = 30.0
FIGURES_TIMEOUT_S: Final = 60.0
#: The least time between two looks: the changes of a burst are looked at together.
COALESCE_S: Final = 0.1
_STYLE: Final = re.compile(r"<style>(.*?)</style>", re.DOTALL)
_STATIC: Final = {
    "dashboard.js": "text/javascript; charset=utf-8",
    "dashboard.css": "text/css; charset=utf-8",
}


@dataclass(frozen=True, slots=True)
class Settings:
    """What ``commands.serve`` resolved: the roots, where the journal is, and the address."""

    roots: Sequence[Tree]
    journal: Path
    host: str
    port: int
    token: str | None = None
    config_path: str | None = None
    poll_s: float = 0.2
    #: how long a figures page is reused after the journal changed (unchanged: for as long)
    figures_ttl_s: float = FIGURES_TTL_S


def _asset(name: str) -> bytes:
    return files("postflightd.serve").joinpath("static", name).read_bytes()


def figures_csp(page: str) -> str:
    """The report page's policy: its one inline style sheet by hash, nothing else at all."""
    hashes = " ".join(
        "'sha256-" + base64.b64encode(hashlib.sha256(m.encode()).digest()).decode() + "'"
        for m in _STYLE.findall(page)
    )
    return (
        f"default-src 'none'; style-src {hashes or chr(39) + 'none' + chr(39)}; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'self'"
    )


class Figures:
    """The report pages by range, each rendered by a ``postflightd report`` process."""

    def __init__(self, settings: Settings, poller: Poller) -> None:
        self.settings = settings
        self.poller = poller
        self.cache: dict[str, tuple[int, float, str]] = {}
        #: report processes started (one per range and journal change, at most one per TTL)
        self.builds = 0
        # One report process at a time: pages opened together wait for it and share its page
        # (the server also gives them one thread: ``create_app``).
        self.lock = threading.Lock()

    def page(self, since: str) -> str:
        with self.lock:
            return self._page(since)

    def _page(self, since: str) -> str:
        journal_id = self.poller.state.journal_id
        cached = self.cache.get(since)
        # Reused while the journal has no new row, and for the TTL after it has: a page view
        # (or a page refreshing its frame) never starts a process of its own.
        fresh = cached is not None and time.monotonic() - cached[1] < self.settings.figures_ttl_s
        if cached is not None and (cached[0] == journal_id or fresh):
            return cached[2]
        self.builds += 1
        # -P: nothing is put before the installed package on the import path (``-m`` alone
        # puts the working directory first), and the child runs from the filesystem's root:
        # ``serve`` is usually started in a project, which agents write, and a planted
        # ``postflightd/__main__.py`` there must never run. Not -I: it would also drop the
        # user's site-packages, where ``pip install --user`` puts postflightd.
        argv = [sys.executable, "-P", "-m", "postflightd", "report", "--format", "html"]
        argv += ["--since", since]
        if self.settings.config_path:
            argv += ["--config", self.settings.config_path]
        argv += [str(tree.root) for tree in self.settings.roots]
        try:
            done = subprocess.run(
                argv,
                capture_output=True,
                timeout=FIGURES_TIMEOUT_S,
                check=False,
                stdin=subprocess.DEVNULL,
                cwd="/",
                env=_report_environment(),
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return _message_page(f"the report could not be made: {exc}")
        if done.returncode != 0:
            reason = done.stderr.decode("utf-8", "replace").strip().removeprefix("postflightd: ")
            return _message_page(reason or f"the report exited {done.returncode}")
        text = done.stdout.decode("utf-8", "replace")
        self.cache[since] = (journal_id, time.monotonic(), text)
        return text


def _report_environment() -> dict[str, str]:
    """The report's environment: this one, with a relative configuration path made absolute
    (the report runs from ``/``) and without the dashboard's token, which it never needs."""
    env = {k: v for k, v in os.environ.items() if k != ENV_TOKEN}
    if env.get(ENV_CONFIG):
        env[ENV_CONFIG] = str(Path(env[ENV_CONFIG]).absolute())
    return env


def _message_page(message: str) -> str:
    return (
        "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8><title>figures</title>"
        f"</head><body><p>{html.escape(message)}</p></body></html>\n"
    )


def create_app(settings: Settings, collect: Collect) -> Any:
    """The ASGI application, guarded (``serve.security``); the poller runs while it does."""
    hub = Hub()
    poller = Poller(collect, settings.roots, settings.journal, hub, settings.poll_s)
    figures = Figures(settings, poller)
    registry = metrics_registry(poller)
    page = _asset("dashboard.html")
    assets = {name: (_asset(name), kind) for name, kind in _STATIC.items()}

    # The figures' pages take threads of their own, one at a time: taken from the shared pool
    # (anyio's 40), pages waiting on a slow report would hold every thread, and the live view
    # (its looks, /metrics) would wait with them. Made at the first page, in the event loop.
    report_threads: list[anyio.CapacityLimiter] = []

    async def follow_forever() -> None:
        """Look when a watch, the journal or a timer says so; never more often than poll_s."""
        loop = asyncio.get_running_loop()
        wake = asyncio.Event()
        poller.start(lambda: loop.call_soon_threadsafe(wake.set))
        fd = poller.journal_watch.fd if poller.journal_watch is not None else -1
        if fd >= 0:
            loop.add_reader(fd, poller.journal_event)
        try:
            while True:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), poller.wait_s())
                wake.clear()
                try:
                    events = await anyio.to_thread.run_sync(poller.refresh)
                except Exception as exc:  # noqa: BLE001 - one failed look must not end the live view
                    events = [Event("problem", page_json({"message": str(exc)[:500]}))]
                for event in events:
                    hub.publish(event)
                # A burst of changes (an agent writing progress) is looked at once per window.
                await asyncio.sleep(min(settings.poll_s, COALESCE_S))
        finally:
            if fd >= 0:
                loop.remove_reader(fd)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        await anyio.to_thread.run_sync(lambda: poller.refresh(force=True))
        task = asyncio.create_task(follow_forever())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            poller.close()

    async def index(_request: Request) -> Response:
        return Response(page, media_type="text/html; charset=utf-8")

    async def static(request: Request) -> Response:
        body, kind = assets[request.url.path.rsplit("/", 1)[-1]]
        return Response(body, media_type=kind)

    async def state(_request: Request) -> Response:
        return Response(poller.state.snapshot, media_type="application/json")

    async def outcomes(_request: Request) -> Response:
        return Response(page_json(list(poller.state.recent)), media_type="application/json")

    async def events(_request: Request) -> Response:
        client = hub.subscribe()

        async def stream() -> AsyncIterator[ServerSentEvent]:
            try:
                yield ServerSentEvent(data=poller.state.snapshot, event="state", retry=1000)
                for outcome in list(poller.state.recent):
                    yield ServerSentEvent(
                        data=page_json(outcome), event="outcome", id=str(outcome["id"])
                    )
                while True:
                    event = await client.get()
                    yield ServerSentEvent(data=event.data, event=event.name, id=event.id)
            finally:
                hub.unsubscribe(client)

        return EventSourceResponse(stream(), ping=15, send_timeout=30)

    async def figures_page(request: Request) -> Response:
        since = request.query_params.get("range", "7d")
        if since not in RANGES:
            return Response("unknown range\n", status_code=400)
        if not report_threads:
            report_threads.append(anyio.CapacityLimiter(1))
        text = await anyio.to_thread.run_sync(figures.page, since, limiter=report_threads[0])
        return HTMLResponse(
            text,
            headers={"content-security-policy": figures_csp(text), "x-frame-options": "SAMEORIGIN"},
        )

    async def metrics(_request: Request) -> Response:
        body = await anyio.to_thread.run_sync(metrics_text, registry)
        return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")

    async def no_icon(_request: Request) -> Response:
        return Response(status_code=204)

    routes = [
        Route("/", index, methods=["GET", "HEAD"]),
        Route("/favicon.ico", no_icon, methods=["GET", "HEAD"]),
        *(Route(f"/static/{n}", static, methods=["GET", "HEAD"]) for n in _STATIC),
        Route("/api/state", state, methods=["GET", "HEAD"]),
        Route("/api/outcomes", outcomes, methods=["GET", "HEAD"]),
        Route("/events", events, methods=["GET"]),
        Route("/figures", figures_page, methods=["GET", "HEAD"]),
        Route("/metrics", metrics, methods=["GET", "HEAD"]),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.hub = hub
    app.state.poller = poller
    app.state.figures = figures
    return Guard(app, hosts=allowed_hosts(settings.host, settings.port), token=settings.token)
