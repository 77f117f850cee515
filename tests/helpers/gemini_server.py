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

import json
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, ClassVar

from helpers.scripted_server import Exchange, ScriptedServer, ToolCall, Turn, serving
from helpers.scripted_server import Request as ScriptedRequest

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
class Request(ScriptedRequest):
    @property
    def agent_turn(self) -> bool:
        if not self.route.endswith(("generateContent", "GenerateContent")):
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


class GeminiServer(ScriptedServer):
    """The scripted server of the Gemini API."""

    request_type = Request
    thread_name = "gemini-server"
    side_answer = SIDE_ANSWER
    not_found: ClassVar[dict[str, Any]] = {"error": {"code": 404, "status": "NOT_FOUND"}}

    def answer(self, http: Exchange, request: ScriptedRequest) -> None:
        # /v1beta/models/<model>:<method>
        model, _, method = request.route.rsplit("/", 1)[-1].partition(":")
        if method == "countTokens":
            self.record(request)
            http.send_json(200, {"totalTokens": 100})
            return
        if method not in ("generateContent", "streamGenerateContent"):
            self.record(request)
            http.send_json(404, self.not_found)
            return
        doc = response(self.next_turn(request), model or MODEL)
        if method == "generateContent":
            http.send_json(200, doc)
            return
        http.send_stream([f"data: {json.dumps(doc)}\r\n\r\n".encode()])


def gemini_server(script: list[Turn]) -> AbstractContextManager[GeminiServer]:
    return serving(GeminiServer(script))


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
