"""`postflightd scan` in-process: output formats, the JSON shape, filters, exit codes."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from helpers.documents import researched_doc, task_entry
from helpers.project import project, write_artifact, write_meta
from postflightd.cli import main
from postflightd.reporters.scan import REPORTERS
from postflightd.rules.findings import RULES

VALID, BROKEN, WARNED, STUCK = (
    "259_prove_completeness",
    "260_broken",
    "261_warned",
    "262_stuck",
)


def _doc(task_dir: str) -> dict[str, Any]:
    return researched_doc(task_dir)


@pytest.fixture
def four_tasks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Four tasks: one valid, one with an error, one with a warning only, one stuck.

    The tests run from inside the project, as a user does: output paths are relative to the
    current directory.
    """
    root = project(
        tmp_path / "proj",
        [
            task_entry(int(d.split("_")[0]), d.split("_", 1)[1])
            for d in (VALID, BROKEN, WARNED, STUCK)
        ],
    )
    for task_dir in (VALID, WARNED):
        write_artifact(root, f"specs/{task_dir}/reports/research-001.md")
    write_meta(root, VALID, _doc(VALID))
    broken = _doc(BROKEN)
    broken["status"] = "implemented"
    broken["artifacts"][0]["path"] = f"specs/{BROKEN}/impl.py"
    write_artifact(root, f"specs/{BROKEN}/impl.py")
    write_meta(root, BROKEN, broken)  # no completion_data: PF303
    warned = _doc(WARNED)
    warned["reviewer"] = "someone"  # PF205
    write_meta(root, WARNED, warned)
    write_meta(
        root,
        STUCK,
        {
            "status": "in_progress",
            "started_at": "2020-01-01T00:00:00Z",
            "artifacts": [],
            "partial_progress": {"stage": "initializing", "details": "Agent started"},
            "metadata": researched_doc()["metadata"],
        },
    )
    monkeypatch.chdir(root)
    return root


def scan_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = main(["scan", "--format", "json", *args])
    return code, json.loads(capsys.readouterr().out)


def meta_path(task_dir: str) -> str:
    return f"specs/{task_dir}/.return-meta.json"


def codes_by_path(report: dict[str, Any]) -> dict[str, list[str]]:
    return {f["path"]: [x["code"] for x in f["findings"]] for f in report["files"]}


