"""`postflightd mcp` inside the real Claude Code (the release pinned in tests/runtimes/pinned.txt),
registered by `postflightd init --mcp` as a user would: the scripted model calls
`mcp__postflightd__check_metadata` with the document it means to write, and the findings, each
with its fix, are in its next request; it then writes the fixed file, which the hook applies.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.documents import researched_doc, task_entry
from helpers.model_server import ToolCall, Turn, model_server, say, write
from helpers.needs import require_module
from helpers.project import META, project, task_status
from helpers.runtime_project import init, run_agent, sandbox

pytestmark = pytest.mark.slow

OWN = "259_prove_completeness"
TOOLS = "Write,Edit,Bash,Read,mcp__postflightd__check_metadata"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    require_module("mcp", "postflightd mcp runs on the [mcp] extra")
    root = project(tmp_path / "proj", [task_entry(259, "prove_completeness")], artifacts=[259])
    init(root, "claude", "--mcp")
    assert "postflightd" in json.loads((root / ".mcp.json").read_text("utf-8"))["mcpServers"]
    return root


def test_the_agent_checks_its_document_through_the_mcp_server_before_writing_it(
    claude_code: Path, root: Path
) -> None:
    wrong = researched_doc(OWN)
    wrong["status"] = "research-done"
    own = root / "specs" / OWN / META
    check = ToolCall(
        "mcp__postflightd__check_metadata", {"task": 259, "document": json.dumps(wrong)}
    )
    script = [
        Turn(calls=[check]),
        write(str(own), json.dumps(researched_doc(OWN), indent=2)),
        say("Done."),
    ]
    box = sandbox(root, "claude")
    (box.home / ".claude").mkdir()
    # This user approved the project's servers of .mcp.json, as an interactive session asks
    # once (`claude -p` here starts them unapproved too).
    (box.home / ".claude" / "settings.json").write_text(
        json.dumps({"enableAllProjectMcpServers": True, "enabledMcpjsonServers": ["postflightd"]}),
        "utf-8",
    )
    with model_server(script) as server:
        env = box.env(
            ANTHROPIC_BASE_URL=server.url,
            ANTHROPIC_API_KEY="dummy",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            DISABLE_AUTOUPDATER="1",
            # Every tool offered in the first request, none deferred behind a tool search.
            ENABLE_TOOL_SEARCH="false",
            # The server's start-up on a loaded machine: mostly the MCP SDK's import.
            MCP_TIMEOUT="60000",
            # ... and the first turn held until the server is connected: `claude -p` holds it
            # only so long for servers still starting, and at load 10 on 2 cores the server
            # (its SDK's import) took longer, so its tools were missing from the first request.
            CLAUDE_CODE_MCP_STARTUP_WAIT_MS="60000",
        )
        argv = [str(claude_code), *("-p", "Research task 259.", "--allowedTools", TOOLS)]
        out = run_agent(argv, root, env, timeout=120)
    assert out.returncode == 0, (out.stdout, out.stderr)
    assert server.errors == [] and server.script == []
    requests = server.agent_requests()
    offered = {t.get("name") for t in requests[0].body.get("tools", [])}
    assert "mcp__postflightd__check_metadata" in offered, sorted(offered)
    # The tool's answer is in the model's next request: the finding and its fix.
    results = [
        block
        for message in requests[1].body["messages"]
        if message["role"] == "user" and isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]
    result = results[-1]
    assert result["type"] == "tool_result" and not result.get("is_error"), result
    text = json.dumps(result["content"])
    assert "PF202" in text
    assert task_status(root, 259) == "researched"
    assert not own.exists()
