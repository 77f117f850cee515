"""Cost in proportion to the file: 100 findings per file, then "and N more"."""

from __future__ import annotations

import json
import re
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from helpers.documents import SESSION, task_entry
from helpers.project import project, write_meta
from postflightd.cli import main
from postflightd.journal.database import default_journal_path
from postflightd.pipeline.check import MAX_LIST_ITEMS, trim_long_lists
from postflightd.rules.findings import MAX_FINDINGS_PER_FILE, Severity, cap_findings, finding


def partial_doc(errors: list[Any]) -> dict[str, Any]:
    return {
        "status": "partial",
        "artifacts": [],
        "partial_progress": {"stage": "s", "details": "d"},
        "metadata": {
            "session_id": SESSION,
            "agent_type": "a",
            "delegation_depth": 0,
            "delegation_path": ["o", "a"],
        },
        "errors": errors,
    }


def test_cap_keeps_the_first_hundred_and_sums_up_the_rest() -> None:
    findings = [finding("PF205", f"x{i}", "unknown") for i in range(150)]
    findings += [finding("PF200", f"y{i}", "missing") for i in range(30)]
    capped = cap_findings(findings)
    assert len(capped) == MAX_FINDINGS_PER_FILE + 1
    assert capped[:100] == findings[:100]
    more = capped[-1]
    assert more.message.startswith("and 80 more (PF205 x50, PF200 x30)")
    # An error beyond the cut still counts as an error.
    assert more.severity is Severity.ERROR
    assert cap_findings(findings[:100]) == findings[:100]


def test_cap_of_warnings_only_stays_a_warning() -> None:
    findings = [finding("PF205", f"x{i}", "unknown") for i in range(101)]
    assert cap_findings(findings)[-1].severity is Severity.WARNING


@pytest.mark.parametrize(
    "doc",
    [
        partial_doc([{}] * 5000),  # empty entries: several findings each
        partial_doc([1] * 5000),  # wrong types
        {**partial_doc([]), "metadata": {"session_id": SESSION, "delegation_path": [7] * 5000}},
        {**partial_doc([]), "artifacts": [[[[]]]] * 3000},
        [[{}] * 2000],  # not an object at all
    ],
    ids=["empty-errors", "int-errors", "int-delegation-path", "nested-artifacts", "top-list"],
)
def test_hostile_arrays_are_cut_and_findings_capped_in_scan_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], doc: Any
) -> None:
    root = project(tmp_path / "p", [task_entry(259, "x")])
    write_meta(root, "259_x", doc)
    assert main(["scan", str(root), "--format", "json"]) == 1
    (file,) = json.loads(capsys.readouterr().out)["files"]
    assert not file["valid"]
    assert 1 <= len(file["findings"]) <= MAX_FINDINGS_PER_FILE + 1


def test_a_long_array_is_an_error_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = project(tmp_path / "p", [task_entry(259, "x")])
    # Just under 1 MiB (max_file_bytes): a hostile file of 340,000 findings' worth.
    write_meta(root, "259_x", json.dumps(partial_doc([{}] * 340_000), separators=(",", ":")))
    assert main(["scan", str(root), "--format", "json"]) == 1
    (file,) = json.loads(capsys.readouterr().out)["files"]
    first, last = file["findings"][0], file["findings"][-1]
    assert (first["code"], first["location"]) == ("PF201", "errors")
    assert "340,000 entries" in first["message"]
    assert last["message"].startswith("and ")
    assert "only the first 100 findings are kept" in last["message"]


def test_text_output_and_the_journal_hold_at_most_101_findings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = project(tmp_path / "p", [task_entry(259, "x")])
    write_meta(root, "259_x", partial_doc([{}] * 900))
    assert main(["scan", str(root), "--apply"]) == 1
    out = capsys.readouterr().out
    finding_line = re.compile(r"\.return-meta\.json:\d+:\d+: PF")
    assert sum(1 for line in out.splitlines() if finding_line.search(line)) == 101
    with closing(sqlite3.connect(default_journal_path())) as conn:
        rows = conn.execute("SELECT findings FROM observations WHERE kind = 'validated'").fetchall()
    assert rows and all(len(json.loads(r[0])) <= 101 for r in rows)


def test_trim_is_iterative_and_leaves_short_arrays_alone() -> None:
    deep: Any = []
    for _ in range(20_000):  # deeper than the interpreter's recursion limit
        deep = [deep]
    assert trim_long_lists(deep) == []
    doc = {"a": [1] * MAX_LIST_ITEMS, "b": {"c": [0] * (MAX_LIST_ITEMS + 1)}}
    (found,) = trim_long_lists(doc)
    assert found.location == "b.c"
    assert len(doc["a"]) == MAX_LIST_ITEMS
    assert len(doc["b"]["c"]) == MAX_LIST_ITEMS
    assert trim_long_lists("text") == []
