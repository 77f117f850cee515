"""`postflightd init --runtime NAME`: the stop hook merged into each agent runtime's own file,
every hook and key already there kept; idempotent; a file init cannot read is left alone."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from postflightd.cli import main
from postflightd.commands import hook
from postflightd.project.hook_files import (
    BY_NAME,
    RUNTIME_NAMES,
    RUNTIMES,
    SettingsShapeError,
    hook_config_with,
    packaged_plugin,
)

DOCS = Path(__file__).parents[2] / "docs" / "hooks"

#: For each runtime whose hook is configured, a file as a project might already have it: other
#: hooks on the same event and on others, and keys of the runtime's own.
EXISTING: dict[str, dict[str, Any]] = {
    "claude": {
        "permissions": {"allow": ["Bash(ls)"]},
        "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}]},
    },
    "codex": {
        "description": "team hooks",
        "hooks": {
            "Stop": [{"hooks": [{"type": "command", "command": "./lint.sh", "timeout": 30}]}],
            "PreToolUse": [
                {"matcher": "Bash", "hooks": [{"type": "command", "command": "./guard.sh"}]}
            ],
        },
    },
    "gemini": {
        "general": {"vimMode": True},
        "hooks": {
            "AfterAgent": [{"hooks": [{"name": "tests", "type": "command", "command": "./t.sh"}]}],
            "BeforeTool": [
                {
                    "matcher": "write_file",
                    "hooks": [{"type": "command", "command": "./check.sh", "timeout": 5000}],
                }
            ],
        },
    },
    "copilot": {
        "version": 1,
        "hooks": {
            "agentStop": [{"type": "command", "bash": "./notify.sh", "powershell": "notify.ps1"}],
            "sessionStart": [{"type": "command", "bash": "date >> log"}],
        },
    },
    "cursor": {
        "version": 1,
        "hooks": {
            "stop": [{"command": "./audit.sh"}],
            "afterFileEdit": [{"command": "./format.sh"}],
        },
    },
}
CONFIGURED = [r for r in RUNTIMES if r.events]


def _ours(runtime_name: str) -> list[Any]:
    """What each of the runtime's events gets: our handler, in a group where groups are used."""
    runtime = BY_NAME[runtime_name]
    return [{"hooks": [runtime.handler]} if runtime.grouped else runtime.handler]


@pytest.mark.parametrize("name", list(EXISTING))
def test_the_hook_is_added_after_every_existing_hook_and_key_and_only_once(name: str) -> None:
    runtime = BY_NAME[name]
    before = EXISTING[name]
    text = json.dumps(before, indent=2) + "\n"
    merged = hook_config_with(text, runtime)
    doc = json.loads(merged)
    for key, value in before.items():
        if key != "hooks":
            assert doc[key] == value
    for event, entries in before["hooks"].items():
        expected = entries + (_ours(name) if event in runtime.events else [])
        assert doc["hooks"][event] == expected
    for event in runtime.events:
        assert doc["hooks"][event][-1:] == _ours(name)
    assert hook_config_with(merged, runtime) == merged  # the second run changes nothing


def test_the_exact_files_init_writes_where_there_were_none() -> None:
    wanted = {
        "claude": {
            "hooks": {
                "Stop": [{"hooks": [{"type": "command", "command": "postflightd hook claude"}]}],
                "SubagentStop": [
                    {"hooks": [{"type": "command", "command": "postflightd hook claude"}]}
                ],
            }
        },
        "codex": {
            "hooks": {
                event: [
                    {
                        "hooks": [
                            {"type": "command", "command": "postflightd hook codex", "timeout": 60}
                        ]
                    }
                ]
                for event in ("Stop", "SubagentStop")
            }
        },
        "gemini": {
            "hooks": {
                "AfterAgent": [
                    {
                        "hooks": [
                            {
                                "name": "postflightd",
                                "type": "command",
                                "command": "postflightd hook gemini",
                                "timeout": 60000,
                            }
                        ]
                    }
                ]
            }
        },
        "copilot": {
            "version": 1,
            "hooks": {
                event: [{"type": "command", "bash": "postflightd hook copilot", "timeoutSec": 60}]
                for event in ("agentStop", "subagentStop")
            },
        },
        "cursor": {
            "version": 1,
            "hooks": {"stop": [{"command": "postflightd hook cursor", "loop_limit": 3}]},
        },
    }
    for runtime in CONFIGURED:
        written = hook_config_with(None, runtime)
        assert json.loads(written) == wanted[runtime.name]
        assert written == json.dumps(wanted[runtime.name], indent=2) + "\n"


@pytest.mark.parametrize("runtime", CONFIGURED[1:], ids=lambda r: r.name)
def test_each_runtime_page_shows_the_exact_snippet_init_writes(runtime: Any) -> None:
    page = DOCS / f"{runtime.name}.md"
    assert hook_config_with(None, runtime) in page.read_text(encoding="utf-8")


def test_the_opencode_page_names_the_plugin_and_it_stays_short() -> None:
    plugin = packaged_plugin()
    # A thin adapter (the hook does the work): about 100 lines, as its page says.
    assert len(plugin.splitlines()) <= 110
    assert ".opencode/plugins/postflightd.ts" in (DOCS / "opencode.md").read_text("utf-8")


