"""tasks.py, the set-up script a fresh clone runs first."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_first_run_says_it_is_setting_up_before_it_creates_the_venv(tmp_path: Path) -> None:
    """Creating .venv and installing into it take about a minute: a line says so first.

    Run on a copy whose .venv cannot be created (a file holds its name), so that the venv
    step fails at once, after the line, and nothing is installed."""
    shutil.copy(REPO / "tasks.py", tmp_path / "tasks.py")
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / ".venv").write_text("in the way\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-c", "import tasks; tasks.ensure_venv()"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode != 0  # the venv step failed, as the copy meant it to
    out = done.stdout
    said = out.index("setting up .venv (first run only, about a minute)...")
    assert said < out.index("-m venv")
