"""Reading metadata files, markers and state.json: every bad input gets a finding, never raises."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers.documents import SESSION, researched_doc, task_entry
from helpers.needs import unavailable
from helpers.project import project, write_artifact, write_meta
from postflightd.fs.directory import Directory, open_specs
from postflightd.models.files import META_NAME, parse_json
from postflightd.project.meta_file import Loaded, Marker, read_marker, read_task, task_context
from postflightd.project.metafiles import (
    TASK_DIR_RE,
    MetaFileRef,
    MetaFiles,
    find_metadata_files,
    has_metadata_file,
    parse_task_dir,
    task_order,
)
from postflightd.project.state import MAX_STATE_FILES, STATE_CACHE, StateView, load_state
from postflightd.rules.probe import ArtifactState

LIMIT = 1024 * 1024


def read_metadata(path: Path, limit: int = LIMIT) -> Loaded:
    """``specs/<task>/<file>`` read as every command reads it: its task directory opened once."""
    path.parent.parent.mkdir(parents=True, exist_ok=True)
    with Directory.anchor(path.parent.parent) as specs:
        loaded, _ = read_task(specs, MetaFileRef.at(path), limit)
    return loaded


def find(specs_dir: Path) -> list[MetaFileRef]:
    with Directory.anchor(specs_dir) as specs:
        return list(find_metadata_files(specs))


def test_meta_files_in_task_order_are_the_refs_find_metadata_files_gives(
    tmp_path: Path,
) -> None:
    """The compact list a scan holds: the same refs, in task order, made when read."""
    specs = tmp_path / "specs"
    for name in ("100_x", "14_x", "2_y", "014_z", "notes", "9_no_meta"):
        (specs / name).mkdir(parents=True)
        if name != "9_no_meta":
            (specs / name / META_NAME).write_text("{}", encoding="utf-8")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / META_NAME).write_text("{}", encoding="utf-8")
    (specs / "7_link").symlink_to(outside, target_is_directory=True)
    expected = sorted(find(specs), key=lambda r: task_order(r.task_dir))
    with Directory.anchor(specs) as directory:
        files = MetaFiles.find(directory)
    assert [r.task_dir for r in files] == ["2_y", "7_link", "014_z", "14_x", "100_x", "notes"]
    assert list(files) == expected
    assert [files[i] for i in range(len(files))] == expected
    assert files[-1] == expected[-1] and files[1].refused is not None  # the link: PF100
    with pytest.raises(IndexError):
        files[len(files)]
    # Slices are views: a chunk of a chunk, empty ones, past the end.
    assert list(files[1:4]) == expected[1:4]
    assert list(files[1:5][1:]) == expected[2:5]
    assert len(files[4:100]) == 2 and list(files[4:100]) == expected[4:]
    assert list(files[5:2]) == [] and len(files[5:2]) == 0
    assert files[1:4][-1] == expected[3]
    with pytest.raises(ValueError, match="contiguous"):
        files[::2]


def test_task_directories_listed_without_looking_are_asked_one_by_one(tmp_path: Path) -> None:
    """``look=False``: every task directory in the same task order, the ones without a
    metadata file and links too, none looked into; ``has_metadata_file`` asks each, as the
    listing would have, and then the refs with a file are the listing's own."""
    specs = tmp_path / "specs"
    for name in ("100_x", "14_x", "2_y", "014_z", "notes", "9_no_meta"):
        (specs / name).mkdir(parents=True)
        if name != "9_no_meta":
            (specs / name / META_NAME).write_text("{}", encoding="utf-8")
    (specs / "stray.txt").write_text("", encoding="utf-8")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / META_NAME).write_text("{}", encoding="utf-8")
    (specs / "7_link").symlink_to(outside, target_is_directory=True)
    (specs / "8_empty_link").symlink_to(tmp_path / "nowhere", target_is_directory=True)
    with Directory.anchor(specs) as directory:
        listed = MetaFiles.find(directory, look=False)
        assert [r.task_dir for r in listed] == [
            "2_y", "7_link", "8_empty_link", "9_no_meta", "014_z", "14_x", "100_x", "notes"
        ]  # fmt: skip
        there = [r for r in listed if has_metadata_file(directory, r)]
        assert there == list(MetaFiles.find(directory))
        (specs / "9_no_meta" / META_NAME).write_text("{}", encoding="utf-8")
        assert has_metadata_file(directory, listed[3])  # asked when the ref is checked


def state_at(path: Path) -> StateView:
    with Directory.anchor(path.parent) as specs:
        return load_state(specs, path.name)


def marker_at(task: Path) -> Marker | None:
    with Directory.anchor(task) as directory:
        return read_marker(directory)


