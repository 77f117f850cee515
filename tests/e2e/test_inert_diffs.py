"""Diffs are inert: what ``--dry-run`` and ``init`` show of a project file cannot drive the
terminal that shows it.

A diff prints lines of files an agent can write: TODO.md, state.json, .gitignore,
.claude/settings.json. An ESC sequence in a context line (cursor up, erase line) would hide
the ``-``/``+`` lines under review; a C1 CSI does the same on terminals that read 8-bit
controls; a right-to-left override or an isolate reorders what is read; a line separator
breaks a line where the diff has none. Each of them is planted where the diff shows it, and
the real CLI must print every one as a visible escape, with the ``-``/``+`` lines intact.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.documents import final_text, task_entry
from helpers.project import meta_path, project

#: Real console-script runs: `pytest -m "not slow"` leaves them out.
pytestmark = pytest.mark.slow

#: Cursor up one line and erase it; a C1 CSI; right-to-left override; left-to-right isolate;
#: line separator.
HOSTILE = "\x1b[1A\x1b[2K\x9b\u202e\u2066\u2028"
RAW = ("\x1b", "\x9b", "\u202e", "\u2066", "\u2028")
#: How each is shown instead.
SHOWN = ("\\x1b[1A\\x1b[2K", "\\x9b", "\\u202e", "\\u2066", "\\u2028")


def cli(*args: object) -> subprocess.CompletedProcess[bytes]:
    """``postflightd ARGS`` as a user runs it, with no terminal on stdin; output as bytes."""
    return subprocess.run(
        [sys.executable, "-m", "postflightd", *map(str, args)],
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
        check=False,
    )


def assert_inert(out: bytes, *changed: str) -> str:
    """No hostile character raw in ``out``; each shown as its escape; ``changed`` lines there."""
    text = out.decode("utf-8")
    for char in RAW:
        assert char not in text, f"{char!r} printed raw"
    for shown in SHOWN:
        assert shown in text
    lines = text.split("\n")
    for line in changed:
        assert line in lines, f"{line!r} missing from the diff"
    return text


def hostile_tree(root: Path) -> Path:
    """Task 1 ready to be applied, with hostile text in TODO.md around its Status line and in
    state.json beside its entry (a JSON string may hold C1, U+202E, U+2066 and U+2028 raw;
    ESC only as an escape, which is text)."""
    entry = task_entry(1, "task1", note=f"n{HOSTILE}", owner=f"o{HOSTILE}")
    project(
        root,
        [entry],
        artifacts=[1],
        todo=(
            "# TODO\n\n"
            f"Backlog {HOSTILE} line\n\n"
            "### 1. Task 1\n"
            f"- **Effort**: 2h {HOSTILE}\n"
            "- **Status**: [RESEARCHING]\n"
            f"- **Language**: general {HOSTILE}\n\n"
            f"Notes {HOSTILE}\n"
        ),
    )
    state = root / "specs" / "state.json"
    doc = json.loads(state.read_text(encoding="utf-8"))
    text = json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    assert "\x9b" in text and "\u2028" in text  # raw in the file, as an agent can write them
    state.write_text(text, encoding="utf-8")
    (root / "specs" / "1_task1").mkdir(exist_ok=True)
    meta_path(root, 1).write_text(final_text(1), encoding="utf-8")
    return root


@pytest.mark.parametrize("command", ["scan", "process"])
def test_dry_run_diff_is_inert(tmp_path: Path, command: str) -> None:
    root = hostile_tree(tmp_path / "p")
    before = (root / "specs" / "state.json").read_bytes()
    if command == "scan":
        run = cli("scan", "--apply", "--dry-run", root)
    else:
        run = cli("process", "--dry-run", meta_path(root, 1))
    assert run.returncode == 0, run.stdout + run.stderr
    text = assert_inert(
        run.stdout,
        "-- **Status**: [RESEARCHING]",
        "+- **Status**: [RESEARCHED]",
        '-      "status": "researching",',
        '+      "status": "researched",',
    )
    # Context lines around the change are shown, escaped, in place: TODO.md's, and
    # state.json's (where ESC is the JSON escape \u001b, text).
    lines = text.split("\n")
    assert f" - **Effort**: 2h {SHOWN[0]}\\x9b\\u202e\\u2066\\u2028" in lines
    escaped = "\\u001b[1A\\u001b[2K\\x9b\\u202e\\u2066\\u2028"
    assert f'       "note": "n{escaped}",' in lines
    assert f'-      "owner": "o{escaped}"' in lines
    assert (root / "specs" / "state.json").read_bytes() == before
    assert meta_path(root, 1).exists()
    assert not any(char in run.stderr.decode("utf-8") for char in RAW)


def test_init_diff_is_inert(tmp_path: Path) -> None:
    """init shows its changes to .gitignore (the lines before its block are context) and to
    .claude/settings.json (every line of the rewrite) before asking; nothing raw."""
    root = tmp_path / "p"
    (root / ".claude").mkdir(parents=True)
    gitignore = f"node_modules/\n# {HOSTILE}\n*.log {HOSTILE}\n"
    (root / ".gitignore").write_text(gitignore, encoding="utf-8")
    settings = json.dumps({"env": {"NOTE": f"x{HOSTILE}"}}, indent=2, ensure_ascii=False) + "\n"
    (root / ".claude" / "settings.json").write_text(settings, encoding="utf-8")
    run = cli("init", root)
    assert run.returncode == 1, run.stdout + run.stderr  # shown, nothing written
    text = assert_inert(
        run.stdout,
        "+# postflightd: its lock and pid files",
        "+specs/.state.lock",
        '+            "command": "postflightd hook claude"',
    )
    lines = text.split("\n")
    assert f" # {SHOWN[0]}\\x9b\\u202e\\u2066\\u2028" in lines
    # In JSON, ESC is written as the text \u001b; the others are raw in the file.
    assert '     "NOTE": "x\\u001b[1A\\u001b[2K\\x9b\\u202e\\u2066\\u2028"' in lines
    assert (root / ".gitignore").read_text(encoding="utf-8") == gitignore
