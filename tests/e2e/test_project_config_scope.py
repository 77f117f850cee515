"""A project's own ``.postflightd.toml`` governs that project only, through the real CLI.

Agents can write that file. So it may not set what acts beyond the project (the journal every
project shares, the log, which roots are watched and how): each such key is an error naming
it (exit 2). It never configures another root a command is given. And a file Python's own
parsers choke on (nested too deeply, an integer too long) is exit 2 with a message naming the
file, never a crash (exit 70).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from helpers.daemon_process import in_progress_doc
from helpers.documents import final_text
from helpers.project import meta_path, project, task_status, user_config, write_meta
from postflightd.config import user_config_path

#: A command that hangs this long has failed (it never should: each one here finishes at once).
TIMEOUT_S = 60

#: A project file turning its own ``researched`` outcomes into another status.
ABANDON = '[postflight.status_map]\nresearched = "abandoned"\n'

#: Project files Python's own TOML reader and int() refuse with RecursionError / ValueError.
HOSTILE = {
    "nested": "x = " + "[" * 5000 + "]" * 5000 + "\n",
    "long_integer": "[timeouts]\nresearch = 1" + "0" * 5000 + "\n",
}


def cli(*args: object, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``postflightd ARGS`` as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "postflightd", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
        cwd=cwd,
    )


def journal_rows(root: Path) -> int:
    """The journal's rows about ``root`` (the default journal, in the test's state home)."""
    from postflightd.journal.database import journal_path

    conn = sqlite3.connect(journal_path(""))
    try:
        (count,) = conn.execute("SELECT count(*) FROM observations WHERE root = ?", (str(root),))
    finally:
        conn.close()
    return int(count[0])


# --- keys only the user may set ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("[journal]\nkeep_days = 0.001\n", "journal.keep_days"),
        ("[journal]\nmax_content_mb = 0.001\n", "journal.max_content_mb"),
        ('[journal]\npath = "/tmp/elsewhere.sqlite3"\n', "journal.path"),
        ('[log]\nlevel = "debug"\n', "log.level"),
        ('[log]\nformat = "console"\n', "log.format"),
        ('[watch]\nroots = ["/"]\n', "watch.roots"),
        ('[watch]\nobserver = "polling"\n', "watch.observer"),
        ("[watch]\nrescan_interval_s = 0.01\n", "watch.rescan_interval_s"),
    ],
)
def test_a_project_file_setting_a_user_only_key_is_exit_2_naming_it(
    tmp_path: Path, text: str, key: str
) -> None:
    root = project(tmp_path / "proj", 1, config=text)
    meta = write_meta(root, "1_task1", final_text(1))
    for out in (cli("scan", "--apply", root), cli("process", meta), cli("status", root)):
        assert out.returncode == 2, out.stdout + out.stderr
        assert key in out.stderr
        assert "not allowed in a project's own .postflightd.toml" in out.stderr
        assert str(user_config_path()) in out.stderr, "it says where the key belongs"
    assert meta.exists()
    assert task_status(root, 1) == "researching"


def test_the_same_keys_in_the_user_file_are_honoured_beside_a_project_file(
    tmp_path: Path,
) -> None:
    """The user's file sets the journal; the project's file its own outcomes: both apply."""
    mine = tmp_path / "mine" / "journal.sqlite3"
    user_config(f'[journal]\npath = "{mine}"\nkeep_days = 30\n[log]\nlevel = "warning"\n')
    root = project(tmp_path / "proj", 1, config=ABANDON)
    write_meta(root, "1_task1", final_text(1))
    out = cli("scan", "--apply", root)
    assert out.returncode == 0, out.stdout + out.stderr
    assert task_status(root, 1) == "abandoned"
    assert mine.exists()


@pytest.mark.parametrize("user_file", [False, True])
def test_a_project_file_cannot_prune_another_projects_journal_rows(
    tmp_path: Path, user_file: bool
) -> None:
    """``watch A`` with A's file asking for a near-zero retention: refused before it starts,
    so B's journal rows stay (the pruning has no root filter: it would take every project's).
    The same whether or not the user has a configuration file of their own."""
    if user_file:
        user_config("[journal]\nkeep_days = 90\n")
    other = project(tmp_path / "b", 3)
    for n in (1, 2, 3):
        write_meta(other, f"{n}_task{n}", final_text(n))
    assert cli("scan", "--apply", other).returncode == 0
    before = journal_rows(other)
    assert before >= 3
    root = project(tmp_path / "a", 1, config="[journal]\nkeep_days = 0.00001\n")
    out = subprocess.run(
        [sys.executable, "-m", "postflightd", "watch", str(root)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert out.returncode == 2, out.stderr
    assert "journal.keep_days" in out.stderr
    assert "Traceback" not in out.stderr
    assert journal_rows(other) == before


def test_watch_without_a_root_ignores_roots_named_by_the_project_file(tmp_path: Path) -> None:
    """``watch`` run in A whose file names B as a root: exit 2, B untouched."""
    other = project(tmp_path / "b", 1)
    meta = write_meta(other, "1_task1", final_text(1))
    root = project(tmp_path / "a", 1, config=f'[watch]\nroots = ["{other}"]\n' + ABANDON)
    out = subprocess.run(
        [sys.executable, "-m", "postflightd", "watch"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
        cwd=root,
    )
    assert out.returncode == 2, out.stderr
    assert "watch.roots" in out.stderr
    assert meta.exists()
    assert task_status(other, 1) == "researching"


# --- one project's file never configures another root --------------------------------------


@pytest.mark.parametrize("order", ["ab", "ba"])
def test_scan_apply_applies_each_root_under_its_own_configuration(
    tmp_path: Path, order: str
) -> None:
    a = project(tmp_path / "a", 1, config=ABANDON)
    b = project(tmp_path / "b", 1)
    for root in (a, b):
        write_meta(root, "1_task1", final_text(1))
    roots = (a, b) if order == "ab" else (b, a)
    out = cli("scan", "--apply", *roots)
    assert out.returncode == 0, out.stdout + out.stderr
    assert task_status(a, 1) == "abandoned"
    assert task_status(b, 1) == "researched", "A's status_map decided B's outcome"


def test_scan_validates_each_root_under_its_own_rules(tmp_path: Path) -> None:
    """A's file ignores a rule; B's findings for it are still reported."""
    a = project(tmp_path / "a", 1, config='[validation]\nignore = ["PF5"]\n')
    b = project(tmp_path / "b", 1)
    for root in (a, b):
        (root / "specs" / "1_task1" / "reports" / "research-001.md").unlink()
        write_meta(root, "1_task1", final_text(1))
    out = cli("scan", "--format", "json", a, b)
    files = json.loads(out.stdout)["files"]
    codes = {Path(f["root"]).name: {x["code"][:3] for x in f["findings"]} for f in files}
    assert "PF5" not in codes["a"]
    assert "PF5" in codes["b"], "A's [validation] ignore silenced B's findings"


def test_status_judges_each_root_by_its_own_timeouts(tmp_path: Path) -> None:
    """Both runs started ten minutes ago: A's file allows a minute, B has the default hour."""
    a = project(tmp_path / "a", 1, config="[timeouts]\nresearch = 60\n")
    b = project(tmp_path / "b", 1)
    started = (datetime.now(UTC) - timedelta(minutes=10)).isoformat()
    for root in (a, b):
        doc: dict[str, Any] = in_progress_doc(1)
        doc["started_at"] = started
        meta_path(root, 1).write_text(json.dumps(doc), encoding="utf-8")
    for roots in ((a, b), (b, a)):
        out = cli("status", "--format", "json", *roots)
        assert out.returncode == 1, out.stdout + out.stderr  # a stuck run
        states = {e["root"]: e["runs"][0]["state"] for e in json.loads(out.stdout)["roots"]}
        assert states == {str(a): "stuck", str(b): "running"}


