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

import json
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, ClassVar

from helpers.scripted_server import Exchange, ScriptedServer, ToolCall, Turn, say, serving, sse
from helpers.scripted_server import Request as ScriptedRequest

__all__ = ["ModelServer", "Request", "ToolCall", "Turn", "model_server", "say", "write"]

#: A request offering one of these tools is the agent's (or a subagent's) turn: Claude Code's,
#: and GitHub Copilot CLI's (its provider type "anthropic" speaks this API too).
AGENT_TOOLS = frozenset({"Write", "Edit", "Bash", "create", "edit", "bash"})
MODEL = "claude-sonnet-4-5-20250929"


def write(path: str, content: str, text: str = "") -> Turn:
    return Turn(text, [ToolCall("Write", {"file_path": path, "content": content})])


@dataclass(frozen=True)
class Request(ScriptedRequest):
    @property
    def agent_turn(self) -> bool:
        tools = self.body.get("tools")
        if self.route != "/v1/messages" or not isinstance(tools, list):
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


class ModelServer(ScriptedServer):
    """The scripted server of Anthropic's Messages API."""

    request_type = Request
    thread_name = "model-server"
    not_found: ClassVar[dict[str, Any]] = {"type": "error", "error": {"type": "not_found_error"}}
    answers_head = True

    def answer(self, http: Exchange, request: ScriptedRequest) -> None:
        if request.route == "/v1/messages/count_tokens":
            self.record(request)
            http.send_json(200, {"input_tokens": 100})
            return
        if request.route != "/v1/messages":
            self.record(request)
            http.send_json(404, self.not_found)
            return
        turn = self.next_turn(request)
        model = str(request.body.get("model") or MODEL)
        if not request.body.get("stream"):
            http.send_json(200, _whole(self, turn, model))
            return
        http.send_stream(_events(self, turn, model))


def model_server(script: list[Turn]) -> AbstractContextManager[ModelServer]:
    return serving(ModelServer(script))


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
    yield sse("message_start", {"type": "message_start", "message": message})
    index = 0
    if turn.text:
        start = {"type": "text", "text": ""}
        yield sse(
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": start},
        )
        delta = {"type": "text_delta", "text": turn.text}
        yield sse(
            "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        )
        yield sse("content_block_stop", {"type": "content_block_stop", "index": index})
        index += 1
    for call in turn.calls:
        block = {"type": "tool_use", "id": server.new_id("toolu"), "name": call.name, "input": {}}
        yield sse(
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": block},
        )
        delta = {"type": "input_json_delta", "partial_json": json.dumps(call.input)}
        yield sse(
            "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        )
        yield sse("content_block_stop", {"type": "content_block_stop", "index": index})
        index += 1
    stop = "tool_use" if turn.calls else "end_turn"
    yield sse(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {"output_tokens": 20},
        },
    )
    yield sse("message_stop", {"type": "message_stop"})


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