def test_json_report_has_the_exact_shape_of_spec_4(
    four_tasks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report = scan_json(capsys, str(four_tasks))
    assert code == 1
    assert list(report) == ["roots", "files", "summary"]
    assert report["roots"] == [str(four_tasks.resolve())]
    for file in report["files"]:
        assert list(file) == ["path", "root", "task", "status", "valid", "stuck", "findings"]
        assert file["root"] == str(four_tasks.resolve())
        for f in file["findings"]:
            assert list(f) == ["code", "severity", "location", "message"]
            assert f["code"] in RULES
            assert f["severity"] in {"error", "warning"}
    by_path = {f["path"]: f for f in report["files"]}
    assert set(by_path) == {meta_path(d) for d in (VALID, BROKEN, WARNED, STUCK)}
    assert by_path[meta_path(VALID)] == {
        "path": meta_path(VALID),
        "root": str(four_tasks.resolve()),
        "task": 259,
        "status": "researched",
        "valid": True,
        "stuck": False,
        "findings": [],
    }
    broken = by_path[meta_path(BROKEN)]
    assert (broken["task"], broken["status"], broken["valid"]) == (260, "implemented", False)
    assert broken["findings"][0]["code"] == "PF303"
    assert broken["findings"][0]["location"] == "completion_data"
    assert by_path[meta_path(WARNED)]["valid"] is True
    assert by_path[meta_path(WARNED)]["findings"][0]["location"] == "reviewer"
    stuck = by_path[meta_path(STUCK)]
    assert stuck["stuck"] is True
    assert [f["code"] for f in stuck["findings"]] == ["PF602"]
    assert report["summary"] == {
        "files": 4,
        "valid": 2,
        "invalid": 2,
        "errors": 2,
        "warnings": 1,
        "stuck": 1,
    }


@pytest.mark.parametrize("fmt", tuple(REPORTERS))
def test_every_format_reports_the_errors_and_exits_1(
    four_tasks: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    code = main(["scan", "--format", fmt, str(four_tasks)])
    out = capsys.readouterr().out
    assert code == 1
    assert "PF303" in out
    assert "PF602" in out
    assert meta_path(BROKEN) in out
    if fmt in ("text", "github"):  # paths relative to the current directory (the root here)
        assert str(four_tasks.resolve()) not in out


@pytest.mark.parametrize("fmt", tuple(REPORTERS))
def test_every_format_exits_0_on_a_clean_project(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    root = project(tmp_path, [task_entry(259, "prove_completeness")])
    write_meta(root, VALID, _doc(VALID))
    write_artifact(root, f"specs/{VALID}/reports/research-001.md")
    assert main(["scan", "--format", fmt, str(root)]) == 0
    out = capsys.readouterr().out
    assert "PF" not in out


def test_text_format_is_one_line_per_finding_then_a_summary(
    four_tasks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["scan", str(four_tasks)])
    lines = capsys.readouterr().out.splitlines()
    pattern = re.compile(r"^specs/\d+_\w+/\.return-meta\.json:\d+:\d+: PF\d{3} (error|warning): .+")
    assert all(pattern.match(line) for line in lines[:-1]), lines
    # A missing top-level field points at the file's start; an unknown key at its own line.
    assert f"{meta_path(BROKEN)}:1:1: PF303 error: " in "\n".join(lines)
    assert re.search(
        rf"{re.escape(meta_path(WARNED))}:[2-9]\d*:\d+: PF205 warning: ", "\n".join(lines)
    )
    assert lines[-1] == "4 files: 2 valid, 2 invalid; 2 errors, 1 warning, 1 stuck"


def test_github_format_is_workflow_commands(
    four_tasks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["scan", "--format", "github", str(four_tasks)])
    lines = capsys.readouterr().out.splitlines()
    assert all(line.startswith(("::error file=", "::warning file=")) for line in lines)
    # PF303 is a missing top-level field: line 1; PF205 points at the unknown key's line.
    assert f"::error file={meta_path(BROKEN)},line=1,col=1,title=PF303::" in "\n".join(lines)
    assert re.search(
        rf"::warning file={re.escape(meta_path(WARNED))},line=\d+,col=\d+,title=PF205::",
        "\n".join(lines),
    )


def test_github_format_escapes_properties_and_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = project(tmp_path)
    monkeypatch.chdir(root)
    doc = _doc("1_a,b")
    doc["status"] = "50%\ndone"
    write_meta(root, "1_a,b", doc)
    main(["scan", "--format", "github", "--select", "PF202", str(root)])
    [line] = capsys.readouterr().out.splitlines()
    assert line.startswith("::error file=specs/1_a%2Cb/.return-meta.json,line=")
    assert ",title=PF202::" in line
    assert "50%25" in line


def test_select_keeps_only_those_codes(
    four_tasks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report = scan_json(capsys, "--select", "PF205", str(four_tasks))
    assert codes_by_path(report) == {
        meta_path(VALID): [],
        meta_path(BROKEN): [],
        meta_path(WARNED): ["PF205"],
        meta_path(STUCK): [],
    }
    # Stuck is PF602 shown: not selected, the stuck agent is neither counted nor failing.
    assert report["summary"]["stuck"] == 0
    assert code == 0


def test_select_accepts_prefixes_and_commas(
    four_tasks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, report = scan_json(capsys, "--select", "pf3,PF205", str(four_tasks))
    found = {c for codes in codes_by_path(report).values() for c in codes}
    assert found == {"PF303", "PF205"}


def test_ignore_repeated_and_comma_separated(
    four_tasks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, report = scan_json(capsys, "--ignore", "PF303", "--ignore", "PF205,PF602", str(four_tasks))
    assert all(codes == [] for codes in codes_by_path(report).values())


def test_warnings_alone_exit_0_and_strict_makes_them_fail(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = project(tmp_path, [task_entry(261, "warned")])
    write_artifact(root, f"specs/{WARNED}/reports/research-001.md")
    warned = _doc(WARNED)
    warned["reviewer"] = "someone"
    write_meta(root, WARNED, warned)
    code, report = scan_json(capsys, str(root))
    assert code == 0
    assert report["files"][0]["valid"] is True
    code, report = scan_json(capsys, "--strict", str(root))
    assert code == 1
    assert report["files"][0]["valid"] is False


def test_unknown_code_is_a_usage_error(
    four_tasks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["scan", "--select", "PF999", str(four_tasks)]) == 2
    captured = capsys.readouterr()
    assert "PF999" in captured.err
    assert captured.out == ""


def test_missing_root_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scan", str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_a_project_without_its_specs_dir_yet_is_noted_and_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / ".postflightd.toml").write_text("")  # a project, but no tasks yet
    code = main(["scan", "--format", "json", str(tmp_path)])
    captured = capsys.readouterr()
    assert code == 0
    assert json.loads(captured.out)["summary"]["files"] == 0
    assert "no specs/ directory" in captured.err


def test_default_root_is_the_current_directory(
    four_tasks: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(four_tasks)
    code, report = scan_json(capsys)
    assert code == 1
    assert report["roots"] == [str(four_tasks.resolve())]
    assert len(report["files"]) == 4


def test_several_roots_each_with_relative_paths(
    four_tasks: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = project(tmp_path / "other", [task_entry(1, "x")])
    write_meta(other, "1_x", {"status": "researched"})
    code, report = scan_json(capsys, str(four_tasks), str(other))
    assert code == 1
    assert report["roots"] == [str(four_tasks.resolve()), str(other.resolve())]
    assert len(report["files"]) == 5
    assert report["files"][-1]["path"] == "specs/1_x/.return-meta.json"
    assert all(not f["path"].startswith("/") for f in report["files"])
    assert report["summary"]["files"] == 5


def test_scan_never_modifies_the_project(
    four_tasks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = {p: p.read_bytes() for p in four_tasks.rglob("*") if p.is_file()}
    main(["scan", str(four_tasks)])
    capsys.readouterr()
    assert {p: p.read_bytes() for p in four_tasks.rglob("*") if p.is_file()} == before


def test_symlinked_root_is_reported_under_its_real_path(
    four_tasks: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    link = tmp_path / "link"
    link.symlink_to(four_tasks, target_is_directory=True)
    _, report = scan_json(capsys, str(link))
    assert report["roots"] == [str(four_tasks.resolve())]
    assert len(report["files"]) == 4


def test_no_command_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "usage:" in capsys.readouterr().err


def test_bad_flag_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        main(["scan", "--format", "xml"])
    assert raised.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_rules_command_lists_every_code(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules"]) == 0
    out = capsys.readouterr().out
    for code, rule in RULES.items():
        assert re.search(rf"^{code}\s+{rule.severity.value}\s+", out, re.MULTILINE)


def _broken_state_project(root: Path, files: int) -> Path:
    """``files`` valid metadata files under a state.json cut off in its third line."""
    project(root, [task_entry(n, f"t{n}") for n in range(1, files + 1)], artifacts=True)
    (root / "specs" / "state.json").write_text(
        '{"active_projects": [\n  {"project_number": 1,\n', encoding="utf-8"
    )
    for n in range(1, files + 1):
        write_meta(root, f"{n}_t{n}", researched_doc(f"{n}_t{n}"))
    return root


@pytest.mark.parametrize("fmt", tuple(REPORTERS))
def test_an_unusable_state_json_is_one_finding_at_its_own_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    root = _broken_state_project(tmp_path / "p", 5)
    monkeypatch.chdir(root)
    code = main(["scan", "--format", fmt])
    out, err = capsys.readouterr()
    assert code == 1
    assert "PF604" not in err  # said once, on stdout
    if fmt == "text":
        lines = [line for line in out.splitlines() if "PF604" in line]
        assert len(lines) == 1
        assert lines[0].startswith("specs/state.json:3:1: PF604 error: state.json:")
        # The five metadata files are valid; the counts line counts the one error.
        assert out.splitlines()[-1] == "5 files: 5 valid, 0 invalid; 1 error, 0 warnings"
    elif fmt == "json":
        doc = json.loads(out)
        found = [(file["path"], f["code"]) for file in doc["files"] for f in file["findings"]]
        assert found == [("specs/state.json", "PF604")]
        assert doc["summary"]["files"] == 5
        assert doc["summary"]["errors"] == 1
        assert doc["summary"]["valid"] == 5
    elif fmt == "github":
        assert out.splitlines() == [
            line for line in out.splitlines() if line.startswith("::error file=specs/state.json,")
        ]
        assert len(out.splitlines()) == 1
        assert "line=3,col=1,title=PF604::" in out
    else:
        results = json.loads(out)["runs"][0]["results"]
        assert len(results) == 1
        where = results[0]["locations"][0]["physicalLocation"]
        assert where["artifactLocation"]["uri"] == "specs/state.json"
        assert where["region"] == {"startLine": 3, "startColumn": 1}


def test_an_unusable_state_json_is_counted_once_by_statistics_and_apply(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _broken_state_project(tmp_path / "p", 3)
    monkeypatch.chdir(root)
    assert main(["scan", "--statistics"]) == 1
    out = capsys.readouterr().out
    assert [line.split()[:2] for line in out.splitlines()] == [["1", "PF604"]]
    assert main(["scan", "--apply"]) == 4
    out = capsys.readouterr().out
    assert out.count("PF604") == 1
    assert "3 files: 3 valid, 0 invalid; 1 error, 0 warnings" in out
    assert len(list((root / "specs").glob("*/.return-meta.json"))) == 3  # every file kept


def test_a_state_json_of_the_wrong_shape_points_at_the_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _broken_state_project(tmp_path / "p", 2)
    (root / "specs" / "state.json").write_text(
        '{"active_projects": [\n  {"project_number": 1},\n  "two"\n]}\n', encoding="utf-8"
    )
    monkeypatch.chdir(root)
    assert main(["scan"]) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith(
        "specs/state.json:3:3: PF604 error: state.json: active_projects[1] is not an object"
    )
    assert out.count("PF604") == 1


def test_process_with_an_unusable_state_json_says_it_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _broken_state_project(tmp_path / "p", 3)
    code = main(["process", str(root / "specs" / "1_t1" / ".return-meta.json")])
    out, err = capsys.readouterr()
    assert code == 4
    assert (out + err).count("PF604") == 1
    assert "the file ends at 3:1" in out


@pytest.mark.parametrize(
    ("status", "words"), [("implemented", "an implemented"), ("planned", "a planned")]
)
def test_pf308_says_a_or_an_as_the_status_word_needs(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    status: str,
    words: str,
) -> None:
    root = project(tmp_path / "p", [task_entry(1, "t1")], artifacts=True)
    doc = researched_doc("1_t1")
    doc.update(status=status, partial_progress={"stage": "done", "details": "x"})
    write_meta(root, "1_t1", doc)
    monkeypatch.chdir(root)
    main(["scan", "--select", "PF308"])
    out = capsys.readouterr().out
    assert f"partial_progress is left over on {words} file" in out


def test_a_bad_status_hides_no_other_finding_and_each_step_follows_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """ "done" is reported with the plain-path artifact and the missing one, all at once (an
    agent would otherwise see the artifacts only on its next try), and the findings of one
    step come in the order of their lines."""
    root = project(tmp_path / "proj", [task_entry(259, "prove_completeness")])
    doc = researched_doc()
    doc["status"] = "done"
    doc["artifacts"] = [
        "specs/259_prove_completeness/reports/research-001.md",
        {"type": "report", "path": "specs/259_prove_completeness/reports/gone.md"},
    ]
    doc["metadata"]["agent_type"] = ""
    write_artifact(root, "specs/259_prove_completeness/reports/research-001.md")
    write_meta(root, "259_prove_completeness", doc)
    monkeypatch.chdir(root)
    assert main(["scan"]) == 1
    lines = [
        re.sub(r"^\S+?:(\d+):(\d+): (PF\d+).*$", r"\1:\2 \3", line)
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("specs/")
    ]
    assert lines == [
        # the fields, in the file's order (a missing summary points at its artifact)
        "2:3 PF202",
        "5:5 PF207",
        "13:5 PF207",
        # the artifacts, judged as a research run's success (researched): an error
        "4:5 PF208",
        "7:7 PF502",
    ]
