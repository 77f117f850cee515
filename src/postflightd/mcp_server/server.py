"""The stdio MCP server: each tool's name, description and argument schema, and the loop that
answers the client, on the official MCP Python SDK (``mcp``).

A tool is a plain function from its arguments to a JSON value; a ``UsageError`` it raises (an
unknown task, a path outside the project, a document that is not JSON) is answered as an MCP
error (invalid params) with its message, and anything else it raises as an internal error:
the server itself never stops on a call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from postflightd import __version__
from postflightd.errors import UsageError
from postflightd.inert import clip, inert, json_text

#: The server's name, as runtimes prefix its tools (Claude Code: ``mcp__postflightd__...``).
NAME = "postflightd"


@dataclass(frozen=True, slots=True)
class Tool:
    """One tool: what the client lists, and the function that answers a call."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    call: Callable[[Mapping[str, Any]], Any]


#: The members whose value is text of several lines (``scan``'s output): each line is inert,
#: the line breaks kept.
LINES_KEYS = frozenset({"text"})


def inert_value(value: Any) -> Any:
    """``value`` with every string in it (keys too) made inert: nothing a project holds can
    reach the agent as a control sequence or a forged line."""
    if isinstance(value, str):
        return inert(value)
    if isinstance(value, Mapping):
        return {
            inert(str(k)): (
                "\n".join(map(inert, v.split("\n")))
                if k in LINES_KEYS and isinstance(v, str)
                else inert_value(v)
            )
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [inert_value(v) for v in value]
    return value


def build_server(tools: Sequence[Tool], instructions: str) -> Server[Any]:
    by_name = {t.name: t for t in tools}

    async def list_tools(
        _ctx: Any, _params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=t.name, description=t.description, input_schema=dict(t.input_schema)
                )
                for t in tools
            ]
        )

    async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        tool = by_name.get(params.name)
        if tool is None:
            raise MCPError(types.INVALID_PARAMS, f"no tool {inert(clip(params.name))}")
        arguments = params.arguments or {}
        try:
            value = inert_value(await anyio.to_thread.run_sync(tool.call, arguments))
        except UsageError as exc:
            raise MCPError(types.INVALID_PARAMS, inert(str(exc))) from None
        except Exception as exc:  # noqa: BLE001 - a call never stops the server
            raise MCPError(
                types.INTERNAL_ERROR, f"{tool.name} failed: {inert(clip(repr(exc)))}"
            ) from None
        text = json_text(value, indent=2)
        structured = value if isinstance(value, dict) else {"result": value}
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], structured_content=structured
        )

    return Server(
        NAME,
        version=__version__,
        instructions=instructions,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def serve_stdio(tools: Sequence[Tool], instructions: str) -> None:
    """Answer the client on stdin and stdout until it closes them."""
    server = build_server(tools, instructions)

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)