# --- a file Python's parsers refuse is exit 2, never a crash ---------------------------------


@pytest.mark.parametrize("kind", sorted(HOSTILE))
@pytest.mark.parametrize("command", ["scan", "status", "process", "verify", "init"])
def test_a_hostile_project_file_is_exit_2_naming_the_file(
    tmp_path: Path, kind: str, command: str
) -> None:
    root = project(tmp_path / "proj", 1, config=HOSTILE[kind])
    meta = write_meta(root, "1_task1", final_text(1))
    args: list[object] = [command, meta if command == "process" else root]
    out = cli(*args)
    assert out.returncode == 2, out.stdout + out.stderr
    assert str(root / ".postflightd.toml") in out.stderr
    assert "Traceback" not in out.stderr
    assert len(out.stderr) < 2000, "the message quotes the file, it does not echo it"
    assert meta.exists()


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_report_notes_a_hostile_project_file_and_uses_the_default_timeouts(
    tmp_path: Path, kind: str
) -> None:
    root = project(tmp_path / "proj", 1)
    write_meta(root, "1_task1", final_text(1))
    assert cli("scan", "--apply", root).returncode == 0  # the journal now has a run
    (root / ".postflightd.toml").write_text(HOSTILE[kind], encoding="utf-8")
    out = cli("report", root)
    assert out.returncode == 0, out.stdout + out.stderr
    assert str(root / ".postflightd.toml") in out.stderr
    assert "the default timeouts are used" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("[watch]\nsettle_ms = 1" + "0" * 400 + "\n", "watch.settle_ms"),
        ("[timeouts]\nresearch = inf\n", "timeouts.research"),
    ],
)
def test_a_number_no_setting_can_use_is_exit_2_naming_the_key(
    tmp_path: Path, text: str, key: str
) -> None:
    root = project(tmp_path / "proj", 1, config=text)
    out = cli("status", root)
    assert out.returncode == 2, out.stdout + out.stderr
    assert key in out.stderr
    assert "Traceback" not in out.stderr
