"""A scripted model server on 127.0.0.1 speaking the Gemini API (``generateContent`` and
``streamGenerateContent``), for driving the real Gemini CLI offline.

The turns are ``helpers.model_server``'s (``Turn``, ``ToolCall``, ``say``): a turn's tool calls
are answered as ``functionCall`` parts (Gemini CLI's tools: ``write_file``, ``replace``,
``run_shell_command``), else its text ends the turn (``finishReason: STOP``). A request that
offers the agent's tools (``tools[].functionDeclarations`` naming one of ``AGENT_TOOLS``) gets
the next turn of the script; every other request Gemini CLI makes on the side (its model
router, its next-speaker check, ``countTokens``) gets a short answer that ends the exchange.
Every request is recorded, its JSON body as sent, so a test can read what reached the model.
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
AGENT_TOOLS = frozenset({"write_file", "replace", "run_shell_command"})
MODEL = "gemini-2.5-flash"
#: The side requests' answer: a JSON object, since Gemini CLI asks its model router and its
#: next-speaker check for JSON, and "user" is the answer that lets the agent's turn end.
SIDE_ANSWER = json.dumps({"reasoning": "scripted", "model_choice": "flash", "next_speaker": "user"})


def write_file(path: str, content: str, text: str = "") -> Turn:
    return Turn(text, [ToolCall("write_file", {"file_path": path, "content": content})])


def replace(path: str, old: str, new: str) -> Turn:
    call = ToolCall(
        "replace",
        {"file_path": path, "old_string": old, "new_string": new, "instruction": "Record it."},
    )
    return Turn(calls=[call])


def shell(command: str) -> Turn:
    call = ToolCall("run_shell_command", {"command": command, "description": "Write metadata"})
    return Turn(calls=[call])


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    body: dict[str, Any]

    @property
    def agent_turn(self) -> bool:
        if not self.path.split("?")[0].endswith(("generateContent", "GenerateContent")):
            return False
        for tool in self.body.get("tools") or []:
            declared = tool.get("functionDeclarations") if isinstance(tool, dict) else None
            for decl in declared or []:
                if isinstance(decl, dict) and decl.get("name") in AGENT_TOOLS:
                    return True
        return False

    def last_user_text(self) -> str:
        """The text of the last user content (its text parts and function responses), what
        the model reads last."""
        for content in reversed(self.body.get("contents") or []):
            if not isinstance(content, dict) or content.get("role") != "user":
                continue
            texts = []
            for part in content.get("parts") or []:
                if not isinstance(part, dict):
                    continue
                if isinstance(part.get("text"), str):
                    texts.append(part["text"])
                elif isinstance(part.get("functionResponse"), dict):
                    texts.append(json.dumps(part["functionResponse"].get("response")))
            return "\n".join(texts)
        return ""


class GeminiServer:
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
            target=self._http.serve_forever, name="gemini-server", daemon=True
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
                return Turn(SIDE_ANSWER)
            if not self.script:
                self.errors.append("a turn was asked for after the script ended")
                return Turn("The script has ended.")
            return self.script.pop(0)

    def record(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._thread.join(10)


@contextmanager
def gemini_server(script: list[Turn]) -> Iterator[GeminiServer]:
    server = GeminiServer(script)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def response(turn: Turn, model: str) -> dict[str, Any]:
    """The turn as one ``GenerateContentResponse``."""
    parts: list[dict[str, Any]] = []
    if turn.text:
        parts.append({"text": turn.text})
    for call in turn.calls:
        parts.append({"functionCall": {"name": call.name, "args": call.input}})
    return {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {
            "promptTokenCount": 10,
            "candidatesTokenCount": 20,
            "totalTokenCount": 30,
        },
        "modelVersion": model,
    }


def _handler(server: GeminiServer) -> type[BaseHTTPRequestHandler]:
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
            self._json(404, {"error": {"code": 404, "status": "NOT_FOUND"}})

        def do_POST(self) -> None:
            body = self._body()
            request = Request("POST", self.path, body)
            path = self.path.split("?")[0]
            # /v1beta/models/<model>:<method>
            model, _, method = path.rsplit("/", 1)[-1].partition(":")
            if method == "countTokens":
                server.record(request)
                self._json(200, {"totalTokens": 100})
                return
            if method not in ("generateContent", "streamGenerateContent"):
                server.record(request)
                self._json(404, {"error": {"code": 404, "status": "NOT_FOUND"}})
                return
            turn = server.next_turn(request)
            if turn.before is not None:
                turn.before(body)
            doc = response(turn, model or MODEL)
            if method == "generateContent":
                self._json(200, doc)
                return
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("connection", "close")
            self.end_headers()
            self.wfile.write(f"data: {json.dumps(doc)}\r\n\r\n".encode())
            self.wfile.flush()
            self.close_connection = True

    return Handler
