"""What the README and the docs tell a new user, checked against what the tools do: how long
the tests take and how the site is built, which flags override the configuration file and
which add to it, and how `init` writes without a terminal."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.documents import researched_doc
from helpers.paths import REPO
from helpers.project import project, write_meta
from postflightd.cli import main

README = (REPO / "README.md").read_text(encoding="utf-8")
TASKS = (REPO / "tasks.py").read_text(encoding="utf-8")


def test_the_readme_says_how_long_the_test_command_takes() -> None:
    """A run of several minutes with no word of it looks hung; the README's quickstart says
    how long it takes, next to the command."""
    (line,) = [x for x in README.splitlines() if x.startswith("python3 tasks.py test")]
    assert re.search(r"\(\d+ to \d+ min on \d+ cores\)", line), line
    assert '"test": test' in TASKS


@pytest.mark.parametrize("page", ["README.md", "CONTRIBUTING.md", "docs/index.md"])
def test_each_first_page_says_how_to_build_the_docs(page: str) -> None:
    text = (REPO / page).read_text(encoding="utf-8")
    assert "`python3 tasks.py docs`" in text, page
    assert '"docs": docs' in TASKS


def _scan_codes(root: Path, *flags: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-m", "postflightd", "scan", "--format", "json", *flags, str(root)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode in (0, 1), done.stderr
    return {f["code"] for file in json.loads(done.stdout)["files"] for f in file["findings"]}


def test_ignore_adds_to_the_file_s_list_while_select_replaces_it_as_the_page_says(
    tmp_path: Path,
) -> None:
    page = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    said = " ".join(page.split())
    assert "Command flags override the file, except `--ignore`" in said
    assert "`--ignore` adds its codes to the file's `ignore` list" in said
    assert "`--select` replaces the file's `select` list" in said

    config = '[validation]\nignore = ["PF205"]\nselect = ["PF205", "PF308"]\n'
    root = project(tmp_path / "p", 1, config=config)
    doc = researched_doc("1_task1")
    doc["artifacts"][0]["path"] = "specs/1_task1/reports/research-001.md"
    doc["unknown_key"] = 1  # PF205
    doc["partial_progress"] = {"stage": "done", "details": "all"}  # PF308
    write_meta(root, "1_task1", doc)
    assert _scan_codes(root) == {"PF308"}  # the file ignores PF205
    assert _scan_codes(root, "--ignore", "PF308") == set()  # both ignored: added to its list
    assert _scan_codes(root, "--select", "PF205") == set()  # replaced, and still ignored


def test_the_readme_s_init_without_a_terminal_needs_yes_as_it_says(tmp_path: Path) -> None:
    section = README[README.index("## Setting a project up") :]
    assert re.search(r"postflightd init --yes\s+# .*no terminal", section), section[:400]
    root = project(tmp_path / "p", 1)
    asked = subprocess.run(
        [sys.executable, "-m", "postflightd", "init", str(root), "--runtime", "claude"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert asked.returncode == 1, asked.stderr
    assert "postflightd init --yes" in asked.stderr
    assert not (root / ".postflightd.toml").exists()
    assert main(["init", str(root), "--runtime", "claude", "--yes"]) == 0
    assert (root / ".postflightd.toml").exists()
