"""``fold_state``: the group commit's transform is one value from (state.json read, files).

It names the files it applied and the ones it dropped (with why) and changes neither the
snapshot nor any file's report: ``commit_outcomes`` acts on what it returns.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from helpers.documents import researched_doc, task_entry
from helpers.project import project, write_artifact, write_meta
from postflightd.config import Config, policy_from
from postflightd.fs.atomic import read_snapshot
from postflightd.pipeline.apply import Triaged, triage
from postflightd.pipeline.check import check_file
from postflightd.pipeline.group_commit import fold_state
from postflightd.pipeline.results import Outcome, Ready
from postflightd.project.metafiles import find_metadata_files
from postflightd.project.root import Project

NOW = datetime(2026, 1, 28, 12, 0, tzinfo=UTC)


def test_fold_state_names_applied_and_dropped_files_and_changes_no_report(tmp_path: Path) -> None:
    root = project(tmp_path, [task_entry(259, "prove_completeness")])
    write_artifact(root, "specs/259_prove_completeness/reports/research-001.md")
    write_meta(root, "259_prove_completeness", researched_doc())
    # Task 999 is not in state.json: its outcome cannot be written (PF600).
    write_meta(root, "999_missing", researched_doc("999_missing"))
    config = Config()
    before = (root / "specs" / "state.json").read_bytes()
    with Project.open(root, config) as opened:
        specs = opened.require_specs()
        ready: list[Ready] = []
        for ref in sorted(find_metadata_files(specs), key=lambda r: r.task_dir):
            report = check_file(opened, ref, config, policy_from(config), NOW)
            report.outcome = Outcome.APPLIED
            item = report.ready()
            assert item is not None
            ready.append(item)
        findings_before = [list(item.report.findings) for item in ready]
        snapshot = read_snapshot(specs, "state.json")
        folded = fold_state(snapshot, ready, config, NOW)
        again = fold_state(snapshot, ready, config, NOW)

    applied, missing = ready
    assert folded.applied == (applied,)
    assert [(item, problem.code) for item, problem in folded.dropped] == [(missing, "PF600")]
    assert folded.data is not None
    written = json.loads(folded.data)
    assert written == folded.after
    assert written["active_projects"][0]["status"] == "researched"
    # Nothing but the returned value changed: the snapshot, the file, the reports.
    assert snapshot.raw == before == (root / "specs" / "state.json").read_bytes()
    assert [item.report.outcome for item in ready] == [Outcome.APPLIED, Outcome.APPLIED]
    assert [list(item.report.findings) for item in ready] == findings_before
    # A function of its inputs: folding the same read again gives the same value.
    assert again == folded


def test_fold_state_of_files_already_applied_writes_nothing(tmp_path: Path) -> None:
    root = project(tmp_path, [task_entry(259, "prove_completeness")])
    write_artifact(root, "specs/259_prove_completeness/reports/research-001.md")
    write_meta(root, "259_prove_completeness", researched_doc())
    config = Config()
    with Project.open(root, config) as opened:
        specs = opened.require_specs()
        (ref,) = find_metadata_files(specs)
        report = check_file(opened, ref, config, policy_from(config), NOW)
        item = report.ready()
        assert item is not None
        first = fold_state(read_snapshot(specs, "state.json"), [item], config, NOW)
        assert first.data is not None
        (root / "specs" / "state.json").write_bytes(first.data)
        second = fold_state(read_snapshot(specs, "state.json"), [item], config, NOW)
    # The entry already holds this outcome: state.json stays byte for byte as it is.
    assert second.applied == (item,)
    assert second.data is None
    assert second.after == second.before


def test_triage_decides_each_file_as_a_value_and_changes_no_report(tmp_path: Path) -> None:
    """Ready, dropped (PF104 ignored, so valid but unnumbered), deferred (not parsed yet)."""
    root = project(tmp_path, [task_entry(259, "prove_completeness")])
    write_artifact(root, "specs/259_prove_completeness/reports/research-001.md")
    write_meta(root, "259_prove_completeness", researched_doc())
    write_artifact(root, "specs/notes/reports/research-001.md")
    write_meta(root, "notes", researched_doc("notes"))
    write_meta(root, "260_half_written", '{"status": "resea')
    config = Config()
    policy = policy_from(config, ignore=["PF104"])
    with Project.open(root, config) as opened:
        refs = {r.task_dir: r for r in find_metadata_files(opened.require_specs())}
        reports = {name: check_file(opened, ref, config, policy, NOW) for name, ref in refs.items()}
    findings = {name: list(r.findings) for name, r in reports.items()}

    ready = triage(reports["259_prove_completeness"], policy)
    assert ready.outcome is Outcome.APPLIED
    assert ready.ready is not None and ready.ready.task == 259
    assert ready.dropped is None and ready.journaled

    unnumbered = triage(reports["notes"], policy)
    assert unnumbered.ready is None
    assert unnumbered.dropped is not None and unnumbered.dropped.code == "PF104"
    assert unnumbered.journaled

    deferred = triage(reports["260_half_written"], policy, report_unparsed=False)
    assert deferred == Triaged(Outcome.DEFERRED, journaled=False)
    assert triage(reports["260_half_written"], policy).outcome is Outcome.INVALID

    # Deciding changed nothing: the reports are applied to by the stage that journals them.
    assert all(r.outcome is None for r in reports.values())
    assert {name: list(r.findings) for name, r in reports.items()} == findings
