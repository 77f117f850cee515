"""Options shared across commands: scan FILE, filters on status/process, history
filters, check-return's configuration and github format, a configured specs_dir that is missing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from helpers.documents import researched_doc, task_entry
from helpers.project import project, write_meta
from postflightd.cli import main

A, B = "259_prove_completeness", "260_broken"


def _project(root: Path) -> Path:
    """Task 259 valid; task 260 implemented without completion_data (PF303)."""
    project(
        root, [task_entry(259, "prove_completeness"), task_entry(260, "broken")], artifacts=True
    )
    write_meta(root, A, researched_doc(A))
    broken = researched_doc(B)
    broken["status"] = "implemented"
    write_meta(root, B, broken)
    return root


def _json(capsys: pytest.CaptureFixture[str]) -> Any:
    return json.loads(capsys.readouterr().out)


# --- scan FILE ... (pre-commit passes file names) ---------------------------------------------


def test_scan_of_metadata_files_reports_only_those_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _project(tmp_path / "p")
    monkeypatch.chdir(root)
    assert main(["scan", f"specs/{A}/.return-meta.json", "--format", "json"]) == 0
    report = _json(capsys)
    assert [f["task"] for f in report["files"]] == [259]
    assert main(["scan", f"specs/{B}/.return-meta.json", "--format", "json"]) == 1
    assert [f["task"] for f in _json(capsys)["files"]] == [260]


def test_scan_of_files_from_two_projects(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one, two = _project(tmp_path / "one"), _project(tmp_path / "two")
    files = [
        str(one / "specs" / A / ".return-meta.json"),
        str(two / "specs" / B / ".return-meta.json"),
    ]
    assert main(["scan", *files, "--format", "json"]) == 1
    report = _json(capsys)
    assert sorted(report["roots"]) == sorted([str(one.resolve()), str(two.resolve())])
    assert sorted(f["task"] for f in report["files"]) == [259, 260]


def test_a_root_given_beside_one_of_its_files_scans_the_whole_root(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _project(tmp_path / "p")
    assert (
        main(["scan", str(root), str(root / "specs" / A / ".return-meta.json"), "--format", "json"])
        == 1
    )
    assert len(_json(capsys)["files"]) == 2


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda root: root / "specs" / "999_gone" / ".return-meta.json", "no such file"),
        (lambda root: root / "specs" / "state.json", "neither a project root"),
        (lambda root: root / ".return-meta.json", "not inside a project"),
    ],
)
def test_scan_of_a_bad_file_argument_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make: Any, message: str
) -> None:
    root = _project(tmp_path / "p")
    (root / ".return-meta.json").write_text("{}", encoding="utf-8")
    assert main(["scan", str(make(root))]) == 2
    assert message in capsys.readouterr().err


# --- a configured specs_dir that does not exist ------------------------------------------------


def test_configured_specs_dir_that_does_not_exist_is_a_configuration_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _project(tmp_path / "p")
    (root / ".postflightd.toml").write_text('specs_dir = "spces"\n', encoding="utf-8")
    assert main(["scan", str(root)]) == 2
    err = capsys.readouterr().err
    assert "specs_dir = 'spces'" in err
    assert ".postflightd.toml" in err
    assert main(["scan", str(root), "--apply"]) == 2


def test_default_specs_dir_missing_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A mistyped ROOT must not scan nothing and pass: a directory that holds neither the
    # specs directory nor .postflightd.toml is not a project root.
    root = tmp_path / "empty"
    root.mkdir()
    assert main(["scan", str(root)]) == 2
    assert "not a project root: it holds neither specs/ nor" in capsys.readouterr().err


# --- status and process take --select/--ignore -------------------------------------------------


def test_status_ignore_changes_which_files_count_as_invalid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _project(tmp_path / "p")
    assert main(["status", str(root), "--format", "json"]) == 0
    states = {r["task"]: r["state"] for r in _json(capsys)["roots"][0]["runs"]}
    assert states == {259: "waiting", 260: "invalid"}
    assert main(["status", str(root), "--format", "json", "--ignore", "PF303"]) == 0
    states = {r["task"]: r["state"] for r in _json(capsys)["roots"][0]["runs"]}
    assert states == {259: "waiting", 260: "waiting"}
    assert main(["status", str(root), "--select", "PF9"]) == 2
    assert "unknown rule code" in capsys.readouterr().err


def test_process_ignore_lets_a_file_apply(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _project(tmp_path / "p")
    meta = root / "specs" / B / ".return-meta.json"
    assert main(["process", str(meta)]) == 1
    assert "PF303" in capsys.readouterr().out
    assert meta.exists()
    assert main(["process", str(meta), "--ignore", "PF303,PF309"]) == 0
    assert not meta.exists()
    assert main(["process", str(root / "specs" / A / ".return-meta.json"), "--select", "XX1"]) == 2


# --- history --root --since --show --------------------------------------------------------------


def test_history_filters_by_root_and_time_and_shows_content(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    one, two = _project(tmp_path / "one"), _project(tmp_path / "two")
    assert main(["scan", "--apply", str(one)]) == 1
    assert main(["scan", "--apply", str(two)]) == 1
    capsys.readouterr()
    assert main(["history", "--events", "--format", "json"]) == 0
    everything = _json(capsys)
    assert {r["root"] for r in everything} == {str(one.resolve()), str(two.resolve())}

    monkeypatch.chdir(one)
    assert main(["history", "--events", "--root", ".", "--format", "json"]) == 0
    assert {r["root"] for r in _json(capsys)} == {str(one.resolve())}

    assert main(["history", "--events", "--since", "1h", "--format", "json"]) == 0
    assert len(_json(capsys)) == len(everything)
    assert main(["history", "--events", "--since", "2999-01-01", "--format", "json"]) == 0
    assert _json(capsys) == []
    assert main(["history", "--since", "2999-01-01"]) == 0
    assert "for that filter" in capsys.readouterr().err

    assert main(["history", "--root", str(one), "--task", "259", "--show"]) == 0
    out = capsys.readouterr().out
    assert '    "status": "researched",' in out  # the recorded file, indented under its row
    assert main(["history", "--events", "--root", str(one), "--task", "259"]) == 0
    assert '"status"' not in capsys.readouterr().out  # without --show: one line per row


@pytest.mark.parametrize("since", ["yesterday", "5 parsecs", "", "2026-13-01"])
def test_history_since_that_is_not_a_time_is_a_usage_error(
    since: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["history", "--since", since]) == 2
    assert "--since" in capsys.readouterr().err


# --- check-return reads the configuration and has --format github ------------------------------


def _return(summary: str) -> dict[str, Any]:
    return {
        "status": "failed",
        "summary": summary,
        "artifacts": [],
        "metadata": {
            "session_id": "sess_1735460684_a1b2c3",
            "agent_type": "general-research-agent",
            "delegation_depth": 1,
            "delegation_path": ["orchestrator", "research", "general-research-agent"],
        },
        "errors": [
            {
                "type": "timeout",
                "message": "ran out of time",
                "recoverable": True,
                "recommendation": "resume",
            }
        ],
    }


def test_check_return_applies_the_configured_severity(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "p"
    root.mkdir()
    ret = tmp_path / "return.json"
    ret.write_text(json.dumps(_return("x " * 220)), encoding="utf-8")  # 440 chars: PF701
    assert main(["check-return", str(ret), "--root", str(root)]) == 0
    assert "PF701 warning" in capsys.readouterr().out
    (root / ".postflightd.toml").write_text(
        '[validation.severity]\nPF701 = "error"\n', encoding="utf-8"
    )
    assert main(["check-return", str(ret), "--root", str(root)]) == 1
    assert "PF701 error" in capsys.readouterr().out
    assert main(["check-return", str(ret), "--root", str(root), "--ignore", "PF701"]) == 0
    capsys.readouterr()
    (root / ".postflightd.toml").write_text("[validation]\nstrictt = true\n", encoding="utf-8")
    assert main(["check-return", str(ret), "--root", str(root)]) == 2
    assert "strictt" in capsys.readouterr().err


def test_check_return_github_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ret = tmp_path / "return.json"
    doc = _return("x " * 220)
    doc["metadata"]["session_id"] = "sess_1_zzzzzz"
    ret.write_text(json.dumps(doc), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    code = main(
        ["check-return", "return.json", "--expect-session", "sess_2_yyyyyy", "--format", "github"]
    )
    assert code == 1
    lines = capsys.readouterr().out.splitlines()
    assert "::warning file=return.json,title=PF701::summary" in "\n".join(lines)
    assert any(line.startswith("::error file=return.json,title=PF405::") for line in lines)
