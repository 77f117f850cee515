"""action.yml: the composite GitHub Action's scan step, run in bash as the runner would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from helpers.needs import require_module, require_tool
from helpers.paths import REPO
from helpers.project import project, write_meta

ACTION = REPO / "action.yml"


def test_action_installs_postflightd_and_scans_with_github_annotations(tmp_path: Path) -> None:
    yaml = require_module("yaml", "PyYAML comes with pre-commit (dev extra)")
    bash = require_tool("bash", "the action's steps are bash")
    action = yaml.safe_load(ACTION.read_text(encoding="utf-8"))
    assert action["runs"]["using"] == "composite"
    steps = action["runs"]["steps"]
    install = next(s for s in steps if s.get("name") == "Install postflightd")
    assert "pip install" in install["run"]
    scan = next(s for s in steps if s.get("name") == "postflightd scan")
    assert "--format github" in scan["run"]
    # Inputs reach the script through env:, never pasted into it (no script injection).
    assert "${{" not in scan["run"]

    root = project(tmp_path / "p")
    write_meta(root, "259_x", {"status": "completed"})
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "ROOTS": str(root),
        "ARGS": "--ignore PF200",
    }
    out = subprocess.run(
        [bash, "-e", "-c", scan["run"]],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert out.returncode == 1, out.stderr
    assert out.stdout.startswith("::error file=")
    assert "title=PF203::" in out.stdout
    assert "PF200" not in out.stdout
