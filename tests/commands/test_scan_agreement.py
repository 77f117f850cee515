"""Every form of ``scan``'s output counts the same thing, whatever --select, --ignore and
--strict keep: what is shown. A file is invalid exactly when a failing finding is shown for
it; stuck is PF602 shown; the exit code follows the shown errors, warnings (--strict) and
stuck runs. Checked on the bundled example project, whose five files fail in five ways."""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers.paths import copy_example
from postflightd.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "project"
FINDING_LINE = re.compile(
    r"^(?P<path>\S+?):(\d+):(\d+): (?P<code>PF\d{3}) (?P<sev>error|warning): "
)
SUMMARY = re.compile(
    r"^(?P<files>\d+) files?: (?P<valid>\d+) valid, (?P<invalid>\d+) invalid; "
    r"(?P<errors>\d+) errors?, (?P<warnings>\d+) warnings?(, (?P<stuck>\d+) stuck)?$"
)
#: turns two of the example's errors into warnings, so that --strict has something to judge
WARNINGS_CONFIG = '[validation]\nseverity = { PF502 = "warning", PF305 = "warning" }\n'


@dataclass(frozen=True)
class Counts:
    files: int
    invalid: int
    errors: int
    warnings: int
    stuck: int


def _from_text(out: str, strict: bool) -> tuple[Counts, Counts]:
    """What the finding lines show, and what the summary line says."""
    lines = out.splitlines()
    shown = [m for line in lines[:-1] if (m := FINDING_LINE.match(line))]
    assert len(shown) == len(lines) - 1, lines
    severities = Counter(m["sev"] for m in shown)
    failing = {m["path"] for m in shown if m["sev"] == "error" or strict}
    stuck = {m["path"] for m in shown if m["code"] == "PF602"}
    summary = SUMMARY.match(lines[-1])
    assert summary is not None, lines[-1]
    told = Counts(
        int(summary["files"]),
        int(summary["invalid"]),
        int(summary["errors"]),
        int(summary["warnings"]),
        int(summary["stuck"] or 0),
    )
    assert int(summary["valid"]) + told.invalid == told.files
    counted = Counts(
        told.files, len(failing), severities["error"], severities["warning"], len(stuck)
    )
    return counted, told


def _from_json(out: str, strict: bool) -> tuple[Counts, Counts]:
    report = json.loads(out)
    files = report["files"]
    for f in files:
        failing = any(x["severity"] == "error" or strict for x in f["findings"])
        assert f["valid"] is not failing, f
        assert f["stuck"] is any(x["code"] == "PF602" for x in f["findings"]), f
    severities = Counter(x["severity"] for f in files for x in f["findings"])
    counted = Counts(
        len(files),
        sum(not f["valid"] for f in files),
        severities["error"],
        severities["warning"],
        sum(f["stuck"] for f in files),
    )
    s = report["summary"]
    told = Counts(s["files"], s["invalid"], s["errors"], s["warnings"], s["stuck"])
    assert s["valid"] + s["invalid"] == s["files"]
    return counted, told


FLAGS = [
    [],
    ["--select", "PF5"],
    ["--select", "PF602"],
    ["--ignore", "PF602"],
    ["--select", "PF1,PF2"],
    ["--select", "PF3,PF5", "--strict"],
    ["--ignore", "PF1", "--strict"],
    ["--select", "PF305"],
]


@pytest.mark.parametrize("config", [None, WARNINGS_CONFIG], ids=["defaults", "warnings"])
@pytest.mark.parametrize("flags", FLAGS, ids=lambda f: " ".join(f) or "none")
def test_text_json_github_sarif_and_the_exit_code_agree(
    tmp_path: Path,
    flags: list[str],
    config: str | None,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = tmp_path / "project"
    copy_example(root)
    if config is not None:
        (root / ".postflightd.toml").write_text(config)
    monkeypatch.chdir(root)
    strict = "--strict" in flags

    text_code = main(["scan", *flags])
    text, text_summary = _from_text(capsys.readouterr().out, strict)
    json_code = main(["scan", "--format", "json", *flags])
    shown, json_summary = _from_json(capsys.readouterr().out, strict)
    assert text == text_summary == shown == json_summary

    assert main(["scan", "--format", "github", *flags]) == text_code
    levels = Counter(line.split(" ", 1)[0] for line in capsys.readouterr().out.splitlines())
    assert (levels["::error"], levels["::warning"]) == (shown.errors, shown.warnings)
    assert main(["scan", "--format", "sarif", *flags]) == text_code
    results = json.loads(capsys.readouterr().out)["runs"][0]["results"]
    levels = Counter(r["level"] for r in results)
    assert (levels["error"], levels["warning"]) == (shown.errors, shown.warnings)

    failing = shown.errors or (strict and shown.warnings) or shown.stuck
    assert text_code == json_code == (1 if failing else 0)


def test_apply_under_select_keeps_a_file_it_cannot_apply_and_shows_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file valid as far as the selected codes go but with no usable document (invalid JSON,
    a forbidden status) is not applied, and the finding that stops it is shown."""
    root = tmp_path / "project"
    copy_example(root)
    monkeypatch.chdir(root)
    assert main(["scan", "--apply", "--select", "PF5", "--format", "json"]) == 1
    report = json.loads(capsys.readouterr().out)
    by_task = {f["task"]: f for f in report["files"]}
    for task, code in ((260, "PF203"), (263, "PF102")):
        assert by_task[task]["valid"] is False
        assert by_task[task]["outcome"] == "invalid"
        (shown,) = by_task[task]["findings"]
        assert shown["code"] == code
        assert "not applied" in shown["message"]
        assert (root / "specs" / Path(by_task[task]["path"]).relative_to("specs")).exists()
    assert by_task[259]["outcome"] == "applied"
    assert report["summary"]["invalid"] == sum(not f["valid"] for f in report["files"])
