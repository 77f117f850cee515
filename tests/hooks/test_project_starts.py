"""Which project stopped: the runtime's own project (``$CLAUDE_PROJECT_DIR``,
``$GEMINI_PROJECT_DIR``, Cursor's ``workspace_roots``), never another project an agent ran
``cd`` into; the agent's ``cwd`` counts only within the runtime's project."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.documents import researched_doc
from helpers.hooks import OWN, TASKS, Hook, by_name, payload
from helpers.project import project, write_meta
from postflightd.commands.arguments import open_journal
from postflightd.config import Config, load_config
from postflightd.hooks.decision import StopRequest, Verdict, answer, project_starts
from postflightd.hooks.ownership import ownership

CLAUDE = by_name("claude", "stop.json")
GEMINI = by_name("gemini", "after_agent.json")
CURSOR = by_name("cursor", "stop.json")


@pytest.fixture
def hook(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Hook:
    return Hook(capsys, tmp_path)


def two_projects(tmp_path: Path) -> tuple[Path, Path]:
    """Projects A (the runtime's) and B (elsewhere), each with a valid final file."""
    roots = []
    for name in ("a", "b"):
        root = project(tmp_path / name, TASKS, artifacts=[259])
        write_meta(root, OWN, researched_doc())
        roots.append(root)
    return roots[0], roots[1]


def applied(root: Path) -> bool:
    state = json.loads((root / "specs" / "state.json").read_text("utf-8"))
    done = state["active_projects"][0]["status"] == "researched"
    assert done != (root / "specs" / OWN / ".return-meta.json").exists()
    return bool(done)


@pytest.mark.parametrize("variable", ["CLAUDE_PROJECT_DIR", "GEMINI_PROJECT_DIR"])
def test_a_cwd_in_another_project_does_not_make_it_this_runs(
    hook: Hook, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    runtime = CLAUDE if variable.startswith("CLAUDE") else GEMINI
    a, b = two_projects(tmp_path)
    monkeypatch.setenv(variable, str(a))
    answer = hook(runtime, payload(runtime, a, cwd=str(b / "specs" / OWN)))
    assert answer.code == 0
    assert applied(a)
    assert not applied(b)  # B's file and state.json untouched


def test_a_cwd_outside_cursors_workspace_does_not_make_it_this_runs(
    hook: Hook, tmp_path: Path
) -> None:
    a, b = two_projects(tmp_path)
    answer = hook(CURSOR, payload(CURSOR, a, workspace_roots=[str(a)], cwd=str(b)))
    assert answer.code == 0
    assert applied(a)
    assert not applied(b)


def test_a_project_within_the_runtimes_project_is_found_from_the_cwd(
    hook: Hook, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A monorepo: the runtime's project is the repository, the specs are in a package of it."""
    repository = tmp_path / "repo"
    inner = project(repository / "packages" / "tool", TASKS, artifacts=[259])
    write_meta(inner, OWN, researched_doc())
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(repository))
    answer = hook(CLAUDE, payload(CLAUDE, inner, cwd=str(inner / "src")))
    assert answer.code == 0
    assert applied(inner)


def test_the_starts_in_order(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    (a / "sub").mkdir(parents=True)
    b.mkdir()
    assert project_starts(b, []) == (b,)
    assert project_starts(None, []) == ()
    assert project_starts(b, [a]) == (a,)
    assert project_starts(a / "sub", [a]) == (a / "sub", a)
    assert project_starts(None, [a, b]) == (a, b)
    (tmp_path / "link").symlink_to(a)
    assert project_starts(tmp_path / "link" / "sub", [a]) == (tmp_path / "link" / "sub", a)


@pytest.mark.parametrize("where", ["root", "below"])
def test_the_project_s_configuration_is_read_once_at_its_root(tmp_path: Path, where: str) -> None:
    """A stop at the project's root reads its configuration once: the one found from the
    start is the root's own. From below the root, the root's is read after the start's."""
    root = project(tmp_path / "proj", TASKS, artifacts=[259], config="[hook]\napply = false\n")
    write_meta(root, OWN, researched_doc())
    start = root if where == "root" else root / "specs"
    read: list[Path] = []

    def load(at: Path) -> Config:
        read.append(at)
        return load_config(None, [at])

    request = StopRequest((start,), True, lambda timeout, now: ownership([], timeout, now))
    assert answer(request, load, open_journal) == Verdict()
    assert read == ([root] if where == "root" else [start, root])
    # the root's own configuration governs: validator mode, the valid file kept unapplied
    assert not applied(root)
