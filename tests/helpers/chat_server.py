"""The scripted model server (helpers.scripted_server) speaking OpenAI's chat completions API, for
runtimes that take an OpenAI-compatible provider (OpenCode).

A request to ``.../chat/completions`` that offers one of the agent's tools (``tools`` holds a
function named in ``AGENT_TOOLS``) is answered by the next turn of the script, streamed as the
API streams (``data:`` chunks of ``chat.completion.chunk``: the text as ``content``, each tool
call whole in one ``tool_calls`` delta, a last chunk with the ``finish_reason`` and the usage,
then ``data: [DONE]``). Every other request (a session's title) gets a short text; every
request is recorded as sent. The turns are ``helpers.scripted_server.Turn``: a ``ToolCall``'s
``input`` is the tool's arguments as the runtime names them (OpenCode's ``write`` takes
``filePath`` and ``content``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, ClassVar

from helpers.scripted_server import Exchange, Request, ScriptedServer, ToolCall, Turn, serving

#: A request offering one of these tools is the agent's (or a subagent's) turn.
AGENT_TOOLS = frozenset({"write", "edit", "bash"})
MODEL = "scripted-model"


def chat_write(path: str, content: str, text: str = "") -> Turn:
    return Turn(text, [ToolCall("write", {"filePath": path, "content": content})])


@dataclass(frozen=True)
class ChatRequest(Request):
    @property
    def agent_turn(self) -> bool:
        tools = self.body.get("tools")
        if not self.route.endswith("/chat/completions"):
            return False
        if not isinstance(tools, list):
            return False
        names = {(t.get("function") or {}).get("name") for t in tools if isinstance(t, dict)}
        return bool(names & AGENT_TOOLS)

    def last_user_text(self) -> str:
        """The text of the last user message, what the model reads last from the person."""
        for message in reversed(self.body.get("messages") or []):
            if message.get("role") != "user":
                continue
            content = message.get("content")
            if isinstance(content, str):
                return content
            return "\n".join(
                str(part.get("text", ""))
                for part in content or []
                if isinstance(part, dict) and part.get("type") == "text"
            )
        return ""

    def tool_results(self) -> list[str]:
        """The content of every tool result the request carries, in order."""
        out = []
        for message in self.body.get("messages") or []:
            if message.get("role") == "tool":
                content = message.get("content")
                out.append(content if isinstance(content, str) else json.dumps(content))
        return out


def _chunk(server: ScriptedServer, model: str, delta: dict[str, Any], finish: str | None) -> bytes:
    doc = {
        "id": "chatcmpl-scripted",
        "object": "chat.completion.chunk",
        "created": 1_767_225_600,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(doc)}\n\n".encode()


def _events(server: ScriptedServer, turn: Turn, model: str) -> Iterator[bytes]:
    yield _chunk(server, model, {"role": "assistant", "content": ""}, None)
    if turn.text:
        yield _chunk(server, model, {"content": turn.text}, None)
    for index, call in enumerate(turn.calls):
        tool_call = {
            "index": index,
            "id": server.new_id("call"),
            "type": "function",
            "function": {"name": call.name, "arguments": json.dumps(call.input)},
        }
        yield _chunk(server, model, {"tool_calls": [tool_call]}, None)
    yield _chunk(server, model, {}, "tool_calls" if turn.calls else "stop")
    usage = {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30}
    doc = {
        "id": "chatcmpl-scripted",
        "object": "chat.completion.chunk",
        "created": 1_767_225_600,
        "model": model,
        "choices": [],
        "usage": usage,
    }
    yield f"data: {json.dumps(doc)}\n\n".encode()
    yield b"data: [DONE]\n\n"


def _whole(server: ScriptedServer, turn: Turn, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
    if turn.calls:
        message["tool_calls"] = [
            {
                "id": server.new_id("call"),
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.input)},
            }
            for call in turn.calls
        ]
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 1_767_225_600,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if turn.calls else "stop",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30},
    }


class ChatServer(ScriptedServer):
    """The scripted server of OpenAI's chat completions API."""

    request_type = ChatRequest
    thread_name = "chat-server"
    not_found: ClassVar[dict[str, Any]] = {
        "error": {"message": "not found", "type": "invalid_request_error"}
    }

    def answer(self, http: Exchange, request: Request) -> None:
        if not request.route.endswith("/chat/completions"):
            self.record(request)
            http.send_json(404, {"error": {"message": "not found"}})
            return
        turn = self.next_turn(request)
        model = str(request.body.get("model") or MODEL)
        if not request.body.get("stream"):
            http.send_json(200, _whole(self, turn, model))
            return
        http.send_stream(_events(self, turn, model))


def chat_server(script: list[Turn]) -> AbstractContextManager[ChatServer]:
    return serving(ChatServer(script))
