"""Logging is configured at the first logger used: a command that never logs never imports
structlog (it costs start-up time), and one that does still logs on stderr."""

from __future__ import annotations

import ast
import io
import json
import os
import re
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
    assert "a\u2026[+" in out
    if fmt == "json":
        assert f"a\u2026[+{1_000_000 - MAX_LOG_FIELD_CHARS} chars]" in out


def _console(method: str, event: str, **fields: object) -> str:
    stream = io.StringIO()
    previous = structlog.get_config()
    configure_logging("console", "debug", stream)
    try:
        getattr(structlog.get_logger(), method)(event, **fields)
    finally:
        structlog.configure(**previous)
    return stream.getvalue()


_CONTEXT = {
    "root": "/home/me/project",
    "task": 262,
    "session": "sess_1736700300_jkl012",
    "file": "specs/262_parser_rewrite/.return-meta.json",
}


def test_a_console_line_is_the_time_task_event_status_and_agent() -> None:
    out = _console(
        "info", "applied", **_CONTEXT, status="researched", agent="python-implementation-agent"
    )
    assert re.fullmatch(
        r"\d\d:\d\d:\d\d 262 applied researched \(python-implementation-agent\)\n", out
    )


def test_a_console_line_names_the_codes_of_findings_not_their_text() -> None:
    findings = [f"PF{200 + i} field_{i}: " + "a long explanation " * 20 for i in range(40)]
    out = _console(
        "warning",
        "invalid",
        **{**_CONTEXT, "task": 260, "file": "specs/260_lsp_setup/.return-meta.json"},
        status="planned",
        agent="planner-agent",
        findings=[*findings, "PF200 again: the same code twice"],
    )
    assert out.count("\n") == 1
    assert "explanation" not in out
    assert re.match(r"\d\d:\d\d:\d\d 260 invalid PF200, PF201, PF202, ", out), out
    assert out.count("PF200") == 1
    assert out.endswith("(planner-agent): specs/260_lsp_setup/.return-meta.json\n"), out
    assert len(out) < 200  # forty codes are cut short, marked


def test_a_console_line_keeps_agent_text_inert() -> None:
    """Agent text on a terminal: an ESC sequence or a line break is shown, never acted on."""
    out = _console(
        "warning",
        "invalid",
        **{**_CONTEXT, "file": "specs/262_x\x1b[2J/.return-meta.json"},
        agent="evil\x1b]0;title\x07\nforged 12:00:00 1 applied done",
        findings=["PF404\x1b[31m metadata.agent_type: x"],
    )
    assert out.count("\n") == 1
    assert "\x1b" not in out and "\x07" not in out
    assert "\\x1b" in out


def test_a_console_line_of_the_daemon_names_the_root_and_the_error() -> None:
    out = _console(
        "error", "root_skipped", root="/srv/p", error="permission denied", hint="x " * 200
    )
    assert "root=/srv/p" in out
    assert "error='permission denied'" in out
    assert len(out) < 300