def failure_code(path: Path, limit: int = LIMIT) -> str | None:
    loaded = read_metadata(path, limit)
    return loaded.failure.code if loaded.failure else None


# --- the metadata file ----------------------------------------------------------------------


def test_valid_file_is_read_and_parsed(tmp_path: Path) -> None:
    path = write_meta(tmp_path, "259_x", researched_doc())
    loaded = read_metadata(path, LIMIT)
    assert loaded.failure is None
    assert loaded.doc == researched_doc()
    assert loaded.identity is not None
    assert loaded.identity.size == path.stat().st_size


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"status": "researched", "artif', "the file ends inside a string that starts at 1:26"),
        ('{"status": "researched", "artifacts": [', "the file ends at 1:40 before its JSON"),
        ("", "empty"),
        ("   \n", "empty"),
        ("Research completed successfully", "not valid JSON at 1:1: a value was expected"),
        ('{"a": NaN}', "NaN"),
        ('{"a": 1} {"b": 2}', "more text after the end of the JSON value"),
        ("\ufeff{}", "byte-order mark"),
        ("\ufeff", "byte-order mark"),
        ("\u00a0\u2003\n", "empty"),
    ],
    ids=[
        "truncated-key",
        "truncated-array",
        "empty",
        "blank",
        "plain-text",
        "nan",
        "two",
        "bom",
        "bom-alone",
        "unicode-blank",
    ],
)
def test_unparseable_text_is_pf102(tmp_path: Path, content: str, message: str) -> None:
    path = write_meta(tmp_path, "1_x", content)
    loaded = read_metadata(path, LIMIT)
    assert loaded.failure is not None
    assert loaded.failure.code == "PF102"
    assert message in loaded.failure.message
    assert loaded.doc is None


def test_non_utf8_bytes_are_pf102_naming_the_offset(tmp_path: Path) -> None:
    path = write_meta(tmp_path, "1_x", "{}")
    path.write_bytes(b'{"status": "r\xe9searched"}')
    loaded = read_metadata(path, LIMIT)
    assert loaded.failure is not None
    assert loaded.failure.code == "PF102"
    assert "0xe9 at offset 13" in loaded.failure.message


@pytest.mark.parametrize("opener", ["[", '{"a":'])
def test_json_nested_100000_levels_is_pf102_not_a_recursion_error(
    tmp_path: Path, opener: str
) -> None:
    closer = "]" if opener == "[" else "}"
    depth = 100_000
    inner = "1" if opener != "[" else ""
    path = write_meta(tmp_path, "1_x", opener * depth + inner + closer * depth)
    loaded = read_metadata(path, 10 * LIMIT)
    assert loaded.failure is not None
    assert loaded.failure.code == "PF102"
    assert "nested too deeply" in loaded.failure.message


@pytest.mark.parametrize("value", ["[1, 2]", '"text"', "42", "null", "true"])
def test_non_object_json_is_read_for_the_rules_to_judge(tmp_path: Path, value: str) -> None:
    """The loader parses any JSON value; PF103 is the validator's verdict."""
    loaded = read_metadata(write_meta(tmp_path, "1_x", value), LIMIT)
    assert loaded.failure is None
    assert loaded.doc == json.loads(value)


def test_50_mb_sparse_file_is_pf101_without_reading_it(tmp_path: Path) -> None:
    path = write_meta(tmp_path, "1_x", "")
    with path.open("r+b") as fh:
        fh.truncate(50 * 1024 * 1024)
    loaded = read_metadata(path, LIMIT)
    assert loaded.failure is not None
    assert loaded.failure.code == "PF101"
    assert "52428800 bytes" in loaded.failure.message
    assert loaded.raw is None


def test_file_just_at_the_limit_is_read(tmp_path: Path) -> None:
    text = json.dumps(researched_doc())
    path = write_meta(tmp_path, "1_x", text)
    assert failure_code(path, limit=len(text)) is None
    assert failure_code(path, limit=len(text) - 1) == "PF101"


def test_symlinked_metadata_file_is_pf100_and_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.json"
    target.write_text(json.dumps(researched_doc()), encoding="utf-8")
    task = tmp_path / "specs" / "1_x"
    task.mkdir(parents=True)
    (task / META_NAME).symlink_to(target)
    loaded = read_metadata(task / META_NAME, LIMIT)
    assert loaded.failure is not None
    assert loaded.failure.code == "PF100"
    assert "symbolic link" in loaded.failure.message
    assert loaded.raw is None


def test_dangling_symlink_is_pf100(tmp_path: Path) -> None:
    task = tmp_path / "specs" / "1_x"
    task.mkdir(parents=True)
    (task / META_NAME).symlink_to(tmp_path / "nowhere")
    assert failure_code(task / META_NAME) == "PF100"


