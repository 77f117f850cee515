"""Logging is configured at the first logger used: a command that never logs never imports
structlog (it costs start-up time), and one that does still logs on stderr."""

from __future__ import annotations

import ast
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import structlog

from helpers.documents import researched_doc, task_entry
from helpers.project import project, write_artifact, write_meta
from postflightd.logs import MAX_LOG_FIELD_CHARS, LogFormat, configure_logging

SRC = Path(__file__).resolve().parent.parent / "src" / "postflightd"


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "postflightd", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=120,
        check=False,
    )


def test_only_logs_imports_structlog() -> None:
    """A logger made by structlog itself would print with its defaults (on stdout, where a
    JSON report or the hook's answer goes) until something configured structlog."""
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        if path.name == "logs.py":
            continue
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(n == "structlog" or n.startswith("structlog.") for n in names):
                offenders.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert offenders == [], f"use postflightd.logs.get_logger() instead: {offenders}"


def test_a_scan_that_logs_nothing_never_imports_structlog(tmp_path: Path) -> None:
    root = project(tmp_path / "p", [task_entry(259, "prove_completeness")])
    write_meta(root, "259_prove_completeness", {"status": "done"})
    done = _cli("scan", "--format", "json", str(root))
    assert done.returncode == 1, done.stderr[-2000:]
    assert json.loads(done.stdout)["summary"]["invalid"] == 1
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}
    assert "postflightd.pipeline.check" in imported  # -X importtime did list the imports
    assert "structlog" not in imported


def test_a_warning_in_a_fresh_process_is_a_json_line_on_stderr(tmp_path: Path) -> None:
    """The journal cannot be opened (its directory is a file): the warning still comes, on
    stderr, as a JSON line, and stdout holds only the command's answer."""
    root = project(tmp_path / "p", [task_entry(259, "prove_completeness")])
    doc = researched_doc()
    write_artifact(root, doc["artifacts"][0]["path"])
    meta = write_meta(root, "259_prove_completeness", doc)
    blocker = tmp_path / "state"
    blocker.write_text("a file, not a directory")
    done = _cli("process", "--format", "json", str(meta), env={"XDG_STATE_HOME": str(blocker)})
    assert done.returncode == 0, done.stderr[-2000:]
    json.loads(done.stdout)  # the answer alone: no log line mixed in
    events = [
        json.loads(line)
        for line in done.stderr.splitlines()
        if line.startswith("{") and "import time" not in line
    ]
    warning = next(e for e in events if e["event"].startswith("journal disabled"))
    assert warning["level"] == "warning"
    assert warning["task"] is None  # the context keys are there: configured as before
    assert "structlog" in {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_a_megabyte_long_field_is_a_line_of_bounded_length(fmt: LogFormat) -> None:
    """A value from a file an agent rewrites is logged each time: cut short, marked."""
    stream = io.StringIO()
    previous = structlog.get_config()
    configure_logging(fmt, "info", stream)
    try:
        structlog.get_logger().info(
            "run_progress", agent="a" * 1_000_000, findings=["PF404 " + "b" * 1_000_000]
        )
    finally:
        structlog.configure(**previous)
    out = stream.getvalue()
    assert out.count("\n") == 1
    assert len(out) < 4 * MAX_LOG_FIELD_CHARS
    assert f"a\u2026[+{1_000_000 - MAX_LOG_FIELD_CHARS} chars]" in out
