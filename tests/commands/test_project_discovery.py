"""Which project a command works on: found from the current directory as git finds a
repository, or the ROOT given; a directory that is no project is a usage error (exit 2), never
an empty, green answer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.paths import copy_example
from helpers.project import project
from postflightd.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "project"
#: examples/project's files, and the one invalid file --select PF5 keeps
EXAMPLE_FILES = 5
PF502_FILE = "261_agent_registry/.return-meta.json"


def _example(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    copy_example(root)
    return root


@pytest.mark.parametrize("where", ["specs", "specs/259_prove_completeness", "src/deep/dir"])
def test_scan_from_a_subdirectory_scans_the_project_it_is_in(
    tmp_path: Path, where: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _example(tmp_path)
    (root / where).mkdir(parents=True, exist_ok=True)
    monkeypatch.chdir(root / where)
    assert main(["scan", "--format", "json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["roots"] == [str(root.resolve())]
    assert report["summary"]["files"] == EXAMPLE_FILES


@pytest.mark.parametrize("where", ["specs", "src/deep/dir"])
def test_status_and_verify_from_a_subdirectory_find_the_project(
    tmp_path: Path, where: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _example(tmp_path)
    (root / where).mkdir(parents=True, exist_ok=True)
    monkeypatch.chdir(root / where)
    assert main(["status", "--format", "json"]) == 1  # task 262's run is stuck
    statuses = json.loads(capsys.readouterr().out)["roots"]
    assert [s["root"] for s in statuses] == [str(root.resolve())]
    assert len(statuses[0]["runs"]) == EXAMPLE_FILES
    assert main(["verify", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["roots"] == [str(root.resolve())]


def test_the_configured_specs_dir_and_the_config_file_mark_the_root(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "repo"
    copy_example(root / "work" / "tasks", EXAMPLE / "specs")
    (root / ".postflightd.toml").write_text('specs_dir = "work/tasks"\n')
    (root / "work" / "tasks" / "src").mkdir()
    monkeypatch.chdir(root / "work" / "tasks" / "src")
    assert main(["scan", "--select", "PF5"]) == 1
    out = capsys.readouterr().out
    assert f"{PF502_FILE}:" in out
    assert f"\n{EXAMPLE_FILES} files: " in out


def test_a_user_configured_specs_dir_is_what_the_search_looks_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "repo"
    copy_example(root / "tasks", EXAMPLE / "specs")
    config = tmp_path / "user.toml"
    config.write_text('specs_dir = "tasks"\n')
    (root / "docs").mkdir()
    monkeypatch.chdir(root / "docs")
    assert main(["scan", "--config", str(config), "--format", "json"]) == 1
    assert json.loads(capsys.readouterr().out)["roots"] == [str(root.resolve())]


NO_ROOT_COMMANDS = [["scan"], ["status"], ["verify"], ["watch"]]


@pytest.mark.parametrize("argv", NO_ROOT_COMMANDS, ids=lambda a: a[0])
def test_no_project_up_to_the_filesystem_root_is_a_usage_error(
    tmp_path: Path,
    argv: list[str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    nowhere = tmp_path / "no" / "project" / "here"
    nowhere.mkdir(parents=True)
    monkeypatch.chdir(nowhere)
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "not inside a project" in captured.err
    assert "specs/ or .postflightd.toml" in captured.err


EXPLICIT_ROOT_COMMANDS = [
    ["scan", "{}"],
    ["status", "{}"],
    ["verify", "{}"],
    ["report", "{}"],
    ["history", "--root", "{}"],
]


@pytest.mark.parametrize("argv", EXPLICIT_ROOT_COMMANDS, ids=lambda a: a[0])
def test_an_explicit_root_that_is_no_project_is_a_usage_error(
    tmp_path: Path,
    argv: list[str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = _example(tmp_path)
    wrong = root / "src"  # inside a project, but not its root
    wrong.mkdir()
    monkeypatch.chdir(tmp_path)
    assert main(["scan", "--apply", "-q", str(root)]) == 1  # the journal has runs, of root
    capsys.readouterr()
    assert main([a.format(wrong) for a in argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"{wrong}" in captured.err
    assert "not a project root" in captured.err or "neither a project root" in captured.err


def test_a_project_with_only_its_config_file_is_a_root(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / ".postflightd.toml").write_text("")
    assert main(["scan", str(tmp_path)]) == 0
    assert "nothing to scan" in capsys.readouterr().err


def test_history_root_of_a_project_with_no_rows_yet_is_an_empty_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project(tmp_path, [])
    assert main(["history", "--root", str(tmp_path), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
