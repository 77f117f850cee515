"""pipeline/cleanup.py's ``clean_litter``: what a killed postflightd left is settled by what
the journal holds, under the project lock, one line each for the log."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from helpers.documents import researched_doc, task_entry
from helpers.project import META, project, write_meta
from postflightd.config import Config
from postflightd.fs.locks import project_lock
from postflightd.journal.database import Journal
from postflightd.pipeline.cleanup import clean_litter
from postflightd.project.root import Project

TASKS = [task_entry(1, "one"), task_entry(2, "two"), task_entry(3, "three")]


def dead_pid() -> int:
    """The pid of a process that has exited (and been waited for)."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def left_aside(root: Path, task_dir: str, content: str, pid: int) -> Path:
    """A metadata file a killed deletion renamed aside, as ``delete_if_unchanged`` names it."""
    aside = root / "specs" / task_dir / f".{META}.{pid}.00ff00ff.deleting"
    aside.parent.mkdir(exist_ok=True)
    aside.write_text(content, encoding="utf-8")
    return aside


def test_each_deletion_left_aside_is_finished_undone_or_kept(tmp_path: Path) -> None:
    root = project(tmp_path / "p", TASKS)
    pid = dead_pid()
    applied = left_aside(root, "1_one", '{"journaled": true}', pid)
    unknown = left_aside(root, "2_two", '{"journaled": false}', pid)
    newer_kept = left_aside(root, "3_three", '{"journaled": false}', pid)
    newer = write_meta(root, "3_three", researched_doc("3_three"))
    config = Config()
    with Journal.open(tmp_path / "journal.db") as journal:
        journal.record(
            "postflighted",
            root=str(root),
            file=f"specs/1_one/{META}",
            task=1,
            content='{"journaled": true}',
        )
        with Project.open(root, config) as opened:
            notes = clean_litter(opened, config, journal)

    # In the journal: its deletion finished.
    assert not applied.exists()
    assert not (root / "specs" / "1_one" / META).exists()
    # Not in the journal: put back, to be processed again.
    assert not unknown.exists()
    assert (root / "specs" / "2_two" / META).read_text(encoding="utf-8") == '{"journaled": false}'
    # Not in the journal, and a newer file took its name: both kept, for a person to look at.
    assert newer_kept.exists()
    assert newer.exists()
    assert sorted(note.split(" ", 1)[0] for note in notes) == ["kept", "removed", "restored"]
    assert all("crash" in note for note in notes), notes


def test_a_live_writers_files_are_left_alone(tmp_path: Path) -> None:
    """This process's own aside file and temporary file, just written: in use, not litter."""
    root = project(tmp_path / "p", TASKS)
    mine = left_aside(root, "1_one", "{}", os.getpid())
    temp = root / "specs" / f".state.json.{os.getpid()}.0123abcd.tmp"
    temp.write_text("{}", encoding="utf-8")
    config = Config()
    with Journal.open(tmp_path / "journal.db") as journal, Project.open(root, config) as opened:
        assert clean_litter(opened, config, journal) == []
    assert mine.exists()
    assert temp.exists()


def test_an_old_temporary_file_of_a_dead_writer_is_removed(tmp_path: Path) -> None:
    root = project(tmp_path / "p", TASKS)
    temp = root / "specs" / f".state.json.{dead_pid()}.0123abcd.tmp"
    temp.write_text("{half", encoding="utf-8")
    config = Config()
    with Journal.open(tmp_path / "journal.db") as journal, Project.open(root, config) as opened:
        notes = clean_litter(opened, config, journal)
    assert not temp.exists()
    assert notes == [f"removed {temp.name}, a temporary file a killed writer left"]
    assert (root / "specs" / "state.json").exists()


def test_nothing_is_touched_while_another_writer_holds_the_lock(tmp_path: Path) -> None:
    """One try at the lock: its holder may be mid-write; whoever runs next looks again."""
    root = project(tmp_path / "p", TASKS)
    aside = left_aside(root, "2_two", "{}", dead_pid())
    old = time.time() - 3600
    os.utime(aside, (old, old))
    config = Config()
    with Journal.open(tmp_path / "journal.db") as journal, Project.open(root, config) as opened:
        assert opened.specs is not None
        with project_lock(opened.specs):
            # The lock is taken per open file description: another one, as another process's.
            other = Project.open(root, config)
            with other:
                assert clean_litter(other, config, journal) == []
    assert aside.exists()
