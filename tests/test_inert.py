"""Output is inert: values from the tree never drive a terminal or forge a line.

Metadata values and task directory names carry ESC/OSC sequences, CR/LF and a would-be
GitHub workflow command; every text output escapes them (one line per record, no raw control
byte), and JSON output stays valid UTF-8 with a lone surrogate in a value.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import structlog

from helpers.documents import SESSION, researched_doc, task_entry
from helpers.project import project, write_artifact, write_meta
from postflightd.cli import main
from postflightd.inert import MAX_VALUE_CHARS, clip, inert, inert_diff, json_text
from postflightd.logs import configure_logging

#: An OSC title change, a colour, a line break, then a forged workflow command.
EVIL = "x\x1b]0;pwned\x07\x1b[31m\r\n::error file=forged.py::injected\x9b\x7f\u2028y"
EVIL_DIR = "259_ev\x1b[2Jil\r\n::error file=forged.py::dir"
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def evil_project(tmp_path: Path) -> Path:
    """A project whose metadata values and one task directory name carry control characters."""
    root = project(tmp_path / "proj", [task_entry(260, "plan_it")])
    write_artifact(root, "specs/260_plan_it/reports/research-001.md")
    doc = researched_doc("260_plan_it")
    doc["status"] = "in_progress"
    doc["started_at"] = "2099-01-01T00:00:00Z"
    doc["partial_progress"] = {"stage": "stage" + EVIL, "details": "d"}
    doc["metadata"]["agent_type"] = "agent" + EVIL
    write_meta(root, "260_plan_it", doc)
    bad = researched_doc()
    bad["status"] = "researched" + EVIL
    bad["metadata"]["session_id"] = SESSION + EVIL
    write_meta(root, EVIL_DIR, bad)
    return root


def assert_inert(text: str) -> None:
    assert not RAW_CONTROL.search(text), f"raw control character in {text!r}"


def test_inert_escapes_every_control_character_and_leaves_text_alone() -> None:
    """C0, C1, DEL, line breaks, lone surrogates become visible escapes; the rest is kept."""
    assert inert("plain / path_259 - é 日本") == "plain / path_259 - é 日本"
    assert inert("a\x1b[31mb") == "a\\x1b[31mb"
    assert inert("a\r\nb\tc") == "a\\r\\nb\\tc"
    assert inert("\x7f\x9b\x00") == "\\x7f\\x9b\\x00"
    assert inert("\u2028\u202e\ud800") == "\\u2028\\u202e\\ud800"
    assert "\n" not in inert(EVIL)
    assert_inert(inert(EVIL))


#: The first and last character of each class ``inert`` escapes: C0, DEL, C1, the line and
#: paragraph separators, the bidirectional embeddings and overrides, the isolates, surrogates.
UNSAFE_CLASSES = [
    ("\x00", "\x1f"),
    ("\x7f", "\x7f"),
    ("\x80", "\x9f"),
    ("\u2028", "\u2029"),
    ("\u202a", "\u202e"),
    ("\u2066", "\u2069"),
    ("\ud800", "\udfff"),
]


@pytest.mark.parametrize(("first", "last"), UNSAFE_CLASSES)
def test_inert_and_json_text_escape_every_class_to_its_edges(first: str, last: str) -> None:
    """Each class, its first and last character and the ones just outside it: escaped inside,
    kept outside (text), and never raw in JSON, which still reads back the same value."""
    for char in {first, last}:
        assert char not in inert(f"a{char}b")
        assert inert(f"a{char}b").startswith("a\\")
        text = json_text({"v": char})
        assert char not in text
        assert json.loads(text) == {"v": char}
    for code in (ord(first) - 1, ord(last) + 1):
        outside = chr(code) if code >= 0 else ""
        if outside and not any(lo <= outside <= hi for lo, hi in UNSAFE_CLASSES):
            assert inert(outside) == outside
            assert json_text(outside) == json.dumps(outside, ensure_ascii=False)


def test_json_text_is_always_valid_utf8_and_loses_nothing() -> None:
    """A lone surrogate is written back as its JSON escape; other text stays readable."""
    value = {"s": "a\ud800b", "t": "é"}
    text = json_text(value)
    text.encode("utf-8")  # would raise on a raw lone surrogate
    assert json.loads(text) == value
    assert json_text({"t": "é"}) == '{"t": "é"}'


@pytest.mark.parametrize("fmt", ["text", "github"])
def test_scan_text_and_github_output_stay_one_line_per_finding(
    tmp_path: Path, fmt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A task directory name with CR/LF/ESC cannot start a line or a workflow command."""
    root = evil_project(tmp_path)
    code = main(["scan", "--format", fmt, str(root)])
    out = capsys.readouterr().out
    assert code == 1
    assert_inert(out)
    lines = out.splitlines()
    if fmt == "github":
        assert all(re.match(r"::(error|warning) file=[^:]*,title=PF\d{3}::", ln) for ln in lines)
        assert not any("forged.py::" in ln.split("::", 2)[1] for ln in lines)
    else:
        # Paths are shown from the current directory: absolute here (tmp_path is outside it).
        assert all(ln.startswith((str(root), "2 files")) for ln in lines), lines
    assert any("259_ev\\x1b[2Jil" in ln for ln in lines)