def test_directory_named_like_the_metadata_file_is_pf100(tmp_path: Path) -> None:
    path = tmp_path / "specs" / "1_x" / META_NAME
    path.mkdir(parents=True)
    loaded = read_metadata(path, LIMIT)
    assert loaded.failure is not None
    assert loaded.failure.code == "PF100"
    assert "a directory" in loaded.failure.message


def test_fifo_is_pf100_and_never_blocks(tmp_path: Path) -> None:
    path = tmp_path / "specs" / "1_x" / META_NAME
    path.parent.mkdir(parents=True)
    os.mkfifo(path)
    loaded = read_metadata(path, LIMIT)
    assert loaded.failure is not None
    assert loaded.failure.code == "PF100"
    assert "FIFO" in loaded.failure.message


def test_vanished_file_is_pf105(tmp_path: Path) -> None:
    assert failure_code(tmp_path / "specs" / "1_x" / META_NAME) == "PF105"


def test_parse_json_never_raises_on_odd_bytes() -> None:
    for raw in (b"\x00", b"\xff\xfe", b"{" * 5000, b'"\\ud800"', b"1e999999", b"-"):
        value, problem = parse_json(raw)
        assert problem is not None or value is not None or raw == b"null"


# --- finding files --------------------------------------------------------------------------


def test_padded_and_unpadded_task_dirs_are_found(tmp_path: Path) -> None:
    root = project(tmp_path)
    write_meta(root, "014_padded", researched_doc())
    write_meta(root, "14_unpadded", researched_doc())
    write_meta(root, "not_a_task", researched_doc())
    (root / "specs" / "15_no_meta").mkdir()
    (root / "specs" / "README.md").write_text("x", encoding="utf-8")
    refs = list(find(root / "specs"))
    assert [r.task_dir for r in refs] == ["014_padded", "14_unpadded", "not_a_task"]
    assert all(r.refused is None for r in refs)
    assert parse_task_dir("014_padded") == (14, "padded")
    assert parse_task_dir("14_unpadded") == (14, "unpadded")
    assert parse_task_dir("not_a_task") is None
    assert parse_task_dir("14") is None


@pytest.mark.parametrize(
    "name",
    [
        "14_x",
        "014_a_b",
        "0_x",
        "14_",
        "_x",
        "14",
        "x_14",
        "14_a b",
        "14_a\tb",
        "14_a\u00a0b",
        "14_a\u2028b",
        "14_a\x1cb",
        "14_\u00e9t\u00e9",
        "14_\u200bx",
        "\u0662\u0666_x",
        "\u00b9_x",
        "1\u00b2_x",
        "14__x",
        "14_x_",
        "+14_x",
        "1 4_x",
    ],
)
def test_a_task_directory_name_is_read_as_its_pattern_says(name: str) -> None:
    """The string-method reading of a name agrees with the pattern on every kind of name:
    whitespace of any script in the slug, digits other than ASCII, no slug, no number."""
    match = TASK_DIR_RE.fullmatch(name)
    expected = (int(match.group(1)), match.group(2)) if match else None
    assert parse_task_dir(name) == expected


def test_symlinked_task_dir_is_refused_not_entered(tmp_path: Path) -> None:
    root = project(tmp_path / "root")
    outside = tmp_path / "outside" / "specs" / "7_away"
    write_meta(tmp_path / "outside", "7_away", researched_doc())
    (root / "specs" / "7_away").symlink_to(outside, target_is_directory=True)
    (root / "specs" / "8_empty_link").symlink_to(tmp_path, target_is_directory=True)
    refs = list(find(root / "specs"))
    assert [r.task_dir for r in refs] == ["7_away"]
    assert refs[0].refused is not None
    assert refs[0].refused.code == "PF100"
    assert "symbolic link" in refs[0].refused.message


def test_directory_named_like_the_metadata_file_is_found(tmp_path: Path) -> None:
    """It is listed (and then refused by read_metadata), not silently skipped."""
    root = project(tmp_path)
    (root / "specs" / "1_x" / META_NAME).mkdir(parents=True)
    assert [r.task_dir for r in find(root / "specs")] == ["1_x"]


def test_missing_specs_dir_is_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        open_specs(tmp_path, "specs")


# --- state.json -----------------------------------------------------------------------------


def test_state_json_is_read(tmp_path: Path) -> None:
    root = project(tmp_path, [task_entry(259, "prove_completeness")])
    state = state_at(root / "specs" / "state.json")
    assert state.usable
    assert state.tasks[259]["project_name"] == "prove_completeness"


