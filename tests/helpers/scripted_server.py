"""What every scripted model server of tests/runtimes/ shares, whatever API it speaks: a
threaded HTTP server on 127.0.0.1 (a free port), the script of turns, the requests recorded
as sent, each turn's ``before`` callback, and the writing of JSON and of a stream of
server-sent events.

Each API is a subclass (helpers.model_server for Anthropic's Messages API,
helpers.responses_server for OpenAI's Responses API, helpers.chat_server for OpenAI's chat
completions, helpers.gemini_server for the Gemini API): its ``Request`` (which request is the
agent's turn, what the model reads), and its ``answer`` of a POST, which routes it and encodes
the turn as that API does.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, TypeVar


@dataclass(frozen=True)
class ToolCall:
    name: str
    input: dict[str, Any]


@dataclass
class Turn:
    """One answer of the model: tool calls (stop_reason ``tool_use``), else text
    (``end_turn``). ``before`` runs when the request for this turn arrives, before it is
    answered: a test's other process writing a file while the agent runs."""

    text: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    before: Callable[[dict[str, Any]], None] | None = None


def say(text: str, before: Callable[[dict[str, Any]], None] | None = None) -> Turn:
    return Turn(text, before=before)


@dataclass(frozen=True)
class Request:
    """One request as the runtime sent it; each API's subclass says which is the agent's turn."""

    method: str
    path: str
    body: dict[str, Any]

    @property
    def route(self) -> str:
        """The path without its query."""
        return self.path.split("?")[0]

    @property
    def agent_turn(self) -> bool:
        raise NotImplementedError

    @property
    def agent(self) -> str | None:
        """Which agent asks, where the API says (a subagent's name); None: the main agent."""
        return None


class Exchange(BaseHTTPRequestHandler):
    """The request handler: reads the body, hands each request to its server, and writes the
    answer the server chose."""

    protocol_version = "HTTP/1.1"
    server: ScriptedHTTP

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            doc = json.loads(raw) if raw else {}
        except ValueError:
            doc = {"unparsed": raw.decode("utf-8", "replace")}
        return doc if isinstance(doc, dict) else {"unparsed": doc}

    def send_json(self, status: int, doc: dict[str, Any]) -> None:
        raw = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def send_stream(self, chunks: Iterable[bytes]) -> None:
        """Server-sent events, each chunk flushed as it is written; the connection then ends."""
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        for chunk in chunks:
            self.wfile.write(chunk)
            self.wfile.flush()
        self.close_connection = True

    def do_GET(self) -> None:
        scripted = self.server.scripted
        scripted.record(scripted.request_type("GET", self.path, {}))
        self.send_json(404, scripted.not_found)

    def do_HEAD(self) -> None:
        scripted = self.server.scripted
        if not scripted.answers_head:
            self.send_error(501, f"Unsupported method ({self.command!r})")
            return
        scripted.record(scripted.request_type("HEAD", self.path, {}))
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        scripted = self.server.scripted
        scripted.answer(self, scripted.request_type("POST", self.path, self._body()))


class ScriptedHTTP(ThreadingHTTPServer):
    scripted: ScriptedServer


class ScriptedServer:
    """The server and its script; ``requests`` grows as the runtime asks. A subclass names
    its ``request_type``, its 404 body, the answer of a side request, and answers a POST."""

    request_type: ClassVar[type[Request]] = Request
    thread_name: ClassVar[str] = "scripted-server"
    #: The answer of a request that is not the agent's turn (a title, a router's question).
    side_answer: ClassVar[str] = "OK"
    not_found: ClassVar[dict[str, Any]] = {"error": {"message": "not found"}}
    answers_head: ClassVar[bool] = False

    def __init__(self, script: list[Turn], agents: dict[str, list[Turn]] | None = None) -> None:
        self.script = list(script)
        #: Each subagent's own script, by the name its requests carry (``Request.agent``):
        #: agents running side by side each get their own turns, whatever the order they ask.
        self.agents = {name: list(turns) for name, turns in (agents or {}).items()}
        self.requests: list[Request] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._http = ScriptedHTTP(("127.0.0.1", 0), Exchange)
        self._http.scripted = self
        self.port: int = self._http.server_address[1]
        self._thread = threading.Thread(
            target=self._http.serve_forever, name=self.thread_name, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def agent_requests(self) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.agent_turn]

    def next_turn(self, request: Request) -> Turn:
        """The request recorded, and its answer: the script's next turn for the agent's
        turn, once its ``before`` has run."""
        with self._lock:
            self.requests.append(request)
            if not request.agent_turn:
                return Turn(self.side_answer)
            script = self.agents.get(request.agent or "", self.script)
            if not script:
                self.errors.append(f"a turn was asked for after the script ended ({request.agent})")
                return Turn("The script has ended.")
            turn = script.pop(0)
        if turn.before is not None:
            turn.before(request.body)
        return turn

    def record(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)

    def new_id(self, prefix: str) -> str:
        return f"{prefix}_{next(self._ids):024d}"

    def answer(self, http: Exchange, request: Request) -> None:
        """Answer a POST: route it, and write the turn as the API does."""
        raise NotImplementedError

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._thread.join(10)


Server = TypeVar("Server", bound=ScriptedServer)


@contextmanager
def serving(server: Server) -> Iterator[Server]:
    """``server`` started for the block, stopped after it."""
    server.start()
    try:
        yield server
    finally:
        server.stop()


def sse(event: str, data: dict[str, Any]) -> bytes:
    """One server-sent event named ``event``."""
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()
