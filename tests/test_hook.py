"""`postflightd hook claude` as a stop hook: real subprocess, JSON on stdin."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from conftest import make_project, researched_doc, task_entry, write_artifact, write_meta


def hook(payload: Any) -> subprocess.CompletedProcess[bytes]:
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return subprocess.run(
        [sys.executable, "-m", "postflightd", "hook", "claude"],
        input=raw,
        capture_output=True,
        check=False,
    )


def project(tmp_path: Path) -> Path:
    root = make_project(
        tmp_path / "proj", [task_entry(259, "prove_completeness"), task_entry(260, "plan_it")]
    )
    write_artifact(root, "specs/259_prove_completeness/reports/research-001.md")
    return root


def test_valid_final_file_is_applied_and_hook_prints_empty_object(tmp_path: Path) -> None:
    """A valid researched file: applied, `{}` on stdout, exit 0."""
    root = project(tmp_path)
    meta = write_meta(root, "259_prove_completeness", researched_doc())
    out = hook({"cwd": str(root / "specs"), "hook_event_name": "Stop", "stop_hook_active": False})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == b"{}"
    assert not meta.exists()
    state = json.loads((root / "specs" / "state.json").read_text("utf-8"))
    assert state["active_projects"][0]["status"] == "researched"


def test_invalid_file_blocks_with_exact_fixes_but_valid_ones_are_still_applied(
    tmp_path: Path,
) -> None:
    """The block reason names the file and what to fix; the valid file is applied anyway."""
    root = project(tmp_path)
    good = write_meta(root, "259_prove_completeness", researched_doc())
    bad_doc = researched_doc("260_plan_it")
    bad_doc["status"] = "completed"
    bad = write_meta(root, "260_plan_it", bad_doc)
    out = hook({"cwd": str(root), "stop_hook_active": False})
    assert out.returncode == 0
    decision = json.loads(out.stdout)
    assert decision["decision"] == "block"
    assert "specs/260_plan_it/.return-meta.json" in decision["reason"]
    assert "PF203" in decision["reason"]
    assert not good.exists()
    assert bad.exists()


def test_never_blocks_when_stop_hook_active(tmp_path: Path) -> None:
    """stop_hook_active: the runtime is already looping; print {} whatever is wrong."""
    root = project(tmp_path)
    bad_doc = researched_doc()
    bad_doc["status"] = "completed"
    write_meta(root, "259_prove_completeness", bad_doc)
    out = hook({"cwd": str(root), "stop_hook_active": True})
    assert out.returncode == 0
    assert out.stdout.strip() == b"{}"


def test_other_agents_in_progress_files_are_left_alone(tmp_path: Path) -> None:
    """A running agent's in_progress file is neither deleted nor a reason to block."""
    root = project(tmp_path)
    doc = researched_doc()
    doc.update(
        status="in_progress",
        started_at=datetime.now(UTC).isoformat(),
        partial_progress={"stage": "s", "details": "d"},
    )
    meta = write_meta(root, "259_prove_completeness", doc)
    before = meta.read_bytes()
    out = hook({"cwd": str(root), "stop_hook_active": False})
    assert out.returncode == 0
    assert meta.read_bytes() == before


def test_cwd_without_a_project_prints_empty_object(tmp_path: Path) -> None:
    """Nothing to do outside a project: {} and exit 0."""
    out = hook({"cwd": str(tmp_path), "stop_hook_active": False})
    assert out.returncode == 0
    assert out.stdout.strip() == b"{}"


@pytest.mark.parametrize(
    "stdin",
    [b"", b"{truncated", b"[1, 2]", b'{"stop_hook_active": false}', b"\xff\xfe", b'{"cwd": 5}'],
    ids=["empty", "truncated", "array", "no-cwd", "not-utf8", "cwd-not-string"],
)
def test_malformed_hook_input_is_a_clear_error_never_a_block(stdin: bytes) -> None:
    """Malformed stdin: one clear line on stderr, exit 2, nothing on stdout, no traceback."""
    out = hook(stdin)
    assert out.returncode == 2
    assert out.stdout == b""
    assert b"Traceback" not in out.stderr
    assert out.stderr.startswith(b"postflightd: ")