def test_missing_state_json_is_not_usable_but_not_existing(tmp_path: Path) -> None:
    state = state_at(tmp_path / "state.json")
    assert not state.exists
    assert not state.usable


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ('{"active_projects": [', "state.json: the file ends at 1:22"),
        ("", "empty"),
        ("[]", "not a JSON object"),
        ('{"next_project_number": 1}', "active_projects"),
        ('{"active_projects": {}}', "active_projects"),
        ('{"active_projects": [1]}', "active_projects[0]"),
        ('{"active_projects": [{"project_number": "259"}]}', "project_number"),
        ('{"active_projects": [{"project_number": true}]}', "project_number"),
    ],
)
def test_corrupt_state_json_describes_the_problem(
    tmp_path: Path, content: str, problem: str
) -> None:
    path = tmp_path / "state.json"
    path.write_text(content, encoding="utf-8")
    state = state_at(path)
    assert state.exists
    assert not state.usable
    assert state.problem is not None
    assert problem in state.problem


def test_state_json_that_is_a_directory(tmp_path: Path) -> None:
    (tmp_path / "state.json").mkdir()
    state = state_at(tmp_path / "state.json")
    assert not state.usable
    assert state.problem is not None
    assert "directory" in state.problem


def test_state_cache_holds_one_parse_per_file_until_cleared(tmp_path: Path) -> None:
    """The cache starts empty in every test (conftest clears it) and ``clear`` forgets."""
    assert STATE_CACHE.size == 0
    one = project(tmp_path / "one", [task_entry(1, "a")]) / "specs" / "state.json"
    two = project(tmp_path / "two", [task_entry(2, "b")]) / "specs" / "state.json"
    first = state_at(one)
    assert state_at(one) is first
    state_at(two)
    assert STATE_CACHE.size == 2
    STATE_CACHE.clear()
    assert STATE_CACHE.size == 0
    again = state_at(one)
    assert again is not first
    assert again.tasks == first.tasks


def test_state_cache_keeps_the_most_recently_used_files_only(tmp_path: Path) -> None:
    """Past MAX_STATE_FILES the least recently used parse goes: memory stays bounded
    whatever the number of roots, and a file read again is parsed again."""
    paths = [
        project(tmp_path / f"r{n}", [task_entry(n, "a")]) / "specs" / "state.json"
        for n in range(MAX_STATE_FILES + 1)
    ]
    first = [state_at(p) for p in paths[:MAX_STATE_FILES]]
    assert state_at(paths[0]) is first[0]  # used again: now the most recent
    state_at(paths[-1])  # one too many: the least recently used, paths[1], goes
    assert STATE_CACHE.size == MAX_STATE_FILES
    assert state_at(paths[0]) is first[0]
    assert state_at(paths[2]) is first[2]
    again = state_at(paths[1])
    assert again is not first[1]
    assert again.tasks == first[1].tasks


def test_an_unusable_state_json_is_not_cached(tmp_path: Path) -> None:
    path = project(tmp_path).joinpath("specs", "state.json")
    path.write_text('{"active_projects": [', encoding="utf-8")
    assert not state_at(path).usable
    assert STATE_CACHE.size == 0


# --- the marker -----------------------------------------------------------------------------


def _marker(tmp_path: Path, content: str | bytes) -> Path:
    task = tmp_path / "specs" / "259_prove_completeness"
    task.mkdir(parents=True, exist_ok=True)
    data = content.encode() if isinstance(content, str) else content
    (task / ".postflight-pending").write_bytes(data)
    return task


def test_marker_names_session_and_operation(tmp_path: Path) -> None:
    marker = {
        "session_id": "sess_1_abcdef",
        "skill": "skill-researcher",
        "task_number": 259,
        "operation": "research",
        "reason": "postflight pending",
        "created": "2026-01-28T10:30:00Z",
        "stop_hook_active": False,
    }
    task = _marker(tmp_path, json.dumps(marker))
    read = marker_at(task)
    assert read is not None
    assert (read.session_id, read.operation, read.problem) == ("sess_1_abcdef", "research", None)


def test_absent_marker_is_none(tmp_path: Path) -> None:
    (tmp_path / "1_x").mkdir()
    assert marker_at(tmp_path / "1_x") is None


def test_empty_marker_names_no_session_without_a_problem(tmp_path: Path) -> None:
    read = marker_at(_marker(tmp_path, ""))
    assert read is not None
    assert read.session_id is None
    assert read.problem is None


@pytest.mark.parametrize("content", ["{not json", "[1]", b"\xff", '"sess_1_abcdef"'])
def test_invalid_marker_is_pf605_and_names_no_session(tmp_path: Path, content: str | bytes) -> None:
    root = project(tmp_path, [task_entry(259, "prove_completeness")])
    task = _marker(root, content)
    ctx = task_context(task.name, state_at(root / "specs" / "state.json"), marker_at(task))
    assert [f.code for f in ctx.marker_findings] == ["PF605"]
    assert ctx.marker_session is None
    # The state.json session is the expected one when the marker names none.
    assert ctx.expected_session == (SESSION, "state.json")