def test_status_text_escapes_values_and_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Agent, stage and status values reach `status` as escapes, one row per run."""
    root = evil_project(tmp_path)
    main(["status", str(root)])
    out = capsys.readouterr().out
    assert_inert(out)
    lines = out.splitlines()
    assert len(lines) == 5  # root, header, two runs, summary
    assert "agentx\\x1b]0;pwned" in out


def test_history_text_escapes_journaled_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What the journal recorded from a file (session, status, path) prints inert."""
    root = evil_project(tmp_path)
    main(["scan", "--apply", str(root)])
    capsys.readouterr()
    assert main(["history"]) == 0
    out = capsys.readouterr().out
    assert_inert(out)
    header, *lines = out.splitlines()
    assert header.startswith("STARTED") and lines
    # One line per run: nothing recorded breaks a line, so each starts with its time.
    assert all(re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d  ", ln) for ln in lines), lines


def test_console_log_lines_escape_values() -> None:
    """The console renderer prints str values raw: they are escaped first."""
    stream = io.StringIO()
    previous = structlog.get_config()
    configure_logging("console", "info", stream)
    try:
        # structlog reprs a value holding a line break, but prints the event and a value
        # without one raw: an OSC sequence alone went straight to the terminal.
        structlog.get_logger().warning(
            "invalid\x1b[2J", file=EVIL_DIR, stage=EVIL, agent="a\x1b]0;title\x07b"
        )
    finally:
        structlog.configure(**previous)
    out = stream.getvalue()
    assert out.count("\n") == 1
    assert_inert(out.rstrip("\n"))


def test_json_log_lines_stay_valid_utf8_with_a_lone_surrogate() -> None:
    """A lone surrogate in a logged value: the JSON line is still UTF-8."""
    stream = io.StringIO()
    previous = structlog.get_config()
    configure_logging("json", "info", stream)
    try:
        structlog.get_logger().warning("invalid", session="s\ud800")
    finally:
        structlog.configure(**previous)
    line = stream.getvalue()
    line.encode("utf-8")
    assert json.loads(line)["session"] == "s\ud800"


def _surrogate_project(tmp_path: Path) -> Path:
    """Metadata written as JSON text with ``\\ud800`` escapes (valid JSON, not UTF-8-able)."""
    root = project(tmp_path / "proj", [task_entry(259, "prove_completeness")])
    text = json.dumps(researched_doc())
    text = text.replace('"neovim-research-agent"', '"agent\\ud800"')
    text = text.replace('"researched"', '"researched\\ud800"')
    write_meta(root, "259_prove_completeness", text)
    return root


@pytest.mark.parametrize("command", [["scan"], ["status"]])
def test_json_output_is_valid_utf8_with_a_lone_surrogate(
    tmp_path: Path, command: list[str]
) -> None:
    """`scan --format json` and `status --format json` through a real stdout: not exit 70."""
    root = _surrogate_project(tmp_path)
    out = subprocess.run(
        [sys.executable, "-m", "postflightd", *command, "--format", "json", str(root)],
        capture_output=True,
        check=False,
    )
    assert out.returncode in (0, 1), out.stderr
    doc: Any = json.loads(out.stdout.decode("utf-8"))  # strict: raises on invalid UTF-8
    assert "\ud800" in json.dumps(doc, ensure_ascii=False)


def test_clip_keeps_a_short_value_and_cuts_a_long_one_saying_how_much() -> None:
    assert clip("x" * MAX_VALUE_CHARS) == "x" * MAX_VALUE_CHARS
    cut = clip("y" * 1_000_000)
    assert cut == "y" * MAX_VALUE_CHARS + f"\u2026[+{1_000_000 - MAX_VALUE_CHARS} chars]"
    assert clip("abcdef", 3) == "abc\u2026[+3 chars]"


# --- inert_diff --------------------------------------------------------------------------------


def test_inert_diff_escapes_every_line_and_keeps_the_change_visible() -> None:
    old = "a\n\x1b[1A\x1b[2K hidden?\nStatus: OLD\n\u202eb\x9b\n"
    new = old.replace("OLD", "NEW")
    diff = inert_diff(old, new, "a/f", "b/f")
    assert diff.split("\n") == [
        "--- a/f",
        "+++ b/f",
        "@@ -1,4 +1,4 @@",
        " a",
        " \\x1b[1A\\x1b[2K hidden?",
        "-Status: OLD",
        "+Status: NEW",
        " \\u202eb\\x9b",
        "",
    ]


def test_inert_diff_splits_at_newlines_only() -> None:
    """U+2028, \\x1c and \\x85 break a line for str.splitlines, not for a file: content."""
    old = "one\u2028two\x1cthree\x85\nx\n"
    diff = inert_diff(old, old.replace("x", "y"), "a", "b")
    assert " one\\u2028two\\x1cthree\\x85" in diff.split("\n")
    assert "@@ -1,2 +1,2 @@" in diff


def test_inert_diff_keeps_tabs_and_crlf_line_breaks() -> None:
    """A tab only moves right; a CRLF file's line breaks are not shown as \\r on every line."""
    old = '{\r\n\t"a": 1\r\n}\r\n'
    diff = inert_diff(old, old.replace("1", "2"), "a", "b")
    assert '-\t"a": 1' in diff.split("\n")
    assert '+\t"a": 2' in diff.split("\n")
    assert "\r" not in diff and "\\r" not in diff


def test_inert_diff_marks_a_last_line_without_newline() -> None:
    diff = inert_diff("a", "b", "/dev/null", "b/f")
    assert diff.endswith("-a\n\\ No newline at end of file\n+b\n\\ No newline at end of file\n")
