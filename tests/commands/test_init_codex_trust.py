"""`postflightd init --runtime codex` says whether Codex trusts the project and its stop hook:
Codex skips an untrusted hook without a word (docs/hooks/codex.md). It reads the user's
Codex configuration and never writes it."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from helpers.documents import task_entry
from helpers.project import project
from postflightd.cli import main


def added(out: str) -> str:
    """The config.toml lines init's output tells the user to add (indented by four)."""
    return "\n".join(line.strip() for line in out.splitlines() if line.startswith("    "))


def test_init_says_the_hook_is_untrusted_and_how_then_that_it_is_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = project(tmp_path / "proj", [task_entry(259, "prove_completeness")], todo=True)
    home = tmp_path / "codex-home"
    home.mkdir()
    config = home / "config.toml"
    mine = 'model = "gpt-5.5"\n\n'
    config.write_text(mine, encoding="utf-8")
    monkeypatch.setenv("CODEX_HOME", str(home))
    assert main(["init", "--yes", "--runtime", "codex", str(root)]) == 0
    out = capsys.readouterr().out
    assert "Codex does not trust this project yet" in out
    assert "Codex has not trusted the stop hook yet (Stop, SubagentStop)" in out
    assert "codex exec --dangerously-bypass-hook-trust" in out
    assert "/hooks" in out
    assert config.read_text(encoding="utf-8") == mine  # read, never written
    # The lines it prints are what the user adds (tests/runtimes/test_codex.py shows Codex
    # then runs the hook).
    entries = added(out)
    hooks = str(root / ".codex" / "hooks.json")
    doc = tomllib.loads(mine + entries)
    assert doc["projects"][str(root)] == {"trust_level": "trusted"}
    for event in ("stop", "subagent_stop"):
        assert doc["hooks"]["state"][f"{hooks}:{event}:0:0"]["trusted_hash"].startswith("sha256:")
    config.write_text(mine + entries + "\n", encoding="utf-8")
    (root / ".codex" / "hooks.json").unlink()  # init writes it again, then reads the trust
    assert main(["init", "--yes", "--runtime", "codex", str(root)]) == 0
    again = capsys.readouterr().out
    assert "Codex trusts this project and its stop hook" in again
    assert "has not trusted" not in again and "does not trust" not in again


def test_a_changed_hook_is_untrusted_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A trusted_hash of another definition (the hook's timeout changed): not trusted."""
    root = project(tmp_path / "proj", [task_entry(259, "prove_completeness")], todo=True)
    home = tmp_path / "codex-home"
    home.mkdir()
    monkeypatch.setenv("CODEX_HOME", str(home))
    assert main(["init", "--yes", "--runtime", "codex", str(root)]) == 0
    out = capsys.readouterr().out
    entries = added(out)
    stale = entries.replace('trusted_hash = "sha256:', 'trusted_hash = "sha256:0', 1)
    (home / "config.toml").write_text(stale + "\n", encoding="utf-8")
    (root / ".codex" / "hooks.json").unlink()
    assert main(["init", "--yes", "--runtime", "codex", str(root)]) == 0
    again = capsys.readouterr().out
    assert "Codex has not trusted the stop hook yet (Stop)" in again
    assert "does not trust this project" not in again


@pytest.mark.parametrize(
    "content",
    [
        b'model = "gpt-5.5"\n[projects."/x"\ntrust_level = ',  # truncated TOML
        b"\xff\xfe\x00binary",  # not UTF-8
        b"[hooks]\nstate = 3\n",  # the table of another shape
        b"x" * (2 * 1024 * 1024),  # past the bound read
        None,  # a directory where the file should be
    ],
)
def test_a_codex_config_that_cannot_be_read_is_untrusted_never_a_crash(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    content: bytes | None,
) -> None:
    root = project(tmp_path / "proj", [task_entry(259, "prove_completeness")], todo=True)
    home = tmp_path / "codex-home"
    home.mkdir()
    config = home / "config.toml"
    if content is None:
        config.mkdir()
    else:
        config.write_bytes(content)
    monkeypatch.setenv("CODEX_HOME", str(home))
    assert main(["init", "--yes", "--runtime", "codex", str(root)]) == 0
    captured = capsys.readouterr()
    assert "Codex does not trust this project yet" in captured.out
    assert "Traceback" not in captured.out + captured.err
    if content is not None:
        assert config.read_bytes() == content  # read, never written
