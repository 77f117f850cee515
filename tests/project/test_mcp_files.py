"""`postflightd init --mcp`: `postflightd mcp` in each runtime's project MCP configuration, merged
with what the file holds, shown as a diff, and a second run changing nothing."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from postflightd.cli import main
from postflightd.project.hook_files import PROGRAM

#: The file each runtime reads its project's MCP servers from, and the entry's place in it.
WHERE = {
    "claude": (".mcp.json", "mcpServers"),
    "copilot": (".mcp.json", "mcpServers"),
    "gemini": (".gemini/settings.json", "mcpServers"),
    "opencode": ("opencode.json", "mcp"),
    "cursor": (".cursor/mcp.json", "mcpServers"),
}


def _root(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "specs").mkdir(parents=True)
    return root


def _init(root: Path, capsys: pytest.CaptureFixture[str], *runtimes: str) -> tuple[int, str]:
    args = [a for r in runtimes for a in ("--runtime", r)]
    code = main(["init", "--yes", "--mcp", *args, str(root)])
    return code, capsys.readouterr().out


def _program(entry: dict[str, object]) -> str:
    command = entry["command"]
    return str(command[0] if isinstance(command, list) else command)


@pytest.mark.parametrize("runtime", sorted(WHERE))
def test_init_mcp_registers_the_server_where_the_runtime_reads_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], runtime: str
) -> None:
    root = _root(tmp_path)
    path, key = WHERE[runtime]
    code, out = _init(root, capsys, runtime)
    assert code == 0
    assert f"+++ b/{path}" in out  # shown as a diff
    entry = json.loads((root / path).read_text("utf-8"))[key]["postflightd"]
    assert _program(entry).endswith(PROGRAM)
    if runtime == "opencode":
        assert entry["command"][1:] == ["mcp"] and entry["type"] == "local"
    else:
        assert entry["args"] == ["mcp"]
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    code, out = _init(root, capsys, runtime)
    assert code == 0 and "nothing to change" in out
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before


def test_init_mcp_for_codex_appends_a_table_to_its_project_config_keeping_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _root(tmp_path)
    (root / ".codex").mkdir()
    mine = '# my settings\nmodel = "o4"\n\n[mcp_servers.other]\ncommand = "other"\n'
    (root / ".codex" / "config.toml").write_text(mine, "utf-8")
    code, out = _init(root, capsys, "codex")
    assert code == 0 and "+++ b/.codex/config.toml" in out
    text = (root / ".codex" / "config.toml").read_text("utf-8")
    assert text.startswith(mine)
    servers = tomllib.loads(text)["mcp_servers"]
    assert servers["other"] == {"command": "other"}
    assert servers["postflightd"]["args"] == ["mcp"]
    assert _init(root, capsys, "codex")[1].startswith(f"{root}: already set up")
    assert (root / ".codex" / "config.toml").read_text("utf-8") == text


def test_init_mcp_keeps_every_key_and_a_server_of_the_same_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Merged as the hooks are: the user's servers and keys kept, and an entry already named
    postflightd is the user's, never rewritten."""
    root = _root(tmp_path)
    theirs = {"mcpServers": {"docs": {"command": "docs-server"}}, "other": [1, 2]}
    (root / ".mcp.json").write_text(json.dumps(theirs, indent=4) + "\n", "utf-8")
    (root / ".gemini").mkdir()
    own = {"mcpServers": {"postflightd": {"command": "/opt/pf/bin/postflightd", "args": ["mcp"]}}}
    (root / ".gemini" / "settings.json").write_text(json.dumps(own), "utf-8")
    code, _ = _init(root, capsys, "claude", "gemini")
    assert code == 0
    text = (root / ".mcp.json").read_text("utf-8")
    merged = json.loads(text)
    assert merged["other"] == [1, 2] and merged["mcpServers"]["docs"] == {"command": "docs-server"}
    assert "postflightd" in merged["mcpServers"]
    assert '\n    "mcpServers"' in text  # its own indentation kept
    gemini = json.loads((root / ".gemini" / "settings.json").read_text("utf-8"))
    assert gemini["mcpServers"] == own["mcpServers"]
    assert "AfterAgent" in gemini["hooks"]  # the hook and the server in one file


def test_init_mcp_refuses_a_file_it_cannot_merge_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _root(tmp_path)
    (root / ".mcp.json").write_text('{"mcpServers": []}', "utf-8")
    (root / ".codex").mkdir()
    (root / ".codex" / "config.toml").write_text("mcp_servers = { a = 1 }\n", "utf-8")
    assert main(["init", "--yes", "--mcp", "--runtime", "claude", str(root)]) == 2
    assert '"mcpServers" is not an object' in capsys.readouterr().err
    assert main(["init", "--yes", "--mcp", "--runtime", "codex", str(root)]) == 2
    assert "codex mcp add postflightd" in capsys.readouterr().err
    assert not (root / ".claude").exists() and not (root / ".codex" / "hooks.json").exists()


def test_init_without_mcp_writes_no_mcp_configuration(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _root(tmp_path)
    assert main(["init", "--yes", "--runtime", "claude", str(root)]) == 0
    capsys.readouterr()
    assert not (root / ".mcp.json").exists()
