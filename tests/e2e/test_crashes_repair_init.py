"""`verify --repair` and `init` killed (SIGKILL) at every step of their writes, then run again:
no file is ever torn, and the second run finishes the job exactly as one uninterrupted run.

The steps are the write path's crash points (``fs.faults``): after each temporary file is
written and fsynced, just before and after state.json's exchange, after each replace, and
between the repair's state.json write (and its journal rows) and its TODO.md write.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.crash_points import unknown
from helpers.documents import researched_doc, task_entry
from helpers.project import project, write_meta

TODO = "# TODO\n\n### 259. Prove completeness\n- **Status**: [RESEARCHING]\n"

REPAIR_POINTS = [
    "state:after-temp-write",
    "state:before-exchange",
    "state:after-exchange",
    "state:after-replace",
    "repair:after-journal",
    "todo:after-temp-write",
    "todo:before-exchange",
    "todo:after-exchange",
    "todo:after-replace",
]

#: Every file init writes in a project using Claude Code, Codex CLI and OpenCode (their
#: directories exist): each runtime's hook file goes through the same atomic write.
INIT_FILES = (
    ".gitignore",
    ".claude/settings.json",
    ".codex/hooks.json",
    ".opencode/plugins/postflightd.ts",
    ".postflightd.toml",
)
INIT_POINTS = [
    f"init:{rel}:{step}" for rel in INIT_FILES for step in ("after-temp-write", "after-replace")
]


def run(*argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "postflightd", *argv],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env={**os.environ, **env},
    )


def files(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (temporary files left behind included) and its bytes."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "/reports/" not in p.as_posix()
    }


@pytest.fixture
def reverted(tmp_path: Path) -> tuple[Path, dict[str, bytes], dict[str, bytes]]:
    """A project whose one outcome a writer that ignores the lock reverted: state.json and
    TODO.md put back as they were before the postflight. (root, before, applied files)."""
    root = project(
        tmp_path / "p", [task_entry(259, "prove_completeness")], todo=TODO, artifacts=True
    )
    specs = root / "specs"
    before = {name: (specs / name).read_bytes() for name in ("state.json", "TODO.md")}
    write_meta(root, "259_prove_completeness", researched_doc())
    done = run("process", str(specs / "259_prove_completeness" / ".return-meta.json"))
    assert done.returncode == 0, done.stdout + done.stderr
    after = files(root)
    for name, data in before.items():
        tmp = specs / ".jq.tmp"
        tmp.write_bytes(data)
        tmp.replace(specs / name)
    return root, before, after


def test_every_crash_point_in_the_tables_is_one_the_source_passes() -> None:
    """A label renamed in src/ would leave its run unkilled: said here, without running one."""
    assert unknown([*REPAIR_POINTS, *INIT_POINTS]) == []


@pytest.mark.slow
@pytest.mark.parametrize("point", REPAIR_POINTS)
def test_repair_killed_at_every_step_then_run_again_repairs_once(
    reverted: tuple[Path, dict[str, bytes], dict[str, bytes]], point: str
) -> None:
    root, before, after = reverted
    specs = root / "specs"
    killed = run("verify", str(root), "--repair", POSTFLIGHTD_CRASH_AT=point)
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    # Never torn: each file is the reverted version or the repaired one, whole.
    for name in ("state.json", "TODO.md"):
        assert (specs / name).read_bytes() in (before[name], after[f"specs/{name}"]), name
    json.loads((specs / "state.json").read_bytes())

    again = run("verify", str(root), "--repair", "--format", "json")
    assert again.returncode == 0, again.stdout + again.stderr
    # Exactly the files the postflight left: byte for byte, no temporary file anywhere.
    assert files(root) == after
    check = run("verify", str(root), "--format", "json")
    assert check.returncode == 0, check.stdout
    assert json.loads(check.stdout)["summary"]["shown"] == 1


def _init_project(root: Path) -> Path:
    (root / ".claude").mkdir(parents=True)
    (root / ".claude" / "settings.json").write_text(
        json.dumps({"permissions": {"allow": ["Bash(ls)"]}}, indent=2) + "\n", encoding="utf-8"
    )
    (root / ".codex").mkdir()
    (root / ".codex" / "hooks.json").write_text(
        json.dumps({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "lint"}]}]}})
        + "\n",
        encoding="utf-8",
    )
    (root / ".opencode").mkdir()
    (root / ".gitignore").write_text("node_modules/\n", encoding="utf-8")
    (root / "specs").mkdir()
    return root


@pytest.mark.slow
@pytest.mark.parametrize("point", INIT_POINTS)
def test_init_killed_at_every_step_then_run_again_sets_up_the_same(
    tmp_path: Path, point: str
) -> None:
    clean = _init_project(tmp_path / "clean")
    done = run("init", "--yes", str(clean))
    assert done.returncode == 0, done.stdout + done.stderr
    expected = files(clean)

    root = _init_project(tmp_path / "crash")
    before = files(root)
    killed = run("init", "--yes", str(root), POSTFLIGHTD_CRASH_AT=point)
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    for rel in INIT_FILES:
        path = root / rel
        now = path.read_bytes() if path.exists() else None
        assert now in (before.get(rel), expected[rel]), rel  # old or new, never torn
    json.loads((root / ".claude" / "settings.json").read_bytes())
    json.loads((root / ".codex" / "hooks.json").read_bytes())

    again = run("init", "--yes", str(root))
    assert again.returncode == 0, again.stdout + again.stderr
    assert files(root) == expected  # the killed run's temporary file is gone too
    shutil.rmtree(tmp_path / "clean")