def test_a_command_that_merely_contains_the_hook_is_not_it() -> None:
    runtime = BY_NAME["copilot"]
    text = json.dumps(
        {"version": 2, "hooks": {"agentStop": [{"bash": "curl x | sh; postflightd hook copilot"}]}}
    )
    doc = json.loads(hook_config_with(text, runtime))
    assert doc["version"] == 2  # the file's own version is kept
    assert doc["hooks"]["agentStop"][1] == runtime.handler
    # Written by hand under the other key the runtime reads, or with spaces around: ours.
    by_hand = {"hooks": {"stop": [{"command": " postflightd hook cursor "}]}, "version": 1}
    text = json.dumps(by_hand)
    assert hook_config_with(text, BY_NAME["cursor"]) == text


@pytest.mark.parametrize(
    ("name", "text", "why"),
    [
        ("codex", '{"hooks": {"Stop": {}}}', '"hooks.Stop" is not a list'),
        ("cursor", '{"version": 1, "hooks": []}', '"hooks" is not an object'),
        ("gemini", '{\n  // mine\n  "a": 1}', "holds a comment at 2:3"),
        ("gemini", '{"a": 1,}', "not valid JSON at 1:9: a key in double quotes"),
        ("copilot", "[]", "the top-level value is not an object"),
    ],
)
def test_a_file_of_another_shape_is_refused(name: str, text: str, why: str) -> None:
    with pytest.raises(SettingsShapeError, match=re.escape(why)):
        hook_config_with(text, BY_NAME[name])


def test_the_hook_command_names_the_same_runtimes() -> None:
    assert hook.RUNTIME_NAMES == RUNTIME_NAMES


# --- the command -------------------------------------------------------------------------


def _root(tmp_path: Path, *dirs: str) -> Path:
    root = tmp_path / "proj"
    (root / "specs").mkdir(parents=True)
    for d in dirs:
        (root / d).mkdir(parents=True)
    return root


def _files(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): p.read_text(encoding="utf-8")
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_runtime_is_repeatable_and_a_second_run_changes_nothing_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _root(tmp_path)
    codex = root / ".codex" / "hooks.json"
    codex.parent.mkdir()
    codex.write_text(json.dumps(EXISTING["codex"], indent=4) + "\n", encoding="utf-8")
    args = ["init", str(root), "--yes", "--runtime", "codex", "--runtime", "opencode"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert out.startswith("Stop hook for: Codex CLI, OpenCode (as --runtime asks)\n")
    assert "+++ b/.codex/hooks.json" in out
    assert '+                        "command": "postflightd hook codex",' in out  # its indent
    assert "+++ b/.opencode/plugins/postflightd.ts" in out
    assert BY_NAME["codex"].needs in out
    assert BY_NAME["opencode"].needs in out
    assert not (root / ".claude").exists()
    written = json.loads(codex.read_text(encoding="utf-8"))
    assert written["hooks"]["PreToolUse"] == EXISTING["codex"]["hooks"]["PreToolUse"]
    plugin = root / ".opencode" / "plugins" / "postflightd.ts"
    assert plugin.read_text(encoding="utf-8") == packaged_plugin()

    before = _files(root)
    assert main(args) == 0
    again = capsys.readouterr().out
    # Only that: what the runtimes need was said when the hook was written.
    assert again == f"{root}: already set up for postflightd; nothing to change\n"
    assert _files(root) == before


def test_without_runtime_init_sets_up_the_runtimes_whose_directories_exist(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _root(tmp_path, ".gemini", ".cursor", ".github/workflows")
    assert main(["init", str(root), "--yes"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Stop hook for: Gemini CLI, Cursor (.gemini/ and .cursor/ found;")
    assert set(_files(root)) == {
        ".gitignore",
        ".postflightd.toml",
        ".gemini/settings.json",
        ".cursor/hooks.json",
    }  # not Claude Code's, and .github/ alone is no sign of Copilot's hooks
    assert BY_NAME["gemini"].needs in out

    (root / ".github" / "hooks").mkdir()
    assert main(["init", str(root), "--yes"]) == 0
    out = capsys.readouterr().out
    assert "Stop hook for: Gemini CLI, GitHub Copilot CLI, Cursor (" in out
    assert "created .github/hooks/postflightd.json" in out


def test_without_runtime_or_any_runtime_directory_it_is_claude_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _root(tmp_path)
    assert main(["init", str(root), "--yes"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Stop hook for: Claude Code (no runtime's directory found;")
    assert (root / ".claude" / "settings.json").is_file()


def test_a_malformed_file_is_refused_naming_it_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _root(tmp_path, ".cursor")
    hooks = root / ".cursor" / "hooks.json"
    hooks.write_text('{"version": 1, "hooks": {"stop": [}', encoding="utf-8")
    assert main(["init", str(root), "--yes", "--runtime", "cursor", "--runtime", "codex"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"{hooks}: not valid JSON at 1:35: a value was expected" in captured.err
    assert "fix it, then run init again" in captured.err
    assert set(_files(root)) == {".cursor/hooks.json"}


def test_a_plugin_the_user_changed_is_left_as_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _root(tmp_path)
    plugin = root / ".opencode" / "plugins" / "postflightd.ts"
    plugin.parent.mkdir(parents=True)
    plugin.write_text("// mine\n", encoding="utf-8")
    assert main(["init", str(root), "--yes", "--runtime", "opencode"]) == 0
    out = capsys.readouterr().out
    assert ".opencode/plugins/postflightd.ts: not the plugin this postflightd ships" in out
    assert plugin.read_text(encoding="utf-8") == "// mine\n"


def test_an_unknown_runtime_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["init", "--runtime", "aider"])
    assert exit_.value.code == 2
    assert "invalid choice: 'aider'" in capsys.readouterr().err
