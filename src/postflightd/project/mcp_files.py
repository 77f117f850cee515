"""``postflightd init --mcp``: ``postflightd mcp`` in each runtime's project MCP configuration.

Each runtime reads its project's MCP servers from a file of its own (as its release tested
here reads them):

- Claude Code and GitHub Copilot CLI: ``.mcp.json``, ``{"mcpServers": {NAME: {"type":
  "stdio", "command": ..., "args": [...]}}}`` (Copilot CLI 1.0 lists it under "Workspace
  servers" in a folder it trusts; one entry serves both).
- Gemini CLI: ``mcpServers`` in ``.gemini/settings.json``, beside its hook.
- OpenCode: ``mcp`` in ``opencode.json``, ``{"type": "local", "command": [...]}``.
- Cursor: ``.cursor/mcp.json``, ``mcpServers`` as Claude Code's.
- Codex CLI: ``[mcp_servers.NAME]`` in ``.codex/config.toml``, read in a trusted project.

Each file is merged as the hook files are (``hook_files``): every key kept, the file's
indentation kept, the entry added only where the server's name is absent (an entry of that
name already there is the user's and left as it is), the text unchanged when nothing is
missing. Pure: text in, text out.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from postflightd.project.hook_files import (
    PROGRAM,
    SettingsShapeError,
    settings_document,
    settings_text,
)
from postflightd.project.setup import FileChange

#: The server's name in every configuration (Claude Code names its tools
#: ``mcp__postflightd__check_metadata``).
SERVER_NAME: Final = "postflightd"


@dataclass(frozen=True, slots=True)
class McpFile:
    """Where a runtime reads its project's MCP servers, and the entry init adds there."""

    path: str
    key: str  # the top-level object holding the servers by name
    form: str  # "stdio" | "gemini" | "opencode" | "toml"


CLAUDE_MCP: Final = McpFile(".mcp.json", "mcpServers", "stdio")
MCP_FILES: Final[Mapping[str, McpFile]] = {
    "claude": CLAUDE_MCP,
    "copilot": CLAUDE_MCP,
    "gemini": McpFile(".gemini/settings.json", "mcpServers", "gemini"),
    "opencode": McpFile("opencode.json", "mcp", "opencode"),
    "cursor": McpFile(".cursor/mcp.json", "mcpServers", "stdio"),
    "codex": McpFile(".codex/config.toml", "mcp_servers", "toml"),
}


def server_entry(form: str, program: str = PROGRAM) -> dict[str, Any]:
    """The entry that starts ``program mcp`` in a configuration of ``form``."""
    if form == "opencode":
        return {"type": "local", "command": [program, "mcp"], "enabled": True}
    if form == "gemini":
        return {"command": program, "args": ["mcp"]}
    return {"type": "stdio", "command": program, "args": ["mcp"]}


def mcp_config_with(text: str | None, file: McpFile, program: str = PROGRAM) -> str:
    """``text`` (None: no file) with the ``postflightd`` server in it; ``text`` itself when
    a server of that name is there already. A SettingsShapeError when it cannot be merged."""
    if file.form == "toml":
        return _toml_with(text, file, program)
    doc, indent = settings_document(text)
    servers = doc.setdefault(file.key, {})
    if not isinstance(servers, dict):
        raise SettingsShapeError(f'"{file.key}" is not an object')
    if SERVER_NAME in servers and text is not None:
        return text
    servers[SERVER_NAME] = server_entry(file.form, program)
    return settings_text(doc, indent, text, "add the server by hand")


def _toml_string(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def _toml_with(text: str | None, file: McpFile, program: str) -> str:
    """Codex's TOML with a ``[mcp_servers.postflightd]`` table appended: its other lines,
    comments included, kept as they are."""
    current = text or ""
    try:
        doc = tomllib.loads(current)
    except tomllib.TOMLDecodeError as exc:
        raise SettingsShapeError(f"not TOML: {exc}; fix it, then run init again") from None
    servers = doc.get(file.key, {})
    if not isinstance(servers, dict):
        raise SettingsShapeError(f"{file.key} is not a table")
    if SERVER_NAME in servers:
        return current
    block = f'[{file.key}.{SERVER_NAME}]\ncommand = {_toml_string(program)}\nargs = ["mcp"]\n'
    prefix = current if not current or current.endswith("\n") else current + "\n"
    new = prefix + ("\n" if prefix.strip() else "") + block
    try:
        tomllib.loads(new)
    except tomllib.TOMLDecodeError:
        # mcp_servers written inline (`mcp_servers = {...}`) cannot take a table after it.
        raise SettingsShapeError(
            f"its {file.key} cannot take a [{file.key}.{SERVER_NAME}] table as written: "
            f"add the server with `codex mcp add {SERVER_NAME} -- {program} mcp`"
        ) from None
    return new


def mcp_paths(runtimes: Sequence[str]) -> list[McpFile]:
    """The MCP files of ``runtimes`` (by name), each once."""
    return list(dict.fromkeys(MCP_FILES[n] for n in runtimes if n in MCP_FILES))


def plan_mcp(
    current: Mapping[str, str | None],
    changes: Sequence[FileChange],
    files: Sequence[McpFile],
    program: str = PROGRAM,
) -> list[FileChange]:
    """``changes`` (``setup.plan_init``'s) with the server added to each of ``files``, on top
    of what ``changes`` already does to that file (Gemini's settings hold its hook too)."""
    out = list(changes)
    for file in files:
        at = next((i for i, c in enumerate(out) if c.path == file.path), None)
        base = out[at].new if at is not None else current.get(file.path)
        try:
            new = mcp_config_with(base, file, program)
        except SettingsShapeError as exc:
            raise SettingsShapeError(str(exc), file.path) from None
        if new == base:
            continue
        what = f"the MCP server: {program} mcp"
        if at is None:
            out.append(FileChange(file.path, base, new, what))
        else:
            earlier = out[at]
            out[at] = FileChange(file.path, earlier.old, new, earlier.what, earlier.runtime)
    return out
