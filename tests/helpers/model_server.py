"""A scripted model server on 127.0.0.1 speaking Anthropic's Messages API, for driving a real
agent runtime offline (Claude Code; GitHub Copilot CLI with ``COPILOT_PROVIDER_TYPE=anthropic``).

Each request that offers the agent's tools (``tools`` holds one of ``AGENT_TOOLS``) is answered
by the next turn of the script, streamed as the API streams (``message_start``,
``content_block_start``/``_delta``/``_stop`` for text and ``tool_use``, ``message_delta`` with
the ``stop_reason``, ``message_stop``). Every other request the runtime makes on the side (a
title, a quota probe, ``count_tokens``) gets a short answer that ends the exchange. Every
request is recorded, its JSON body as sent, so a test can read what reached the model.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: A request offering one of these tools is the agent's (or a subagent's) turn: Claude Code's,
#: and GitHub Copilot CLI's (its provider type "anthropic" speaks this API too).
AGENT_TOOLS = frozenset({"Write", "Edit", "Bash", "create", "edit", "bash"})
MODEL = "claude-sonnet-4-5-20250929"


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


def write(path: str, content: str, text: str = "") -> Turn:
    return Turn(text, [ToolCall("Write", {"file_path": path, "content": content})])


def say(text: str, before: Callable[[dict[str, Any]], None] | None = None) -> Turn:
    return Turn(text, before=before)


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    body: dict[str, Any]

    @property
    def agent_turn(self) -> bool:
        tools = self.body.get("tools")
        if self.path.split("?")[0] != "/v1/messages" or not isinstance(tools, list):
            return False
        return any(isinstance(t, dict) and t.get("name") in AGENT_TOOLS for t in tools)

    def last_user_text(self) -> str:
        """The text of the last user message (its text blocks joined), what the model reads
        last."""
        messages = self.body.get("messages") or []
        for message in reversed(messages):
            if message.get("role") != "user":
                continue
            content = message.get("content")
            if isinstance(content, str):
                return content
            parts = []
            for block in content or []:
                if block.get("type") == "text":
                    parts.append(block.get("text", ""))
                elif block.get("type") == "tool_result":
                    inner = block.get("content")
                    if isinstance(inner, str):
                        parts.append(inner)
                    elif isinstance(inner, list):
                        parts += [b.get("text", "") for b in inner if isinstance(b, dict)]
            return "\n".join(parts)
        return ""


class ModelServer:
    """The server and its script; ``requests`` grows as the runtime asks. ``handler`` makes
    the request handler of another API (helpers.chat_server); Anthropic's by default."""

    def __init__(
        self,
        script: list[Turn],
        handler: Callable[[ModelServer], type[BaseHTTPRequestHandler]] | None = None,
    ) -> None:
        self.script = list(script)
        self.requests: list[Request] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), (handler or _handler)(self))
        self.port: int = self._http.server_address[1]
        self._thread = threading.Thread(
            target=self._http.serve_forever, name="model-server", daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def agent_requests(self) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.agent_turn]

    def next_turn(self, request: Request) -> Turn:
        with self._lock:
            self.requests.append(request)
            if not request.agent_turn:
                return Turn("OK")
            if not self.script:
                self.errors.append("a turn was asked for after the script ended")
                return Turn("The script has ended.")
            return self.script.pop(0)

    def record(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)

    def new_id(self, prefix: str) -> str:
        return f"{prefix}_{next(self._ids):024d}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._thread.join(10)


@contextmanager
def model_server(script: list[Turn]) -> Iterator[ModelServer]:
    server = ModelServer(script)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _events(server: ModelServer, turn: Turn, model: str) -> Iterator[bytes]:
    """The turn as the Messages API streams it."""
    usage = {"input_tokens": 10, "output_tokens": 1}
    message = {
        "id": server.new_id("msg"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    yield _sse("message_start", {"type": "message_start", "message": message})
    index = 0
    if turn.text:
        start = {"type": "text", "text": ""}
        yield _sse(
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": start},
        )
        delta = {"type": "text_delta", "text": turn.text}
        yield _sse(
            "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        )
        yield _sse("content_block_stop", {"type": "content_block_stop", "index": index})
        index += 1
    for call in turn.calls:
        block = {"type": "tool_use", "id": server.new_id("toolu"), "name": call.name, "input": {}}
        yield _sse(
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": block},
        )
        delta = {"type": "input_json_delta", "partial_json": json.dumps(call.input)}
        yield _sse(
            "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        )
        yield _sse("content_block_stop", {"type": "content_block_stop", "index": index})
        index += 1
    stop = "tool_use" if turn.calls else "end_turn"
    yield _sse(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {"output_tokens": 20},
        },
    )
    yield _sse("message_stop", {"type": "message_stop"})


def _whole(server: ModelServer, turn: Turn, model: str) -> dict[str, Any]:
    """The turn as one (non-streamed) Messages API response."""
    content: list[dict[str, Any]] = []
    if turn.text:
        content.append({"type": "text", "text": turn.text})
    for call in turn.calls:
        content.append(
            {
                "type": "tool_use",
                "id": server.new_id("toolu"),
                "name": call.name,
                "input": call.input,
            }
        )
    return {
        "id": server.new_id("msg"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if turn.calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 20},
    }


def _handler(server: ModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

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

        def _json(self, status: int, doc: dict[str, Any]) -> None:
            raw = json.dumps(doc).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_GET(self) -> None:
            server.record(Request("GET", self.path, {}))
            self._json(404, {"type": "error", "error": {"type": "not_found_error"}})

        def do_HEAD(self) -> None:
            server.record(Request("HEAD", self.path, {}))
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def do_POST(self) -> None:
            body = self._body()
            request = Request("POST", self.path, body)
            path = self.path.split("?")[0]
            if path == "/v1/messages/count_tokens":
                server.record(request)
                self._json(200, {"input_tokens": 100})
                return
            if path != "/v1/messages":
                server.record(request)
                self._json(404, {"type": "error", "error": {"type": "not_found_error"}})
                return
            turn = server.next_turn(request)
            if turn.before is not None:
                turn.before(body)
            model = str(body.get("model") or MODEL)
            if not body.get("stream"):
                self._json(200, _whole(server, turn, model))
                return
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("connection", "close")
            self.end_headers()
            for chunk in _events(server, turn, model):
                self.wfile.write(chunk)
                self.wfile.flush()
            self.close_connection = True

    return Handler
