"""What ``postflightd hook`` imports: it runs at every agent stop, and most stops find no
metadata file, so such a stop must not pay for the metadata models, the rules or the
postflight (about a seventh of the hook's start-up), nor for another runtime's module.

Each case is a fresh process (the real CLI), so that nothing imported by another test hides
an import; a stop with a file still applies it through the modules it then imports.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers.documents import researched_doc
from helpers.project import meta_path, project, task_status, write_meta
from postflightd.project.setup import config_template

#: Modules a stop with no metadata file never needs.
NOT_FOR_AN_EMPTY_STOP = (
    "postflightd.pipeline.apply",
    "postflightd.pipeline.check",
    "postflightd.pipeline.results",
    "postflightd.models.metadata",
    "postflightd.rules.metadata",
    "postflightd.postflight",
    "postflightd.hooks.codex",
    "postflightd.hooks.gemini",
    "postflightd.hooks.opencode",
    "postflightd.hooks.rollout",
    # whose files they are, asked only of files found; the other runtimes' input shapes
    "postflightd.hooks.ownership",
    "postflightd.hooks.transcript",
    "postflightd.hooks.copilot",
    "postflightd.hooks.cursor",
    # the task's record: an opened project's artifact probe answers with rules.probe alone
    "postflightd.rules.context",
    # the rules' registry and its records: no file, no finding, no policy
    "postflightd.rules.findings",
    # what was already told to the person of other runs' invalid files
    "postflightd.hooks.reported",
    # argparse and its messages: the hook's command line is read without a parser
    "argparse",
    "locale",
    # the journal, opened only when something is to be recorded
    "sqlite3",
    "postflightd.journal",
    "structlog",
    "watchdog",
    "pydantic",
    "pydantic_core",
)

#: Runs the hook in-process in a fresh interpreter, then prints the modules it loaded and the
#: TypedDict classes of postflightd's that it made.
CODE = (
    "import json, sys, typing\n"
    "from postflightd.cli import main\n"
    "code = main(['hook', 'claude'])\n"
    "made = sorted(f'{m}.{k}' for m, module in list(sys.modules.items())\n"
    "    if m.startswith('postflightd') for k, v in vars(module).items()\n"
    "    if typing.is_typeddict(v))\n"
    "print(json.dumps({'code': code, 'modules': sorted(sys.modules), 'typed_dicts': made}),\n"
    "    file=sys.stderr)\n"
)


def _stop(root: Path) -> tuple[dict[str, object], set[str]]:
    answer, report = _stop_report(root)
    return answer, set(report["modules"])


def _stop_report(root: Path) -> tuple[dict[str, object], dict[str, Any]]:
    payload = {"cwd": str(root), "hook_event_name": "Stop", "stop_hook_active": False}
    done = subprocess.run(
        [sys.executable, "-c", CODE],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    report: dict[str, Any] = json.loads(done.stderr.splitlines()[-1])
    assert report["code"] == 0
    return json.loads(done.stdout), report


def _loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in names))


@pytest.mark.parametrize(
    "config",
    [None, "[hook]\napply = false\n", config_template(apply=True)],
    ids=["apply", "validate", "init"],
)
def test_a_stop_with_no_metadata_file_imports_no_pipeline(
    tmp_path: Path, config: str | None
) -> None:
    root = project(tmp_path / "proj", 2, config=config)
    answer, modules = _stop(root)
    assert answer == {}
    assert _loaded(modules, NOT_FOR_AN_EMPTY_STOP) == []
    # the protocol asked for (the callers it answers for, Copilot CLI and Cursor, only for
    # their own input)
    assert "postflightd.hooks.claude" in modules


def test_a_stop_with_a_final_file_still_applies_it(tmp_path: Path) -> None:
    root = project(tmp_path / "proj", 1)
    write_meta(root, "1_task1", researched_doc("1_task1"))
    answer, modules = _stop(root)
    assert answer == {}
    assert task_status(root, 1) == "researched"
    assert not meta_path(root, 1).exists()
    assert "postflightd.pipeline.apply" in modules
    # a command's summaries of its files (a scan's tally and report, process's result)
    assert "postflightd.pipeline.summaries" not in modules
    # a scan's stream of files and its forked checks
    assert "postflightd.pipeline.stream" not in modules
    assert "postflightd.pipeline.parallel" not in modules
    # the journal's rows as its readers get them: the stop writes it and reads none
    assert "postflightd.journal.rows" not in modules


@pytest.mark.parametrize(
    "config",
    [None, config_template(apply=True), config_template(apply=False)],
    ids=["no-config", "init-apply", "init-validate"],
)
def test_a_stop_that_validates_and_applies_files_imports_no_pydantic(
    tmp_path: Path, config: str | None
) -> None:
    """The models' own schema, stored (``models.metadata_core``), checks each file and builds
    the typed value postflight applies: pydantic (about half of such a stop) is never
    imported, whether the file is clean, has fields of its own, or is of the wrong type; nor
    to read the configuration ``init`` writes (only a file with values of its own is
    validated by pydantic: ``config._plain_tables``)."""
    root = project(tmp_path / "proj", 3, config=config)
    write_meta(root, "1_task1", researched_doc("1_task1"))
    extras = researched_doc("2_task2")
    extras["metadata"]["phase_count"] = 4  # its own field: not clean, still valid
    write_meta(root, "2_task2", extras)
    wrong = researched_doc("3_task3")
    wrong["artifacts"][0]["summary"] = 5  # a type the contract refuses
    write_meta(root, "3_task3", wrong)
    answer, modules = _stop(root)
    assert "PF201" in json.dumps(answer)  # the invalid file, blocked on or told of
    applied = config != config_template(apply=False)  # validator mode applies nothing
    assert [task_status(root, n) == "researched" for n in (1, 2, 3)] == [applied, applied, False]
    assert [meta_path(root, n).exists() for n in (1, 2, 3)] == [not applied, not applied, True]
    assert "pydantic_core" in modules
    assert _loaded(modules, ("pydantic",)) == []


def test_a_stop_that_applies_clean_files_loads_only_what_applying_needs(
    tmp_path: Path,
) -> None:
    """Two clean files applied: a clean file (``rules.clean``: most files) is of the models'
    shape exactly, so its typed value is built without a validator (``rules.typed``), not
    even pydantic-core; the bound's keys (``hooks.bound.block_key``, a SHA-256 through
    OpenSSL) are needed only to send the agent back or to clear a count, so ``hashlib`` is
    never loaded; what a file probably meant (``rules.fixes``) is a finding's and what was
    told to the person (``hooks.reported``) is for other runs' invalid files; and the classes
    of the JSON records' shapes (TypedDicts, for the type checker alone) are never made."""
    root = project(tmp_path / "proj", 2, config=config_template(apply=True))
    for n in (1, 2):
        write_meta(root, f"{n}_task{n}", researched_doc(f"{n}_task{n}"))
    answer, report = _stop_report(root)
    assert answer == {}
    assert [task_status(root, n) for n in (1, 2)] == ["researched", "researched"]
    assert [meta_path(root, n).exists() for n in (1, 2)] == [False, False]
    modules = set(report["modules"])
    assert "postflightd.postflight.errors_json" in modules
    assert _loaded(modules, ("pydantic", "pydantic_core")) == []
    assert "hashlib" not in modules
    assert _loaded(modules, ("postflightd.rules.fixes", "postflightd.hooks.reported")) == []
    assert report["typed_dicts"] == []


