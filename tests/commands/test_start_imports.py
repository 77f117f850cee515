"""What a command imports before it has a metadata file to check: pydantic (about half of
``scan``'s start-up) only when a file's check needs the models, or when a configuration file
is read. The built-in configuration is plain data. Nor does a plain scan import what only
another command, a contended lock or a large scan needs (``OFF_A_SCANS_PATH``).

Each case is a fresh process (the real CLI), so that nothing imported by another test hides
an import.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.documents import researched_doc
from helpers.project import project, write_meta

PYDANTIC = ("pydantic", "pydantic_core")
#: Each imported where it is used, which a plain scan of a project with no metadata file, or
#: of clean files, never reaches: platform (renameat2 without the C library's wrapper),
#: pickle (a scan large enough to fork), difflib (a diff, a near-miss status or option),
#: threading (the daemon; its locks come from _thread), the daemon's table of runs.
OFF_A_SCANS_PATH = ("platform", "pickle", "difflib", "threading", "postflightd.runs.table")

#: Runs the CLI in-process in a fresh interpreter (stdin: the given text), then prints the
#: exit code and the modules it loaded as the last line of stderr.
CODE = (
    "import json, sys\n"
    "from postflightd.cli import main\n"
    "try:\n"
    "    code = main(sys.argv[1:])\n"
    "except SystemExit as exc:\n"
    "    code = exc.code\n"
    "print(json.dumps({'code': code, 'modules': sorted(sys.modules)}), file=sys.stderr)\n"
)


def _run(*args: str | Path, stdin: str = "") -> tuple[int, str, str, set[str]]:
    done = subprocess.run(
        [sys.executable, "-c", CODE, *map(str, args)],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    *err, last = done.stderr.splitlines()
    report = json.loads(last)
    return report["code"], done.stdout, "\n".join(err), set(report["modules"])


def _pydantic(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in PYDANTIC))


def test_a_scan_of_a_project_with_no_metadata_file_imports_no_pydantic(tmp_path: Path) -> None:
    root = project(tmp_path / "proj", 2)
    code, out, _, modules = _run("scan", "--format", "json", root)
    assert code == 0
    assert json.loads(out)["summary"]["files"] == 0
    assert _pydantic(modules) == []
    assert "postflightd.config" in modules  # the defaults were built, as plain data
    assert sorted(modules & set(OFF_A_SCANS_PATH)) == []


def test_version_imports_no_pydantic() -> None:
    code, out, _, modules = _run("--version")
    assert code == 0
    assert out.startswith("postflightd ")
    assert _pydantic(modules) == []
    assert sorted(modules & {*OFF_A_SCANS_PATH, "typing"}) == []  # the parser alone


def test_a_stop_with_no_metadata_file_imports_no_pydantic(tmp_path: Path) -> None:
    root = project(tmp_path / "proj", 2)
    payload = {"cwd": str(root), "hook_event_name": "Stop", "stop_hook_active": False}
    code, out, _, modules = _run("hook", "claude", stdin=json.dumps(payload))
    assert code == 0
    assert json.loads(out) == {}
    assert "postflightd.config" in modules
    assert _pydantic(modules) == []
    # The hook opens the journal (crash litter is settled with it): the rest is its own.
    assert sorted(modules & {"platform", "difflib", "hashlib"}) == []


def test_a_scan_of_clean_files_imports_no_pydantic(tmp_path: Path) -> None:
    """A clean file needs no model (``rules.clean``), nor does one clean but for fields the
    contract does not know (reported as PF205), and the configuration needs none."""
    root = project(tmp_path / "proj", 2)
    write_meta(root, "1_task1", researched_doc("1_task1"))
    extras = researched_doc("2_task2")
    extras["metadata"]["phase_count"] = 4
    write_meta(root, "2_task2", extras)
    code, out, _, modules = _run("scan", "--format", "json", root)
    assert code == 0
    report = json.loads(out)
    assert report["summary"]["valid"] == 2
    assert [f["code"] for f in report["files"][1]["findings"]] == ["PF205"]
    assert _pydantic(modules) == []
    assert sorted(modules & set(OFF_A_SCANS_PATH)) == []


def test_a_scan_of_a_file_that_is_not_clean_checks_it_without_pydantic(tmp_path: Path) -> None:
    """The models' own schema, stored (``models.metadata_core``), checks its types with
    pydantic-core alone; applying the file once it is clean builds its typed value without a
    validator (``rules.typed``)."""
    root = project(tmp_path / "proj", 1)
    doc = researched_doc("1_task1")
    doc["status"] = 5
    write_meta(root, "1_task1", doc)
    code, out, _, modules = _run("scan", "--format", "json", root)
    assert code == 1
    findings = json.loads(out)["files"][0]["findings"]
    assert [f["code"] for f in findings if f["code"] == "PF201"] == ["PF201"]
    assert "pydantic_core" in modules
    assert "pydantic" not in modules
    doc["status"] = "researched"
    write_meta(root, "1_task1", doc)
    code, _, _, modules = _run("scan", "--apply", "--dry-run", root)
    assert code == 0
    assert _pydantic(modules) == []


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("colour = 'red'\n", "unknown key 'colour'"),
        ("[validation]\nstrict = 'yes'\n", "key 'validation.strict': should be a valid boolean"),
        ("[timeouts]\nresearch = inf\n", "key 'timeouts.research': should be a finite number"),
    ],
)
def test_a_projects_own_configuration_file_is_still_validated(
    tmp_path: Path, text: str, words: str
) -> None:
    root = project(tmp_path / "proj", 1, config=text)
    code, out, err, modules = _run("scan", root)
    assert code == 2
    assert out == ""
    assert f"postflightd: {root / '.postflightd.toml'}: bad configuration: {words}" in err
    assert "pydantic" in modules
