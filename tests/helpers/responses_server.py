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

import json
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, ClassVar

from helpers.scripted_server import Exchange, ScriptedServer, ToolCall, Turn, serving, sse
from helpers.scripted_server import Request as ScriptedRequest

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
class Request(ScriptedRequest):
    @property
    def agent_turn(self) -> bool:
        tools = self.body.get("tools")
        if self.route != "/v1/responses" or not isinstance(tools, list):
            return False
        return any(isinstance(t, dict) and t.get("name") in AGENT_TOOLS for t in tools)

    @property
    def agent(self) -> str | None:
        """Codex names the agent in each request's turn metadata: ``/root`` for the main
        one, ``/root/<task_name>`` for a subagent it spawned (None for the main one)."""
        meta = (self.body.get("client_metadata") or {}).get("x-codex-turn-metadata")
        try:
            name = json.loads(meta).get("agent_name") if isinstance(meta, str) else None
        except (ValueError, AttributeError):
            return None
        return name if isinstance(name, str) and name != "/root" else None

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


class ResponsesServer(ScriptedServer):
    """The scripted server of OpenAI's Responses API."""

    request_type = Request
    thread_name = "responses-server"
    not_found: ClassVar[dict[str, Any]] = {"error": {"type": "not_found", "message": "not here"}}

    @property
    def url(self) -> str:
        """The provider's ``base_url``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def answer(self, http: Exchange, request: ScriptedRequest) -> None:
        if request.route != "/v1/responses":
            self.record(request)
            http.send_json(404, self.not_found)
            return
        turn = self.next_turn(request)
        http.send_stream(_events(self, turn, str(request.body.get("model") or "")))


def responses_server(
    script: list[Turn], agents: dict[str, list[Turn]] | None = None
) -> AbstractContextManager[ResponsesServer]:
    return serving(ResponsesServer(script, agents))


def _sse(data: dict[str, Any]) -> bytes:
    return sse(data["type"], data)


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
            # A tool of a namespace (Codex's ``collaboration``) is called by its own name,
            # with the namespace beside it.
            namespace, _, name = call.name.rpartition(".")
            item = {"type": "function_call", "name": name, "arguments": json.dumps(call.input)}
            items.append(item | ({"namespace": namespace} if namespace else {}) | common)
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