def test_a_stop_applying_bytes_the_journal_holds_reads_no_row_back(tmp_path: Path) -> None:
    """A file whose very bytes the journal shows post-flighted already (written again) is
    asked of the journal as a yes or a no: no row is read back, so the readers' records
    (``journal.rows``) are not made."""
    root = project(tmp_path / "proj", 1)
    write_meta(root, "1_task1", researched_doc("1_task1"))
    assert _stop(root)[0] == {}
    write_meta(root, "1_task1", researched_doc("1_task1"))  # the same bytes again
    answer, modules = _stop(root)
    assert answer == {}
    assert task_status(root, 1) == "researched"
    assert not meta_path(root, 1).exists()
    assert "postflightd.journal.database" in modules
    assert "postflightd.journal.rows" not in modules


def test_a_stop_over_an_invalid_file_alone_loads_no_group_commit(tmp_path: Path) -> None:
    """A file that does not parse is blocked on and recorded in errors.json; with no file to
    apply, the group commit and the postflight it applies are never imported."""
    root = project(tmp_path / "proj", 1)
    meta = write_meta(root, "1_task1", researched_doc("1_task1"))
    meta.write_text('{"status": "researched",\n', encoding="utf-8")
    answer, modules = _stop(root)
    assert answer["decision"] == "block"
    assert "PF102" in str(answer["reason"])
    assert meta.exists()
    errors = json.loads((root / "specs" / "errors.json").read_text(encoding="utf-8"))
    assert [e["type"] for e in (errors if isinstance(errors, list) else errors["errors"])] == [
        "validation_failed"
    ]
    assert "postflightd.pipeline.apply" in modules
    assert _loaded(modules, ("postflightd.pipeline.group_commit",)) == []
    assert (
        _loaded(modules, ("postflightd.postflight.transform", "postflightd.postflight.todo_edit"))
        == []
    )