def test_task_context_marker_session_wins(tmp_path: Path) -> None:
    root = project(tmp_path, [task_entry(259, "prove_completeness", language="meta")])
    task = _marker(root, json.dumps({"session_id": "sess_2_bbbbbb"}))
    ctx = task_context(task.name, state_at(root / "specs" / "state.json"), marker_at(task))
    assert ctx.number == 259
    assert ctx.slug == "prove_completeness"
    assert ctx.state_known
    assert ctx.is_meta is True
    assert ctx.expected_session == ("sess_2_bbbbbb", ".postflight-pending")


def test_task_context_without_state_json(tmp_path: Path) -> None:
    root = project(tmp_path)
    task = root / "specs" / "014_padded"
    task.mkdir()
    ctx = task_context(task.name, state_at(root / "specs" / "state.json"), marker_at(task))
    assert (ctx.number, ctx.slug, ctx.state_known, ctx.task) == (14, "padded", False, None)
    assert ctx.expected_session is None


# --- artifacts on disk ----------------------------------------------------------------------


@pytest.mark.parametrize("anchored", [False, True])
def test_artifact_probe_states(tmp_path: Path, anchored: bool) -> None:
    """Anchored (asking relative to the root's descriptor) or not, the probe says the same."""
    from postflightd.project.artifacts import artifact_probe

    root = tmp_path / "root"
    write_artifact(root, "specs/1_x/reports/r.md")
    write_artifact(root, "specs/1_x/reports/empty.md", "")
    (root / "specs" / "1_x" / "adir").mkdir()
    (tmp_path / "secret").write_text("s", encoding="utf-8")
    (root / "escape").symlink_to(tmp_path / "secret")
    (root / "outdir").symlink_to(tmp_path, target_is_directory=True)
    (root / "inner").symlink_to(root / "specs" / "1_x" / "reports" / "r.md")
    (root / "specs" / "1_x" / "linked").symlink_to(root / "specs" / "1_x" / "reports")
    (root / "specs" / "1_x" / "afile").write_text("x", encoding="utf-8")
    probe = artifact_probe(root, anchored=anchored)
    assert probe("specs/1_x/linked/r.md") is ArtifactState.OK
    assert probe("specs/1_x/linked/none.md") is ArtifactState.MISSING
    assert probe("specs/1_x/afile/r.md") is ArtifactState.MISSING
    assert probe("specs/1_x/../1_x/reports/r.md") is ArtifactState.OK
    assert probe("specs/1_x/reports/r.md") is ArtifactState.OK
    assert probe("specs/1_x/reports/empty.md") is ArtifactState.EMPTY
    assert probe("specs/1_x/reports/none.md") is ArtifactState.MISSING
    assert probe("specs/1_x/adir") is ArtifactState.NOT_A_FILE
    assert probe("escape") is ArtifactState.OUTSIDE
    assert probe("outdir/secret") is ArtifactState.OUTSIDE
    assert probe("outdir/missing") is ArtifactState.OUTSIDE
    assert probe("inner") is ArtifactState.OK
    assert probe("nowhere/none.md") is ArtifactState.MISSING
    probe.close()
    assert probe("specs/1_x/reports/r.md") is ArtifactState.OK  # closed: answers unanchored


def test_an_open_project_holds_one_descriptor_for_its_probe_and_closing_it_frees_it(
    tmp_path: Path,
) -> None:
    from postflightd.config import Config
    from postflightd.project.root import Project

    root = tmp_path / "root"
    project(root, 1)
    write_artifact(root, "specs/1_task1/reports/r.md")
    before = len(os.listdir("/proc/self/fd"))
    with Project.open(root, Config(), read_only=True) as opened:
        assert opened.probe("specs/1_task1/reports/r.md") is ArtifactState.OK
        during = len(os.listdir("/proc/self/fd"))
    assert during == before + 2  # the specs directory and the probe's root
    assert len(os.listdir("/proc/self/fd")) == before


