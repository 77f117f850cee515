"""`postflightd init`: the packaged user unit `--systemd` installs where the user manager reads
it, the exact enable command, and the warning for a root PrivateTmp hides; what init finds in
a project before it writes (a workflow that post-flights by hand, errors.json's form, files
left unapplied, postflightd missing from PATH) and the mode it chooses."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.agent_system import (
    HAND_WORKFLOW,
    RESEARCH_SKILL,
    RESEARCHER_AGENT,
    SUBAGENT_POSTFLIGHT_HOOK,
)
from helpers.paths import REPO, copy_example
from postflightd.cli import main
from postflightd.config import load_config
from postflightd.project.setup import systemd_escape_path
from postflightd.project.units import packaged_unit

SCRIPT = Path(sys.executable).with_name("postflightd")


def _root(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "specs").mkdir(parents=True)
    return root


def _unit_path() -> Path:
    return Path(os.environ["XDG_CONFIG_HOME"]) / "systemd" / "user" / "postflightd@.service"


def test_systemd_installs_the_packaged_unit_and_prints_the_enable_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _root(tmp_path)
    assert main(["init", str(root), "--systemd", "--yes"]) == 0
    out = capsys.readouterr().out
    unit_path = _unit_path()
    assert unit_path.read_text(encoding="utf-8") == packaged_unit("postflightd@.service")
    assert f"+++ {unit_path}" in out  # shown as a diff before it is written
    assert f"created {unit_path}" in out
    enable = f"systemctl --user enable --now 'postflightd@{systemd_escape_path(str(root))}.service'"
    assert enable in out
    assert f"  postflightd init --systemd {root}\n" not in out  # installed already

    # A second run: the project and the unit are set up, nothing is written, and only that
    # is said.
    assert main(["init", str(root), "--systemd", "--yes"]) == 0
    assert capsys.readouterr().out == f"{root}: already set up for postflightd; nothing to change\n"


def test_without_systemd_no_unit_is_written_nor_spoken_of(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _root(tmp_path)
    assert main(["init", str(root), "--yes"]) == 0
    captured = capsys.readouterr()
    assert not _unit_path().exists()
    assert "systemctl" not in captured.out
    assert str(_unit_path()) not in captured.out
    assert "PrivateTmp" not in captured.err


def test_without_yes_or_a_terminal_the_unit_is_shown_but_not_written(tmp_path: Path) -> None:
    """The real console script, stdin a pipe: the diff, exit 1, nothing written."""
    root = _root(tmp_path)
    run = subprocess.run(
        [str(SCRIPT), "init", str(root), "--systemd"],
        input="",
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert run.returncode == 1, run.stderr
    assert "+ExecStart=%h/.local/bin/postflightd watch --log-format json %f" in run.stdout
    assert not _unit_path().exists()


def test_a_unit_the_user_changed_is_left_as_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _root(tmp_path)
    unit_path = _unit_path()
    unit_path.parent.mkdir(parents=True)
    mine = packaged_unit("postflightd@.service").replace("RestartSec=2", "RestartSec=5")
    unit_path.write_text(mine, encoding="utf-8")
    assert main(["init", str(root), "--systemd", "--yes"]) == 0
    assert "left as it is" in capsys.readouterr().out
    assert unit_path.read_text(encoding="utf-8") == mine


def test_a_root_under_tmp_is_warned_about_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _root(tmp_path)
    assert str(root).startswith("/tmp/"), "pytest's temporary directories are under /tmp here"
    assert main(["init", str(root), "--systemd", "--yes"]) == 0
    err = capsys.readouterr().err
    assert f"warning: {root} is under /tmp" in err
    assert "PrivateTmp=yes" in err
    assert "PrivateTmp=no" in err
    assert "Traceback" not in err


def test_no_warning_when_the_installed_unit_turns_private_tmp_off(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _root(tmp_path)
    unit_path = _unit_path()
    unit_path.parent.mkdir(parents=True)
    unit_path.write_text(
        packaged_unit("postflightd@.service").replace("PrivateTmp=yes", "PrivateTmp=no"),
        encoding="utf-8",
    )
    assert main(["init", str(root), "--systemd", "--yes"]) == 0
    assert "PrivateTmp" not in capsys.readouterr().err


# --- init looks before it writes: a workflow that post-flights by hand --------------------

EXAMPLE = REPO / "examples" / "project"

NOT_ON_PATH = "postflightd is not on PATH"
ONE_LINE = "{root}: already set up for postflightd; nothing to change\n"


def _grown(tmp_path: Path, files: dict[str, str], errors: object = None) -> Path:
    """The example project, with the workflow ``files`` and an errors.json."""
    root = tmp_path / "proj"
    copy_example(root)
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    if errors is not None:
        (root / "specs" / "errors.json").write_text(json.dumps(errors), encoding="utf-8")
    return root


def test_a_workflow_that_post_flights_by_hand_gets_validator_mode_and_is_told_what_to_remove(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    envelope = {"errors": [{"id": "err_1", "type": "timeout", "message": "subagent timed out"}]}
    root = _grown(tmp_path, HAND_WORKFLOW, errors=envelope)
    assert main(["init", str(root), "--yes", "--runtime", "claude"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "Stop hook for: Claude Code (as --runtime asks)"
    assert lines[1].startswith(
        "A workflow here post-flights by hand: 4 files read or delete .return-meta.json "
        "(1 under .claude/hooks/, 2 under .claude/skills/ and 1 under .opencode/"
    ), lines[1]
    assert lines[2].startswith("So the stop hook only validates ([hook] apply = false)")
    assert "specs/errors.json: an envelope object, its records in an `errors` array." in lines
    assert any(
        line.startswith(
            "2 metadata files with a final status never applied "
            "(specs/259_prove_completeness/.return-meta.json, ...)"
        )
        for line in lines
    ), out
    # The summary comes before the diff, and each hunk names what it adds.
    first_hunk = next(i for i, line in enumerate(lines) if line.startswith("--- "))
    assert first_hunk <= 6
    assert "@@ -0,0 +1,3 @@ the .gitignore lines: postflightd's lock and pid files" in lines
    assert "@@ -0,0 +1,24 @@ Claude Code's stop hook on Stop and SubagentStop" in lines
    assert any(
        line.endswith("@@ the configuration: [hook] apply = false, every other key commented out")
        for line in lines
    )
    # What to remove before the hook may apply, by path; the subagent that only writes its
    # file is not among them.
    listed = lines[lines.index(next(x for x in lines if x.startswith("Before setting"))) + 1 :]
    assert listed[:4] == [
        "  .claude/hooks/subagent-postflight.sh:6 (reads)",
        "  .claude/skills/plan/SKILL.md:16 (reads and deletes)",
        "  .claude/skills/research/SKILL.md:16 (reads and deletes)",
        "  .opencode/command/plan.md:4 (reads and deletes)",
    ]
    assert "researcher.md" not in out
    config = load_config(None, [root])
    assert config.hook.apply is False
    settings = json.loads((root / ".claude" / "settings.json").read_text(encoding="utf-8"))
    assert settings["hooks"]["SubagentStop"][0]["hooks"][0]["command"] == "postflightd hook claude"
    assert (root / "specs" / "errors.json").read_text(encoding="utf-8") == json.dumps(envelope)

    # A re-run with nothing to change says only that.
    assert main(["init", str(root), "--yes", "--runtime", "claude"]) == 0
    assert capsys.readouterr().out == ONE_LINE.format(root=root)


def test_each_hunk_merged_into_existing_settings_names_its_own_event(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Settings that already hold a SubagentStop hook and other events: the hook joins
    SubagentStop in one hunk and makes Stop in another, and each hunk says which it is."""
    existing = {
        "hooks": {
            "SubagentStop": [
                {"hooks": [{"type": "command", "command": "bash .claude/hooks/post.sh"}]}
            ],
            "PreToolUse": [
                {"matcher": "Bash", "hooks": [{"type": "command", "command": "echo hi"}]}
            ],
        }
    }
    root = _grown(tmp_path, {".claude/settings.json": json.dumps(existing, indent=2) + "\n"})
    assert main(["init", str(root), "--yes", "--runtime", "claude"]) == 0
    out = capsys.readouterr().out
    headers = [line for line in out.splitlines() if line.startswith("@@ ")]
    named = [h.split(" @@ ", 1)[1] for h in headers if "stop hook" in h]
    assert named == ["Claude Code's stop hook on SubagentStop", "Claude Code's stop hook on Stop"]
    settings = json.loads((root / ".claude" / "settings.json").read_text(encoding="utf-8"))
    assert [h["hooks"][0]["command"] for h in settings["hooks"]["SubagentStop"]] == [
        "bash .claude/hooks/post.sh",
        "postflightd hook claude",
    ]


