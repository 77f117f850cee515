"""state.json through the pipeline: parsed once while unchanged, and what apply_files leaves for
the next read."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from helpers.documents import researched_doc, task_entry
from helpers.project import project, write_artifact, write_meta
from postflightd.config import Config, policy_from
from postflightd.pipeline import apply as pipeline
from postflightd.pipeline.results import Outcome
from postflightd.project.root import Project


def test_state_cache_serves_only_the_file_it_was_read_from(tmp_path: Path) -> None:
    """A parsed state.json is reused while the file is unchanged, never after a rewrite."""
    from postflightd.fs.directory import Directory
    from postflightd.project.state import load_state

    root = project(tmp_path, [task_entry(1, "a")])
    path = root / "specs" / "state.json"
    specs = Directory.anchor(root / "specs")
    first = load_state(specs, "state.json")
    assert load_state(specs, "state.json") is first
    path.write_text(path.read_text("utf-8").replace('"a"', '"b"'), encoding="utf-8")
    second = load_state(specs, "state.json")
    assert second is not first
    assert second.tasks[1]["project_name"] == "b"
    path.write_text('{"active_projects": [', encoding="utf-8")
    assert not load_state(specs, "state.json").usable
    specs.close()


def test_postflight_remembers_the_state_it_wrote(tmp_path: Path) -> None:
    """After a commit the next read of state.json is the document written, not a re-parse."""
    from postflightd.fs.directory import Directory
    from postflightd.journal.database import Journal, default_journal_path
    from postflightd.project.metafiles import find_metadata_files
    from postflightd.project.state import load_state

    root = project(tmp_path, [task_entry(259, "prove_completeness")])
    write_artifact(root, "specs/259_prove_completeness/reports/research-001.md")
    write_meta(root, "259_prove_completeness", researched_doc())
    config = Config()
    with Project.open(root, config) as opened, Journal.open(default_journal_path()) as journal:
        (report,) = pipeline.apply_files(
            opened,
            list(find_metadata_files(opened.require_specs())),
            config,
            policy_from(config),
            journal,
            datetime.now(UTC),
        )
    assert report.outcome is Outcome.APPLIED
    with Directory.anchor(root / "specs") as specs:
        state = load_state(specs, "state.json")
    assert state.tasks[259]["status"] == "researched"
    assert state.doc == json.loads((root / "specs" / "state.json").read_text("utf-8"))
