"""`postflightd rules CODE`: every registered code is explained; PF405 names its likely cause."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.documents import researched_doc, task_entry
from helpers.project import project, write_artifact, write_meta
from postflightd.cli import main
from postflightd.rules.explanations import EXPLANATIONS
from postflightd.rules.findings import RULES


@pytest.mark.parametrize("code", sorted(RULES))
def test_every_registered_code_has_an_explanation(code: str) -> None:
    ex = EXPLANATIONS.get(code)
    assert ex is not None, f"{code} has no entry in explanations.py"
    for part in (ex.what, ex.why, ex.bad, ex.fixed):
        assert part.strip()
    assert ex.bad != ex.fixed


def test_rules_code_prints_what_why_and_both_examples(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules", "pf405"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("PF405 (error): ")
    for heading in ("What it checks", "Why", "Example", "Fixed"):
        assert f"\n{heading}\n" in out
    assert "pre-flight" in out


def test_rules_without_a_code_still_lists_every_rule(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == list(RULES)


def test_rules_unknown_code_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules", "PF999"]) == 2
    assert "unknown rule code" in capsys.readouterr().err


def test_pf405_from_state_json_names_the_likely_cause(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    task_dir = "259_prove_completeness"
    root = project(
        tmp_path / "p", [task_entry(259, "prove_completeness", session_id="sess_1_yyyyyy")]
    )
    write_artifact(root, f"specs/{task_dir}/reports/research-001.md")
    write_meta(root, task_dir, researched_doc(task_dir))
    assert main(["scan", str(root), "--format", "json"]) == 1
    (finding,) = json.loads(capsys.readouterr().out)["files"][0]["findings"]
    assert finding["code"] == "PF405"
    assert "state.json's session is the one the task was last delegated with" in finding["message"]
    assert "pre-flight did not record its session" in finding["message"]