def test_a_project_whose_workflow_only_writes_its_files_gets_apply_mode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _grown(
        tmp_path,
        {".claude/agents/researcher.md": RESEARCHER_AGENT},
        errors=[{"id": "err_1", "type": "timeout"}],
    )
    assert main(["init", str(root), "--yes"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == (
        "Stop hook for: Claude Code (.claude/ found; `--runtime NAME` chooses others)"
    )
    assert lines[1].startswith(
        "No skill, command or hook script here reads or deletes .return-meta.json, so the stop "
        "hook applies ([hook] apply = true)"
    )
    assert "specs/errors.json: a bare array of error records." in lines
    assert "Before setting" not in out
    assert "# apply = true" in (root / ".postflightd.toml").read_text(encoding="utf-8")
    assert load_config(None, [root]).hook.apply is True
    assert main(["init", str(root), "--yes"]) == 0
    assert capsys.readouterr().out == ONE_LINE.format(root=root)


def test_a_configuration_that_lets_the_hook_apply_beside_a_hand_postflight_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """init never rewrites a configuration: it says what to set, every time it runs."""
    root = _grown(tmp_path, HAND_WORKFLOW)
    (root / ".postflightd.toml").write_text("[hook]\napply = true\n", encoding="utf-8")
    for _ in range(2):
        assert main(["init", str(root), "--yes", "--runtime", "claude"]) == 0
        out = capsys.readouterr().out
        assert "But .postflightd.toml lets the hook apply: set `[hook] apply = false`" in out
        assert "  .claude/skills/research/SKILL.md:16 (reads and deletes)" in out
    assert (root / ".postflightd.toml").read_text(encoding="utf-8") == "[hook]\napply = true\n"


def test_without_postflightd_on_path_the_hook_runs_the_console_script_by_its_path(
    tmp_path: Path,
) -> None:
    """The real console script, stdin not a terminal, PATH without postflightd: the hook's
    command is the script's absolute path, and the output says why."""
    root = _grown(tmp_path, {})
    env = {**os.environ, "PATH": "/usr/bin:/bin"}
    assert shutil.which("postflightd", path=env["PATH"]) is None
    args = [str(SCRIPT), "init", str(root), "--yes", "--runtime", "codex"]
    run = subprocess.run(
        args, input="", capture_output=True, text=True, check=False, timeout=60, env=env
    )
    assert run.returncode == 0, run.stderr
    script = SCRIPT.resolve()
    assert f"{NOT_ON_PATH}: the hook runs it by its path, {script}." in run.stdout
    hooks = json.loads((root / ".codex" / "hooks.json").read_text(encoding="utf-8"))
    command = hooks["hooks"]["Stop"][0]["hooks"][0]["command"]
    assert shlex.split(command) == [str(script), "hook", "codex"]
    # The runtime can run it: an empty stop answers the runtime's "nothing to do".
    answer = subprocess.run(
        shlex.split(command),
        input=json.dumps({"hook_event_name": "Stop", "cwd": str(root), "session_id": "s"}),
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env=env,
        cwd=root,
    )
    assert answer.returncode == 0, answer.stderr
    again = subprocess.run(
        args, input="", capture_output=True, text=True, check=False, timeout=60, env=env
    )
    assert again.returncode == 0, again.stderr
    assert again.stdout == ONE_LINE.format(root=root)


def test_hostile_workflow_trees_are_looked_at_within_bounds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A symlinked skills directory, a FIFO named SKILL.md, a 50 MB file, a file that is not
    UTF-8 and 10,000 files: init never follows, hangs, reads them whole or fails."""
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "research").mkdir(parents=True)
    (elsewhere / "research" / "SKILL.md").write_text(RESEARCH_SKILL, encoding="utf-8")
    root = _grown(tmp_path, {})
    (root / ".claude").mkdir()
    (root / ".claude" / "skills").symlink_to(elsewhere, target_is_directory=True)
    assert main(["init", str(root), "--yes"]) == 0
    out = capsys.readouterr().out
    assert "No skill, command or hook script here reads" in out  # the link was not followed
    assert load_config(None, [root]).hook.apply is True

    root = _grown(tmp_path / "2", {})
    agents = root / ".claude" / "agents"
    agents.mkdir(parents=True)
    os.mkfifo(agents / "SKILL.md")
    with (agents / "huge.md").open("wb") as f:
        f.write(b"rm -f specs/1_x/.return-meta.json\n")
        f.truncate(50 * 1024 * 1024)
    (agents / "latin1.md").write_bytes(b"caf\xe9: jq -r .status specs/1_x/.return-meta.json\n")
    many = root / ".opencode" / "many"
    many.mkdir(parents=True)
    for i in range(10_000):
        (many / f"{i:05}.md").write_bytes(b"notes\n")
    (many / "zz-postflight.sh").write_text(SUBAGENT_POSTFLIGHT_HOOK, encoding="utf-8")
    assert main(["init", str(root), "--yes", "--runtime", "claude"]) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    lines = captured.out.splitlines()
    assert lines[1].startswith("A workflow here post-flights by hand: 1 file"), lines[1]
    assert "  .claude/agents/latin1.md:1 (reads)" in lines
    assert (
        "The look at the workflow stopped after 2,000 files; 1 larger than 256 KiB not read: "
        "the rest was not read."
    ) in lines
    assert "zz-postflight.sh" not in captured.out  # past the cap
    assert load_config(None, [root]).hook.apply is False


def test_copilots_file_is_not_written_where_claude_codes_hook_serves_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """GitHub Copilot CLI runs .claude/settings.json's Stop and SubagentStop hooks as well as
    its own files: with Claude Code's hook chosen too, or already set up, a Copilot file would
    run postflightd twice at every stop, so init leaves it out and says why."""
    copilot = Path(".github/hooks/postflightd.json")
    both = _root(tmp_path / "both")
    assert main(["init", str(both), "--yes", "--runtime", "claude", "--runtime", "copilot"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Stop hook for: Claude Code, GitHub Copilot CLI (as --runtime asks)\n")
    assert f"{copilot}: not written: GitHub Copilot CLI also runs the Stop and" in out
    assert "which will hold postflightd's" in out
    assert (both / ".claude" / "settings.json").is_file()
    assert not (both / copilot).exists()

    claude_first = _root(tmp_path / "claude-first")
    assert main(["init", str(claude_first), "--yes", "--runtime", "claude"]) == 0
    capsys.readouterr()
    assert main(["init", str(claude_first), "--yes", "--runtime", "copilot"]) == 0
    out = capsys.readouterr().out
    assert out == (
        f"{claude_first}: already set up for postflightd; nothing to change\n"
        f"{copilot}: not written: GitHub Copilot CLI also runs the Stop and SubagentStop hooks "
        "of .claude/settings.json, which holds postflightd's; a file of its own would run "
        "postflightd twice at every stop\n"
    )
    assert not (claude_first / copilot).exists()

    alone = _root(tmp_path / "alone")
    assert main(["init", str(alone), "--yes", "--runtime", "copilot"]) == 0
    assert "not written" not in capsys.readouterr().out
    assert (alone / copilot).is_file()


#: The CLI with a stdout whose reader leaves (`| head`) once init starts saying what it wrote.
_READER_LEAVES = """
import io, sys
from postflightd.cli import main

class Reader(io.TextIOBase):
    def writable(self): return True
    def write(self, text):
        if text.startswith(("created ", "updated ")):
            raise BrokenPipeError(32, "Broken pipe")
        return len(text)

sys.stdout = Reader()
sys.exit(main(sys.argv[1:]))
"""


def test_a_reader_that_leaves_cannot_cut_the_set_up_in_half(tmp_path: Path) -> None:
    root = _root(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", _READER_LEAVES, "init", str(root), "--yes"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 141, done.stderr  # the report was cut short, as for `| head`
    assert "Traceback" not in done.stderr
    # The hook and its configuration both, not the first file alone.
    for name in (".gitignore", ".claude/settings.json", ".postflightd.toml"):
        assert (root / name).is_file(), name
