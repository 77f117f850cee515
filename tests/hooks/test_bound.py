"""postflightd's own bound on sending an agent back (``hooks.bound``), through the real hook:
per session and file, started again by a file that validates, and never in the way of the
answer when its counts cannot be kept."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from helpers.documents import researched_doc
from helpers.hooks import (
    BROKEN,
    MINUTE_AGO,
    OWN,
    TASKS,
    Hook,
    by_name,
    payload,
    reason_of,
    written,
)
from helpers.project import project, task_status, write_meta
from postflightd.hooks.bound import MAX_BLOCKS, MAX_KEYS, Blocks, block_key, default_path

GEMINI = by_name("gemini", "after_agent.json")


@pytest.fixture
def hook(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Hook:
    return Hook(capsys, tmp_path)


def sent_back(hook: Hook, root: Path, attempt: int, session: str = "s1") -> bool:
    """The agent rewrites its file, still invalid, and stops: whether it is sent back."""
    written(write_meta(root, OWN, BROKEN + " " * attempt), MINUTE_AGO)
    answer = hook(GEMINI, payload(GEMINI, root, session_id=session))
    assert answer.code == 0
    return "decision" in answer.doc


def test_each_session_has_its_own_count(hook: Hook, tmp_path: Path) -> None:
    root = project(tmp_path / "proj", TASKS, todo=True, artifacts=[259])
    assert [sent_back(hook, root, i) for i in range(4)] == [True] * MAX_BLOCKS + [False]
    assert sent_back(hook, root, 5, session="s2")
    assert not sent_back(hook, root, 6)


def test_a_file_that_validates_starts_the_count_again(hook: Hook, tmp_path: Path) -> None:
    root = project(tmp_path / "proj", TASKS, todo=True, artifacts=[259])
    assert [sent_back(hook, root, i) for i in range(MAX_BLOCKS)] == [True] * MAX_BLOCKS
    meta = written(write_meta(root, OWN, researched_doc()), MINUTE_AGO)
    assert hook(GEMINI, payload(GEMINI, root, session_id="s1")).doc == {}
    assert not meta.exists()
    assert task_status(root, 259) == "researched"
    assert sent_back(hook, root, 7)


def test_a_file_still_being_written_keeps_the_count(hook: Hook, tmp_path: Path) -> None:
    """A stop that finds the agent's file still being written (OpenCode's second plugin can
    ask while the agent rewrites it) neither blocks nor starts the count again."""
    root = project(
        tmp_path / "proj", TASKS, todo=True, artifacts=[259], config="[watch]\nsettle_ms = 5000\n"
    )
    assert [sent_back(hook, root, i) for i in range(MAX_BLOCKS - 1)] == [True] * (MAX_BLOCKS - 1)
    write_meta(root, OWN, BROKEN + "  ")  # written now: still within the settle window
    assert "decision" not in hook(GEMINI, payload(GEMINI, root, session_id="s1")).doc
    assert [sent_back(hook, root, i) for i in range(5, 7)] == [True, False]


def test_counts_that_cannot_be_kept_never_stop_the_answer(hook: Hook, tmp_path: Path) -> None:
    """A directory where the counts' file goes: the agent is still sent back, and why the
    bound is lost is said on stderr."""
    root = project(tmp_path / "proj", TASKS, todo=True, artifacts=[259])
    default_path().mkdir(parents=True)
    written(write_meta(root, OWN, BROKEN), MINUTE_AGO)
    answer = hook(GEMINI, payload(GEMINI, root))
    assert reason_of(answer.doc).startswith("postflightd: metadata to repair")
    assert answer.stderr.startswith("postflightd: cannot keep the hook's count of blocks in ")
    assert answer.stderr.count("\n") == 1


def test_a_link_at_the_counts_file_is_never_written_through(hook: Hook, tmp_path: Path) -> None:
    root = project(tmp_path / "proj", TASKS, todo=True, artifacts=[259])
    target = tmp_path / "elsewhere"
    target.write_text("keep\n", encoding="utf-8")
    default_path().parent.mkdir(parents=True)
    os.symlink(target, default_path())
    assert sent_back(hook, root, 0)
    assert target.read_text(encoding="utf-8") == "keep\n"


@pytest.mark.parametrize(
    "text", [b"", b"\xff\xfe garbage\n", b"abc 3\n", b"x" * 64 + b" three\n", b"\0" * 4096]
)
def test_a_malformed_counts_file_counts_nothing(hook: Hook, tmp_path: Path, text: bytes) -> None:
    root = project(tmp_path / "proj", TASKS, todo=True, artifacts=[259])
    default_path().parent.mkdir(parents=True)
    default_path().write_bytes(text)
    assert sent_back(hook, root, 0)
    key = block_key(root.resolve(), "s1", f"specs/{OWN}/.return-meta.json")
    assert Blocks(default_path()).count(key) == 1


def test_the_counts_file_keeps_the_most_recent_keys(tmp_path: Path) -> None:
    path = tmp_path / "hook-blocks"
    blocks = Blocks(path)
    keys = [block_key(tmp_path, str(i), "f") for i in range(MAX_KEYS + 10)]
    assert blocks.claim(keys, []) == (set(keys), None)
    kept = Blocks(path)
    assert kept.count(keys[0]) == 0
    assert kept.count(keys[-1]) == 1
    assert len(path.read_bytes().splitlines()) == MAX_KEYS
    assert kept.claim([keys[-1]], [keys[-2]]) == ({keys[-1]}, None)
    again = Blocks(path)
    assert (again.count(keys[-1]), again.count(keys[-2])) == (2, 0)


def test_two_hooks_stopping_at_once_never_both_take_the_last_block(tmp_path: Path) -> None:
    """Two hooks of one session read the counts before either writes (OpenCode's two plugins
    under `opencode run` stop together): the last block goes to one of them only."""
    path = tmp_path / "hook-blocks"
    key = block_key(tmp_path, "s1", "f")
    for _ in range(MAX_BLOCKS - 1):
        Blocks(path).claim([key], [])
    first, second = Blocks(path), Blocks(path)
    assert first.count(key) == second.count(key) == MAX_BLOCKS - 1
    assert first.claim([key], []) == ({key}, None)
    assert second.claim([key], []) == (set(), None)
    assert Blocks(path).count(key) == MAX_BLOCKS
