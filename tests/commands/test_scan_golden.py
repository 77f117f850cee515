"""``scan``'s output, byte for byte, on a tree that trips most rules: every format is compared
with a golden file, so that work on the scan's speed cannot change a character of what it
prints. A large tree checked by forked workers prints what one process prints.

The golden files are the output of the scan before that work. After a change to what scan
prints on purpose, write them again, read the diff and commit it::

    POSTFLIGHTD_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/commands/test_scan_golden.py

Each test whose file that rewrote fails, so the run that rewrote is never green; run again
without the switch (``helpers.update_mode`` says what the switch accepts).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers.documents import SESSION, researched_doc, task_entry
from helpers.paths import copy_example
from helpers.update_mode import update, updating

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "project"
GOLDEN = Path(__file__).with_name("golden")
UPDATE_ENV = "POSTFLIGHTD_UPDATE_GOLDEN"
#: format name -> the scan options that print it
FORMATS = {
    "text": ["--format", "text"],
    "json": ["--format", "json"],
    "github": ["--format", "github"],
    "sarif": ["--format", "sarif"],
    "statistics": ["--statistics"],
    "statistics-json": ["--statistics", "--format", "json"],
}
#: the example's stuck run has been stuck for as long as the clock says: not golden
_ELAPSED = re.compile(r"in_progress for [0-9dhms]+,")
_ROOT = "/GOLDEN-ROOT"


def _meta(kind: str, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "session_id": SESSION,
        "agent_type": f"general-{kind}-agent",
        "duration_seconds": 180,
        "delegation_depth": 1,
        "delegation_path": ["orchestrator", kind, f"general-{kind}-agent"],
    }
    meta.update(extra)
    return meta


def _cases(task_dir: str) -> dict[str, Any]:
    """Variant name -> the metadata file (a dict, or the text written verbatim)."""
    report = f"specs/{task_dir}/reports/research-001.md"
    ok = researched_doc(task_dir)
    implemented = {
        "status": "implemented",
        "artifacts": [{"type": "summary", "path": report, "summary": "Done"}],
        "completion_data": {"completion_summary": "Did it.", "roadmap_items": ["a"]},
        "metadata": _meta("implement"),
    }
    return {
        "valid": ok,
        "valid_compact": json.dumps(ok, separators=(",", ":")),
        "unknown_fields": {
            **ok,
            "reviewer": "x",
            "metadata": {**ok["metadata"], "phase_count": 4},
            "artifacts": [{**ok["artifacts"][0], "extra": 1}],
        },
        "completed": {**ok, "status": "completed"},
        "near_miss": {**ok, "status": "research_done"},
        "bad_status": {**ok, "status": 7},
        "truncated": json.dumps(ok, indent=2)[:57],
        "not_utf8": b'{"status": "researched\xff"}',
        "bom": "\ufeff" + json.dumps(ok),
        "empty": "  \n",
        "nan": '{"status": NaN}',
        "array": "[1, 2]",
        "duplicate_keys": '{"status": "planned", "status": "researched", "artifacts": [], '
        f'"metadata": {{"session_id": "{SESSION}"}}}}',
        "wrong_types": {**ok, "metadata": {**ok["metadata"], "delegation_depth": "1"}},
        "missing_fields": {"status": "researched"},
        "blank_fields": {
            **ok,
            "next_steps": " ",
            "metadata": {**ok["metadata"], "agent_type": "", "delegation_path": ["a", " "]},
            "artifacts": [{"path": report, "type": "report", "summary": ""}],
        },
        "plain_paths": {**ok, "artifacts": [report, "specs/x/plans/p.md", "notes.md", " "]},
        "bad_type": {**ok, "artifacts": [{**ok["artifacts"][0], "type": "research"}]},
        "twice": {**ok, "artifacts": [ok["artifacts"][0], ok["artifacts"][0]]},
        "escapes": {
            **ok,
            "artifacts": [
                {"type": "report", "path": p, "summary": "s"}
                for p in ("/etc/passwd", "../out.md", "~/x.md", "javascript:alert(1)", "a\nb")
            ],
        },
        "link_out": {**ok, "artifacts": [{"type": "report", "path": f"specs/{task_dir}/out.md"}]},
        "link_in": {**ok, "artifacts": [{"type": "report", "path": f"specs/{task_dir}/in.md"}]},
        "dir_artifact": {**ok, "artifacts": [{"type": "report", "path": f"specs/{task_dir}"}]},
        "empty_artifact": {
            **ok,
            "artifacts": [{"type": "report", "path": f"specs/{task_dir}/e.md"}],
        },
        "missing_artifact": {**ok, "artifacts": [{"type": "report", "path": "specs/none.md"}]},
        "phantom": {**ok, "artifacts": []},
        "implemented": implemented,
        "implemented_no_completion": {**implemented, "completion_data": None},
        "implemented_blank_summary": {
            **implemented,
            "completion_data": {"completion_summary": "  ", "claudemd_suggestions": "x"},
        },
        "partial": {**ok, "status": "partial", "partial_progress": {"stage": "s", "details": ""}},
        "failed": {**ok, "status": "failed", "errors": [{"message": " ", "type": "x"}, 3]},
        "blocked": {**ok, "status": "blocked", "completion_data": {"completion_summary": "x"}},
        "in_progress_future": {
            "status": "in_progress",
            "started_at": "2999-01-01T00:00:00Z",
            "artifacts": [],
            "metadata": _meta("research"),
        },
        "in_progress_bad_time": {
            "status": "in_progress",
            "started_at": "yesterday",
            "artifacts": [],
            "partial_progress": {"stage": "x", "details": "y", "phases_completed": 5},
            "metadata": _meta("research", phases_completed=-1),
        },
        "in_progress_no_start": {"status": "in_progress", "artifacts": [], "metadata": _meta("x")},
        "delegation": {
            **ok,
            "metadata": _meta(
                "research",
                delegation_depth=7,
                delegation_path=["a", "b", "a"],
                agent_type="other",
                duration_seconds=-1,
                session_id="sess_x",
            ),
        },
        "foreign_session": {**ok, "metadata": _meta("research", session_id="sess_1_abcdef")},
        "long_list": {**ok, "errors": [{"message": "m"}] * 1001},
        "big_number": {**ok, "metadata": {**ok["metadata"], "findings_count": 10**30}},
        "float": {**ok, "metadata": {**ok["metadata"], "duration_seconds": 1.5e3}},
        "escapes_text": json.dumps({**ok, "next_steps": "caf\u00e9 \ud83d\ude00 \\ \u2028"}),
    }


def build_tree(root: Path, repeat: int = 1) -> Path:
    """The example project plus every case of ``_cases`` (``repeat`` times over)."""
    copy_example(root)
    specs = root / "specs"
    state = json.loads((specs / "state.json").read_text(encoding="utf-8"))
    tasks = state["active_projects"]
    names = list(_cases("x"))
    number = 1000
    for _ in range(repeat):
        for name in names:
            number += 1
            slug = f"{name}_{number}"
            task_dir = f"{number}_{slug}"
            directory = specs / task_dir
            (directory / "reports").mkdir(parents=True)
            (directory / "reports" / "research-001.md").write_text("# r\n", encoding="utf-8")
            (directory / "e.md").write_bytes(b"")
            (directory / "in.md").symlink_to("reports/research-001.md")
            (directory / "out.md").symlink_to("/etc/hostname")
            doc = _cases(task_dir)[name]
            path = directory / ".return-meta.json"
            if isinstance(doc, bytes):
                path.write_bytes(doc)
            elif isinstance(doc, str):
                path.write_text(doc, encoding="utf-8")
            else:
                path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
            language = "meta" if number % 3 == 0 else "general"
            project_name = slug if number % 17 else "another_name"
            if number % 13:
                tasks.append(task_entry(number, project_name, language=language))
            if number % 5 == 0:
                marker = {"session_id": "sess_1736700000_zzz999", "operation": "research"}
                (directory / ".postflight-pending").write_text(json.dumps(marker))
            elif number % 7 == 0:
                (directory / ".postflight-pending").write_text("{not json")
            elif number % 11 == 0:
                (directory / ".postflight-pending").write_text("")
    # Directories that are not tasks, or not to be followed.
    (specs / "not_a_task").mkdir()
    (specs / "not_a_task" / ".return-meta.json").write_text("{}", encoding="utf-8")
    (specs / "9999_linked").symlink_to(specs / f"1001_{names[0]}_1001")
    (specs / "9998_no_file").mkdir()
    (specs / "9997_dir_file" / ".return-meta.json").mkdir(parents=True)
    (specs / "9996_link_file").mkdir()
    (specs / "9996_link_file" / ".return-meta.json").symlink_to("/etc/hostname")
    (specs / "state.json").write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
    return root


def scan_output(root: Path, options: list[str], *, workers: int | None = None) -> str:
    """What ``postflightd scan OPTIONS ROOT`` prints, run from ``root`` (paths stay short),
    with the root and the clock's part taken out; ``workers``: its processes, forced."""
    env = {**os.environ, "NO_COLOR": "1"}
    env.pop("POSTFLIGHTD_SCAN_WORKERS", None)
    if workers is not None:
        env["POSTFLIGHTD_SCAN_WORKERS"] = str(workers)
    done = subprocess.run(
        [sys.executable, "-m", "postflightd", "scan", *options, "."],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    out = done.stdout.replace(str(root.resolve()), _ROOT).replace(str(root), _ROOT)
    return _ELAPSED.sub("in_progress for ELAPSED,", out)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tree(tmp_path_factory.mktemp("golden") / "project")


@pytest.fixture(scope="module")
def large_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from postflightd.pipeline.parallel import PARALLEL_MIN_FILES

    repeat = PARALLEL_MIN_FILES // len(_cases("x")) + 1
    return build_tree(tmp_path_factory.mktemp("golden") / "project", repeat=repeat)


@pytest.mark.parametrize("name", list(FORMATS))
def test_scan_output_is_golden(tree: Path, name: str) -> None:
    """Each format prints exactly what it printed before, on a tree of ~50 kinds of file."""
    path = GOLDEN / f"scan.{name}"
    printed = scan_output(tree, FORMATS[name])
    if updating(UPDATE_ENV):
        update(path, printed, UPDATE_ENV)  # fails the test when it rewrote the file
    assert printed == path.read_text(encoding="utf-8")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["text", "json"])
def test_forked_scan_prints_what_one_process_prints(large_tree: Path, name: str) -> None:
    """A tree large enough to be checked by several processes prints, byte for byte, what one
    process prints (its findings' lines and columns are found in the workers). The processes
    are forced, so that a machine of one core forks too."""
    from postflightd.pipeline.parallel import PARALLEL_MIN_FILES

    root = large_tree
    forked = scan_output(root, FORMATS[name], workers=3)
    assert forked == scan_output(root, FORMATS[name], workers=1)
    assert forked.count("PF502") > PARALLEL_MIN_FILES // 20
