"""The console script runs as a real process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from helpers.documents import researched_doc, task_entry
from helpers.project import project, write_artifact, write_meta


def test_version_runs_as_a_subprocess() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "postflightd", "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.startswith("postflightd ")


def test_scan_json_in_a_subprocess(tmp_path: Path) -> None:
    root = project(tmp_path, [task_entry(259, "prove_completeness")])
    write_meta(root, "259_prove_completeness", researched_doc())
    write_artifact(root, "specs/259_prove_completeness/reports/research-001.md")
    out = subprocess.run(
        [sys.executable, "-m", "postflightd", "scan", "--format", "json", str(root)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["summary"] == {
        "files": 1,
        "valid": 1,
        "invalid": 0,
        "errors": 0,
        "warnings": 0,
        "stuck": 0,
    }
    assert report["files"][0]["task"] == 259