@pytest.mark.parametrize("anchored", [False, True])
@pytest.mark.parametrize("cache_dirs", [1, 2, 3, 5])
def test_a_bounded_probe_cache_answers_as_an_unbounded_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cache_dirs: int, anchored: bool
) -> None:
    """The probe forgets resolved directories past PROBE_CACHE_DIRS (flat memory over
    100,000 tasks): emptied at any point, links are still followed and judged the same."""
    from postflightd.project import artifacts

    root = tmp_path / "root"
    for i in range(4):
        write_artifact(root, f"specs/{i}_t/reports/r.md")
    write_artifact(root, "specs/0_t/reports/empty.md", "")
    write_artifact(tmp_path, "outside/r.md")
    (root / "specs" / "4_link").symlink_to(tmp_path / "outside", target_is_directory=True)
    (root / "specs" / "5_in").symlink_to(root / "specs" / "1_t", target_is_directory=True)
    rels = [
        *(f"specs/{i}_t/reports/r.md" for i in range(4)),
        "specs/0_t/reports/empty.md",
        "specs/3_t/reports/none.md",
        "specs/4_link/r.md",
        "specs/5_in/reports/r.md",
        "specs/5_in/../0_t/reports/r.md",
        "specs/4_link/../root/specs/0_t/reports/r.md",
        "specs/2_t/reports",
    ]
    expected = [artifacts.artifact_probe(root)(rel) for rel in rels]
    assert ArtifactState.OUTSIDE in expected and ArtifactState.EMPTY in expected
    monkeypatch.setattr(artifacts, "PROBE_CACHE_DIRS", cache_dirs)
    probe = artifacts.artifact_probe(root, anchored=anchored)
    for _ in range(2):  # the second round after the cache was emptied many times
        assert [probe(rel) for rel in rels] == expected
    probe.close()


@pytest.mark.parametrize("anchored", [False, True])
def test_a_directory_the_reader_opened_is_not_lstat_again_and_answers_the_same(
    tmp_path: Path, anchored: bool
) -> None:
    """``known_directory`` spares the probe the lstat of a task directory the reader has just
    opened without following links; names that are not plain are ignored, not trusted."""
    from postflightd.project.artifacts import artifact_probe

    root = tmp_path / "root"
    write_artifact(root, "specs/1_x/reports/r.md")
    write_artifact(tmp_path, "outside/r.md")
    (root / "specs" / "0_link").symlink_to(tmp_path / "outside", target_is_directory=True)
    rels = ["specs/1_x/reports/r.md", "specs/1_x/reports/none.md", "specs/0_link/r.md"]
    expected = [artifact_probe(root)(rel) for rel in rels]
    assert expected == [ArtifactState.OK, ArtifactState.MISSING, ArtifactState.OUTSIDE]
    probe = artifact_probe(root, anchored=anchored)
    probe.known_directory("specs/1_x")
    probe.known_directory("specs", "1_x")
    for odd in ("specs/0_link/..", "specs//0_link", "./specs/0_link", "", "specs/0_link/."):
        probe.known_directory(odd)
    for parent, name in (("specs", ".."), ("specs", ""), ("specs/.", "0_link"), ("x", "a/b")):
        probe.known_directory(parent, name)
    assert [probe(rel) for rel in rels] == expected
    probe.close()


def test_an_artifact_through_another_tasks_linked_directory_is_still_outside(
    tmp_path: Path,
) -> None:
    """A task directory found a link when read (swapped in after the listing saw a
    directory) is refused, never taken as a known directory: an artifact reached through it
    is judged by the probe, outside the root."""
    from datetime import UTC, datetime

    from postflightd.config import Config
    from postflightd.pipeline.check import check_file
    from postflightd.project.root import Project
    from postflightd.rules.findings import Policy

    root = tmp_path / "root"
    project(root, 1)
    write_artifact(tmp_path, "outside/reports/r.md")
    (root / "specs" / "0_link").symlink_to(tmp_path / "outside", target_is_directory=True)
    (tmp_path / "outside" / META_NAME).write_text(
        json.dumps(researched_doc("0_link")), encoding="utf-8"
    )
    doc = researched_doc("1_task1")
    doc["artifacts"][0]["path"] = "specs/0_link/reports/r.md"
    write_meta(root, "1_task1", doc)
    config, now = Config(), datetime.now(UTC)
    specs = root / "specs"
    with Project.open(root, config, read_only=True) as opened:
        # As the listing would have named them, had 0_link been a directory then.
        refs = [MetaFileRef(specs / d / META_NAME, d) for d in ("0_link", "1_task1")]
        linked, one = (check_file(opened, ref, config, Policy(), now) for ref in refs)
    assert [f.code for f in linked.findings] == ["PF100"]
    assert [(f.code, f.location) for f in one.findings] == [("PF501", "artifacts[0].path")]
    assert "resolves outside the project root" in one.findings[0].message


# --- whole scans of bad input through the CLI -----------------------------------------------


