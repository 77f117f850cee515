"""pipeline/unrecordable.py (PF106): what no file or journal row can hold is found in the file
that holds it, with where and why, before a batch depends on it."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from helpers.documents import researched_doc, task_entry
from helpers.project import project, write_artifact
from postflightd.config import Config, policy_from
from postflightd.pipeline.check import check_file
from postflightd.pipeline.results import FileReport
from postflightd.pipeline.unrecordable import printable, unrecordable, unwritable_finding
from postflightd.project.metafiles import find_metadata_files
from postflightd.project.root import Project

NOW = datetime(2026, 1, 28, 12, 0, tzinfo=UTC)
META = ".return-meta.json"


def checked(tmp_path: Path, task_dir: str, text: str) -> FileReport:
    """The report of one metadata file, written as ``text`` (JSON escapes kept as written)."""
    number = int(task_dir.partition("_")[0])
    tasks = [task_entry(number, task_dir.partition("_")[2])] if number < 1 << 63 else []
    root = project(tmp_path / "p", tasks)
    write_artifact(root, f"specs/{task_dir}/reports/research-001.md")
    (root / "specs" / task_dir / META).write_text(text, encoding="utf-8")
    config = Config()
    with Project.open(root, config) as opened:
        (ref,) = find_metadata_files(opened.require_specs())
        return check_file(opened, ref, config, policy_from(config), NOW)


def doc_text(task_dir: str, **replace: str) -> str:
    """researched_doc as JSON text, with some values replaced by raw JSON text."""
    doc = researched_doc(task_dir)
    text = json.dumps(doc)
    for key, raw in replace.items():
        old = json.dumps(doc["metadata"][key] if key == "session_id" else doc[key])
        assert old in text
        text = text.replace(old, raw, 1)
    return text


def test_printable_spells_out_what_utf8_cannot_hold() -> None:
    assert printable("plain ü") == "plain ü"
    assert printable("bad\udcffname") == "bad\\xffname"  # a name byte, surrogate-escaped
    assert printable("half \ud800 pair") == "half \\ud800 pair"


def test_a_clean_file_is_recordable(tmp_path: Path) -> None:
    task_dir = "259_prove_completeness"
    assert unrecordable(checked(tmp_path, task_dir, doc_text(task_dir))) is None


def test_a_lone_surrogate_in_the_session_is_pf106_at_its_place(tmp_path: Path) -> None:
    task_dir = "259_prove_completeness"
    report = checked(tmp_path, task_dir, doc_text(task_dir, session_id='"sess_\\ud800"'))
    found = unrecordable(report)
    assert found is not None
    assert (found.code, found.location) == ("PF106", "metadata.session_id")
    assert "sess_\\ud800" in found.message  # spelled out, never the raw half pair
    assert found.message.encode("utf-8")


def test_a_task_number_past_64_bits_is_pf106(tmp_path: Path) -> None:
    task_dir = f"{1 << 63}_huge"
    found = unrecordable(checked(tmp_path, task_dir, doc_text(task_dir)))
    assert found is not None
    assert found.code == "PF106"
    assert "too large to record" in found.message


def test_an_unwritable_value_is_named_by_its_path_in_the_document(tmp_path: Path) -> None:
    """What the group commit reports for a file whose outcome json cannot write."""
    task_dir = "259_prove_completeness"
    report = checked(tmp_path, task_dir, doc_text(task_dir, next_steps='"run \\udfff"'))
    found = unwritable_finding(report, ValueError("surrogates not allowed"))
    assert (found.code, found.location) == ("PF106", "next_steps")
    assert "'run \\udfff' holds a lone surrogate" in found.message
    assert "the other files of the batch were applied" in found.message
