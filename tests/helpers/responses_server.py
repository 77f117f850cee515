"""A scripted model server on 127.0.0.1 speaking OpenAI's Responses API, for driving a real
agent runtime (Codex CLI, ``wire_api = "responses"``) offline.

Each ``POST /v1/responses`` that offers the agent's tools (``tools`` names one of
``AGENT_TOOLS``) is answered by the next turn of the script (the ``Turn`` and ``ToolCall`` of
``helpers.model_server``), streamed as the API streams: ``response.created``, then for each
output item ``response.output_item.added`` and ``response.output_item.done``, then
``response.completed`` with its usage. A turn's text is an assistant ``message``; a call of
``apply_patch`` is a ``custom_tool_call`` whose ``input`` is the patch (the freeform tool Codex
offers for the model slugs it knows), any other call a ``function_call`` whose ``arguments``
are the call's input as JSON text. Any other request gets a short answer that ends the
exchange. Every request is recorded, its JSON body as sent.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from helpers.model_server import ToolCall, Turn

#: A request offering one of these tools is the agent's turn.
AGENT_TOOLS = frozenset({"apply_patch", "exec_command", "shell", "shell_command"})


def apply_patch(body: str) -> Turn:
    """An ``apply_patch`` call: ``body`` between the patch's begin and end lines."""
    text = f"*** Begin Patch\n{body}*** End Patch\n"
    return Turn(calls=[ToolCall("apply_patch", {"input": text})])


def _lines(sign: str, text: str) -> str:
    return "".join(f"{sign}{line}\n" for line in text.splitlines())


def patch(path: str, content: str) -> Turn:
    """An ``apply_patch`` that adds ``path`` (relative to the agent's cwd) with ``content``."""
    return apply_patch(f"*** Add File: {path}\n{_lines('+', content)}")


def patch_update(path: str, old: str, new: str) -> Turn:
    """An ``apply_patch`` that replaces ``old`` (the whole file) with ``new`` in ``path``."""
    return apply_patch(f"*** Update File: {path}\n@@\n{_lines('-', old)}{_lines('+', new)}")


def exec_command(cmd: str) -> Turn:
    """A shell command run through Codex's ``exec_command`` tool."""
    return Turn(calls=[ToolCall("exec_command", {"cmd": cmd})])


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    body: dict[str, Any]

    @property
    def agent_turn(self) -> bool:
        tools = self.body.get("tools")
        if self.path.split("?")[0] != "/v1/responses" or not isinstance(tools, list):
            return False
        return any(isinstance(t, dict) and t.get("name") in AGENT_TOOLS for t in tools)

    def input_text(self) -> str:
        """Every text the request's ``input`` holds (messages' text parts, tool outputs),
        joined: what the model reads."""
        parts: list[str] = []
        for item in self.body.get("input") or []:
            if not isinstance(item, dict):
                continue
            content = item.get("content")
            if isinstance(content, str):
                parts.append(content)
            elif isinstance(content, list):
                parts += [c.get("text", "") for c in content if isinstance(c, dict)]
            output = item.get("output")
            if isinstance(output, str):
                parts.append(output)
        return "\n".join(parts)

    def last_user_text(self) -> str:
        """The text of the last ``user`` message of the request's ``input``."""
        for item in reversed(self.body.get("input") or []):
            if isinstance(item, dict) and item.get("role") == "user":
                content = item.get("content")
                if isinstance(content, str):
                    return content
                return "\n".join(c.get("text", "") for c in content or [] if isinstance(c, dict))
        return ""


class ResponsesServer:
    """The server and its script; ``requests`` grows as the runtime asks."""

    def __init__(self, script: list[Turn]) -> None:
        self.script = list(script)
        self.requests: list[Request] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.port: int = self._http.server_address[1]
        self._thread = threading.Thread(
            target=self._http.serve_forever, name="responses-server", daemon=True
        )

    @property
    def url(self) -> str:
        """The provider's ``base_url``."""
        return f"http://127.0.0.1:{self.port}/v1"

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
def responses_server(script: list[Turn]) -> Iterator[ResponsesServer]:
    server = ResponsesServer(script)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _sse(data: dict[str, Any]) -> bytes:
    return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n".encode()


def output_items(server: ResponsesServer, turn: Turn) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if turn.text:
        text = {"type": "output_text", "text": turn.text, "annotations": []}
        items.append(
            {
                "type": "message",
                "id": server.new_id("msg"),
                "role": "assistant",
                "status": "completed",
                "content": [text],
            }
        )
    for call in turn.calls:
        common = {
            "id": server.new_id("fc"),
            "call_id": server.new_id("call"),
            "status": "completed",
        }
        if call.name == "apply_patch":
            items.append(
                {"type": "custom_tool_call", "name": call.name, "input": call.input["input"]}
                | common
            )
        else:
            items.append(
                {"type": "function_call", "name": call.name, "arguments": json.dumps(call.input)}
                | common
            )
    return items


def _events(server: ResponsesServer, turn: Turn, model: str) -> Iterator[bytes]:
    """The turn as the Responses API streams it."""
    response = {"id": server.new_id("resp"), "object": "response", "model": model}
    yield _sse({"type": "response.created", "response": response | {"status": "in_progress"}})
    items = output_items(server, turn)
    for index, item in enumerate(items):
        yield _sse({"type": "response.output_item.added", "output_index": index, "item": item})
        yield _sse({"type": "response.output_item.done", "output_index": index, "item": item})
    usage = {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 20,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 30,
    }
    done = response | {"status": "completed", "output": items, "usage": usage}
    yield _sse({"type": "response.completed", "response": done})


def _handler(server: ResponsesServer) -> type[BaseHTTPRequestHandler]:
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

        def _not_found(self) -> None:
            raw = json.dumps({"error": {"type": "not_found", "message": "not here"}}).encode()
            self.send_response(404)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_GET(self) -> None:
            server.record(Request("GET", self.path, {}))
            self._not_found()

        def do_POST(self) -> None:
            body = self._body()
            request = Request("POST", self.path, body)
            if self.path.split("?")[0] != "/v1/responses":
                server.record(request)
                self._not_found()
                return
            turn = server.next_turn(request)
            if turn.before is not None:
                turn.before(body)
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("connection", "close")
            self.end_headers()
            for chunk in _events(server, turn, str(body.get("model") or "")):
                self.wfile.write(chunk)
                self.wfile.flush()
            self.close_connection = True

    return Handler