def _scan_json(root: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    from postflightd.cli import main

    code = main(["scan", "--format", "json", str(root)])
    return code, json.loads(capsys.readouterr().out)


def test_every_bad_input_in_one_tree_gives_findings_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bad inputs agents write (cut short, wrong types, stray bytes...), scanned together: a
    finding each, exit 1, no crash."""
    root = project(tmp_path / "root", [task_entry(n, "t") for n in range(1, 20)])
    write_meta(root, "1_t", '{"status": "researched", "artif')
    write_meta(root, "2_t", "")
    write_meta(root, "3_t", "[1, 2]")
    completed = researched_doc("4_t")
    completed["status"] = "completed"
    write_meta(root, "4_t", completed)
    write_meta(root, "5_t", {"status": 5, "artifacts": "x", "metadata": {"session_id": 3}})
    (write_meta(root, "6_t", "")).write_bytes(b'{"status": "\xff"}')
    write_meta(root, "7_t", "[" * 100_000 + "]" * 100_000)
    (tmp_path / "real.json").write_text(json.dumps(researched_doc()), encoding="utf-8")
    (root / "specs" / "8_t").mkdir()
    (root / "specs" / "8_t" / META_NAME).symlink_to(tmp_path / "real.json")
    (root / "specs" / "9_t" / META_NAME).mkdir(parents=True)
    escaping = researched_doc("10_t")
    escaping["artifacts"] = [
        {"type": "report", "path": "../../etc/passwd", "summary": "s"},
        {"type": "report", "path": "/etc/passwd", "summary": "s"},
        {"type": "report", "path": "link/passwd", "summary": "s"},
    ]
    (root / "link").symlink_to("/etc", target_is_directory=True)
    write_meta(root, "10_t", escaping)
    big = write_meta(root, "11_t", "")
    with big.open("r+b") as fh:
        fh.truncate(50 * 1024 * 1024)

    code, report = _scan_json(root, capsys)
    assert code == 1
    by_task = {f["task"]: {x["code"] for x in f["findings"]} for f in report["files"]}
    assert by_task == {
        1: {"PF102"},
        2: {"PF102"},
        3: {"PF103"},
        4: {"PF203", "PF502"},  # every finding at once: its report is not there either
        5: by_task[5] | {"PF201"},
        6: {"PF102"},
        7: {"PF102"},
        8: {"PF100"},
        9: {"PF100"},
        10: {"PF501"},
        11: {"PF101"},
    }
    assert "PF201" in by_task[5]
    assert not any(f["valid"] for f in report["files"])
    assert report["summary"]["files"] == 11


@pytest.mark.parametrize(
    ("content", "note"),
    [("{broken", "not valid JSON at 1:2"), ('{"active_projects": 3}', "active_projects")],
)
def test_corrupt_state_json_is_one_pf604_for_every_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, note: str
) -> None:
    from postflightd.cli import main

    root = project(tmp_path)
    (root / "specs" / "state.json").write_text(content, encoding="utf-8")
    write_meta(root, "259_prove_completeness", researched_doc())
    write_artifact(root, "specs/259_prove_completeness/reports/research-001.md")
    write_meta(root, "260_other", researched_doc("260_other"))
    write_artifact(root, "specs/260_other/reports/research-001.md")
    code = main(["scan", "--format", "json", str(root)])
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert code == 1
    state, *files = report["files"]
    assert (state["path"], [f["code"] for f in state["findings"]]) == (
        "specs/state.json",
        ["PF604"],
    )
    assert note in state["findings"][0]["message"]
    for file in files:  # each metadata file judged by its own findings
        assert file["findings"] == []
        assert file["valid"]
    assert report["summary"] == {
        "files": 2,
        "valid": 2,
        "invalid": 0,
        "errors": 1,
        "warnings": 0,
        "stuck": 0,
    }
    assert "PF604" not in captured.err


def test_missing_state_json_skips_project_checks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = project(tmp_path)
    write_meta(root, "259_prove_completeness", researched_doc())
    write_artifact(root, "specs/259_prove_completeness/reports/research-001.md")
    code, report = _scan_json(root, capsys)
    assert code == 0
    assert report["files"][0]["findings"] == []


# --- permissions: a real process that the file's mode bits apply to -------------------------

_PR_CAPBSET_DROP = 24
_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH = 1, 2


def _drop_file_capabilities() -> None:
    """preexec_fn: root without the capabilities that bypass file permission bits.

    Dropped from the bounding set, they are gone from the process after execve, so the
    interpreter, still uid 0, is refused a mode-000 file like any user.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH):
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A temp dir another user can traverse (pytest's tmp_path is private to its owner)."""
    with tempfile.TemporaryDirectory(prefix="postflightd-perm-") as name:
        path = Path(name)
        path.chmod(0o755)
        yield path
        for dirpath, dirnames, filenames in os.walk(path):
            for entry in (*dirnames, *filenames):
                full = Path(dirpath, entry)
                if not full.is_symlink():
                    full.chmod(0o755)


def run_unprivileged(argv: list[str], home: Path) -> subprocess.CompletedProcess[str]:
    """Run ``python -m postflightd ARGV`` so that file permission bits apply to it."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / "config"),
        "XDG_STATE_HOME": str(home / "state"),
        **({"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}),
    }
    cmd = [sys.executable, "-m", "postflightd", *argv]
    if os.geteuid() != 0:
        return subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    home.mkdir(mode=0o777, exist_ok=True)
    home.chmod(0o777)
    try:
        return subprocess.run(
            cmd, capture_output=True, text=True, env=env, check=False, user=65534, group=65534
        )
    except PermissionError:
        # The interpreter lives where uid 65534 cannot reach it (e.g. under /root): stay
        # root, without the capabilities that override permission bits.
        pass
    try:
        return subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            env=env,
            check=False,
            preexec_fn=_drop_file_capabilities,
        )
    except subprocess.SubprocessError as exc:
        unavailable(f"cannot run a process that file permissions apply to: {exc}")


def test_unreadable_metadata_file_is_pf105(shared_dir: Path) -> None:
    """chmod 000: a finding naming the permission problem, exit 1, no traceback."""
    root = project(shared_dir / "root")
    for path in (root, root / "specs"):
        path.chmod(0o755)
    meta = write_meta(root, "259_prove_completeness", researched_doc())
    meta.parent.chmod(0o755)
    meta.chmod(0o000)
    out = run_unprivileged(["scan", "--format", "json", str(root)], shared_dir / "home")
    assert out.returncode == 1, out.stderr
    assert "Traceback" not in out.stderr
    report = json.loads(out.stdout)
    findings = report["files"][0]["findings"]
    assert [f["code"] for f in findings] == ["PF105"]
    assert "Permission denied" in findings[0]["message"]


def test_unreadable_specs_dir_is_a_clear_error(shared_dir: Path) -> None:
    """A specs directory that cannot be listed: exit 2 and one line saying so."""
    root = project(shared_dir / "root")
    root.chmod(0o755)
    write_meta(root, "259_prove_completeness", researched_doc())
    (root / "specs").chmod(0o000)
    out = run_unprivileged(["scan", str(root)], shared_dir / "home")
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    assert "internal error" not in out.stderr
    assert "specs" in out.stderr
    assert "ermission denied" in out.stderr


def test_untraversable_root_is_a_clear_error(shared_dir: Path) -> None:
    root = project(shared_dir / "root")
    root.chmod(0o000)
    out = run_unprivileged(["scan", str(root)], shared_dir / "home")
    assert out.returncode == 2, out.stderr
    assert "internal error" not in out.stderr
    assert str(root) in out.stderr


def test_artifact_probe_resolves_dotdot_after_symlinks(tmp_path: Path) -> None:
    """``link/../x`` follows the link first, as the kernel does: no lexical shortcut."""
    from postflightd.project.artifacts import artifact_probe

    root = tmp_path / "root"
    write_artifact(root, "x", "inside\n")
    write_artifact(tmp_path, "deep/x", "outside\n")
    (root / "down").symlink_to(tmp_path / "deep" / "er", target_is_directory=True)
    (tmp_path / "deep" / "er").mkdir()
    (root / "sub").mkdir()
    probe = artifact_probe(root)
    assert probe("sub/../x") is ArtifactState.OK
    assert probe("down/../x") is ArtifactState.OUTSIDE
    assert probe("down/../missing") is ArtifactState.OUTSIDE
    assert probe("sub/./x") is ArtifactState.MISSING


@pytest.mark.parametrize("anchored", [False, True])
def test_an_artifact_path_of_a_thousand_directories_is_probed_without_recursing(
    tmp_path: Path, anchored: bool
) -> None:
    """Each directory of an artifact path is resolved in a loop: a path of 1,000 components
    (short enough for a TODO.md link) once ended the scan in a RecursionError."""
    from postflightd.project.artifacts import artifact_probe

    root = tmp_path / "root"
    deep = "a/" * 1000
    write_artifact(root, "a/a/r.md")
    probe = artifact_probe(root, anchored=anchored)
    assert probe(deep + "r.md") is ArtifactState.MISSING
    assert probe("a/a/r.md") is ArtifactState.OK
    probe.close()


def test_a_scan_of_a_file_naming_a_thousand_directories_deep_reports_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "root"
    project(root, 1)
    doc = researched_doc("1_task1")
    doc["artifacts"][0]["path"] = "a/" * 1000 + "r.md"
    write_meta(root, "1_task1", doc)
    code, out = _scan_json(root, capsys)
    assert code == 1
    assert [f["code"] for f in out["files"][0]["findings"]] == ["PF502"]
