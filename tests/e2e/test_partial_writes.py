"""Nothing is deleted while its outcome is half-written; `process` after another run; litter.

Real processes throughout: faults come from a full tmpfs (as root) or from the store's own
fault points (``POSTFLIGHTD_FAULT_AT``), races from a real run stopped at a crash point
(``POSTFLIGHTD_STOP_AT``), litter from a real ``kill -9`` (``POSTFLIGHTD_CRASH_AT``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from helpers.daemon_process import terminate
from helpers.documents import partial_doc, researched_doc, task_entry
from helpers.needs import unavailable
from helpers.project import journal_rows, project, state_entry, user_config, write_meta
from helpers.waiting import wait_until

#: Real daemons and console-script runs in bulk: `pytest -m "not slow"` leaves them out.
pytestmark = pytest.mark.slow

TODO = (
    "# TODO\n\n### 259. Prove completeness\n- **Status**: [RESEARCHING]\n\n"
    "### 260. Second task\n- **Status**: [RESEARCHING]\n\n"
)
TASKS = [task_entry(259, "prove_completeness"), task_entry(260, "second_task")]
META = ".return-meta.json"


def run(*argv: str, stdin: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "postflightd", *argv],
        capture_output=True,
        text=True,
        check=False,
        input=stdin,
        env={**os.environ, **env},
        timeout=120,
    )


# --- 1. a TODO.md or errors.json write that fails keeps the file ------------------------------

FAULTS = [
    ("todo:write=ENOSPC", "researched", "No space left on device"),
    ("todo:replace=EIO", "researched", "Input/output error"),
    ("errors:write=ENOSPC", "partial", "No space left on device"),
    ("errors:replace=EIO", "partial", "Input/output error"),
]


@pytest.mark.parametrize(("fault", "kind", "reason"), FAULTS)
def test_process_keeps_the_file_when_todo_or_errors_cannot_be_written(
    tmp_path: Path, fault: str, kind: str, reason: str
) -> None:
    """Exit 4 with the reason; state.json holds the outcome; the re-run completes it."""
    root = project(tmp_path / "p", TASKS, todo=TODO, artifacts=True)
    doc = researched_doc() if kind == "researched" else partial_doc()
    meta = write_meta(root, "259_prove_completeness", doc)

    failed = run("process", str(meta), POSTFLIGHTD_FAULT_AT=fault)
    assert failed.returncode == 4, failed.stdout + failed.stderr
    assert "PF606" in failed.stdout and reason in failed.stdout
    assert "file is kept" in failed.stdout
    assert meta.exists()
    assert not list((root / "specs").glob(".*.tmp"))  # the failed write left no temp file
    applied = (root / "specs" / "state.json").read_bytes()
    if kind == "researched":
        assert state_entry(root, 259)["status"] == "researched"
        assert "[RESEARCHING]" in (root / "specs" / "TODO.md").read_text("utf-8")
    else:
        assert state_entry(root, 259)["resume_phase"] == 3
        assert not (root / "specs" / "errors.json").exists()
    assert [f for f, _ in journal_rows("postflighted")] == [
        "specs/259_prove_completeness/.return-meta.json"
    ]

    again = run("process", str(meta))
    assert again.returncode == 0, again.stdout + again.stderr
    assert not meta.exists()
    # Idempotent: state.json already held the outcome, so it is left byte for byte.
    assert (root / "specs" / "state.json").read_bytes() == applied
    if kind == "researched":
        todo = (root / "specs" / "TODO.md").read_text("utf-8")
        assert "### 259. Prove completeness\n- **Status**: [RESEARCHED]" in todo
    else:
        errors = json.loads((root / "specs" / "errors.json").read_text("utf-8"))
        assert [e["message"] for e in errors] == ["ran out of time"]


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_scan_apply_keeps_only_the_files_whose_outcome_is_unwritten(
    tmp_path: Path, fmt: str
) -> None:
    """errors.json fails: the partial file is kept (exit 4), the researched one completes."""
    root = project(tmp_path / "p", TASKS, todo=TODO, artifacts=True)
    kept = write_meta(root, "259_prove_completeness", partial_doc())
    done = write_meta(root, "260_second_task", researched_doc("260_second_task"))

    failed = run("scan", "--apply", "--format", fmt, str(root), POSTFLIGHTD_FAULT_AT="errors:write")
    assert failed.returncode == 4, failed.stdout + failed.stderr
    assert kept.exists() and not done.exists()
    if fmt == "json":
        files = {f["path"]: f for f in json.loads(failed.stdout)["files"]}
        bad = files["specs/259_prove_completeness/.return-meta.json"]
        assert bad["outcome"] == "incomplete"
        assert [f["code"] for f in bad["findings"]] == ["PF606"]
        assert files["specs/260_second_task/.return-meta.json"]["outcome"] == "applied"
    else:
        assert "PF606" in failed.stdout and "errors.json could not be written" in failed.stdout
    assert "[RESEARCHED]" in (root / "specs" / "TODO.md").read_text("utf-8")

    again = run("scan", "--apply", str(root))
    assert again.returncode == 0, again.stdout + again.stderr
    assert not kept.exists()
    errors = json.loads((root / "specs" / "errors.json").read_text("utf-8"))
    assert [e["message"] for e in errors] == ["ran out of time"]


def test_hook_keeps_the_file_and_tells_the_person_why(tmp_path: Path) -> None:
    """The hook never blocks the agent for a disk problem: it says why in a systemMessage (for
    the person), and the next hook run completes it."""
    root = project(tmp_path / "p", TASKS, todo=TODO, artifacts=True)
    meta = write_meta(root, "259_prove_completeness", researched_doc())
    stdin = json.dumps({"cwd": str(root), "stop_hook_active": False})

    failed = run("hook", "claude", stdin=stdin, POSTFLIGHTD_FAULT_AT="todo:replace=ENOSPC")
    assert failed.returncode == 0, failed.stderr
    answer = json.loads(failed.stdout)
    assert "decision" not in answer
    assert "TODO.md could not be written" in answer["systemMessage"]
    assert meta.exists()
    assert state_entry(root, 259)["status"] == "researched"

    again = run("hook", "claude", stdin=stdin)
    assert again.returncode == 0 and json.loads(again.stdout) == {}
    assert not meta.exists()
    assert "[RESEARCHED]" in (root / "specs" / "TODO.md").read_text("utf-8")


def test_daemon_retries_a_half_written_outcome_until_it_completes(tmp_path: Path) -> None:
    """While TODO.md cannot be written the file stays; once it can, the daemon finishes."""
    root = project(tmp_path / "p", TASKS, todo=TODO, artifacts=True)
    user_config("[watch]\nrescan_interval_s = 0.3\n")
    flag = tmp_path / "disk-full"
    flag.touch()
    log_path = tmp_path / "daemon.log"
    env = {
        **os.environ,
        "POSTFLIGHTD_FAULT_AT": "todo:write=ENOSPC",
        "POSTFLIGHTD_FAULT_WHILE": str(flag),
    }
    with log_path.open("wb") as log_file:
        daemon = subprocess.Popen(
            [sys.executable, "-m", "postflightd", "watch", str(root), "--log-format", "json"],
            stdout=subprocess.DEVNULL,
            stderr=log_file,
            env=env,
        )
    try:
        wait_until("the daemon to start", lambda: "daemon_started" in log_path.read_text())
        meta = write_meta(root, "259_prove_completeness", researched_doc())
        wait_until("an incomplete event", lambda: '"incomplete"' in log_path.read_text())
        assert meta.exists()
        assert state_entry(root, 259)["status"] == "researched"
        assert "[RESEARCHING]" in (root / "specs" / "TODO.md").read_text("utf-8")
        flag.unlink()  # the disk has room again
        wait_until("the file to go", lambda: not meta.exists())
        assert "[RESEARCHED]" in (root / "specs" / "TODO.md").read_text("utf-8")
    finally:
        terminate(daemon)
    assert daemon.returncode == 0, log_path.read_text()


# --- 1. the same on a real full disk (root only) -----------------------------------------------


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 256 KiB tmpfs mounted in tmp_path (needs root: skipped otherwise)."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        unavailable("mounting a small tmpfs needs root (the fault-point tests cover the logic)")
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        unavailable(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(directory: Path, leave: int) -> Path:
    """Fill the filesystem of ``directory`` up to ``leave`` bytes free; the filler file."""
    filler = directory / "filler"
    st = os.statvfs(directory)
    size = max(st.f_bavail * st.f_frsize - leave, 0)
    # A write that finds the disk full a page early is close enough.
    with filler.open("wb") as fh, contextlib.suppress(OSError):
        fh.write(b"\0" * size)
    return filler


def test_disk_full_at_every_level_never_deletes_a_half_written_outcome(
    small_tmpfs: Path,
) -> None:
    """A tmpfs filled to N pages free, N = 0..24: applied whole and deleted, or kept; then done."""
    page = os.sysconf("SC_PAGE_SIZE")
    outcomes: dict[str, int] = {}
    for free_pages in range(0, 25, 2):
        root = small_tmpfs / f"p{free_pages}"
        root.mkdir()
        # Padding makes TODO.md the big write of the two: about 9 pages; state.json: 1.
        project(root, TASKS, todo=TODO + "x" * (8 * page), artifacts=True)
        meta = write_meta(root, "259_prove_completeness", researched_doc())
        filler = _fill(small_tmpfs, free_pages * page)
        first = run("process", str(meta))
        todo = (root / "specs" / "TODO.md").read_text("utf-8")
        state_json = (root / "specs" / "state.json").read_text("utf-8")
        json.loads(state_json)  # never torn
        if first.returncode == 0:
            outcomes["applied"] = outcomes.get("applied", 0) + 1
            assert not meta.exists() and "[RESEARCHED]" in todo
        else:
            # Kept, with the reason; possibly with state.json already written (PF606).
            assert first.returncode == 4, first.stdout + first.stderr
            assert "No space left on device" in first.stdout, first.stdout
            assert meta.exists()
            key = "half" if '"status": "researched"' in state_json else "none"
            outcomes[key] = outcomes.get(key, 0) + 1
        filler.unlink()
        again = run("process", str(meta))
        assert again.returncode == 0, again.stdout + again.stderr
        assert not meta.exists()
        assert state_entry(root, 259)["status"] == "researched"
        assert "[RESEARCHED]" in (root / "specs" / "TODO.md").read_text("utf-8")
        shutil.rmtree(root)
    # The levels span the three cases, the one that matters most among them: state.json
    # written and TODO.md not.
    assert outcomes.get("half", 0) >= 1, outcomes
    assert outcomes.get("applied", 0) >= 1, outcomes


# --- 2. `process` on a file another run has just applied --------------------------------------


def _stopped(proc: subprocess.Popen[bytes]) -> bool:
    try:
        fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] == "T"


def _finish(proc: subprocess.Popen[bytes]) -> int:
    """SIGCONT a run stopped at each pass of its stop point until it exits."""
    deadline = time.monotonic() + 60
    while proc.poll() is None:
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("the stopped run did not finish")
        if _stopped(proc):
            proc.send_signal(signal.SIGCONT)
        time.sleep(0.01)
    return proc.returncode


def _scan_apply_stopped_at(root: Path, point: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "postflightd", "scan", "--apply", str(root)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "POSTFLIGHTD_STOP_AT": point},
    )
    wait_until(f"scan --apply to stop at {point}", lambda: _stopped(proc) or proc.poll())
    assert proc.poll() is None
    return proc


def test_process_after_another_runs_first_delete_says_already_postflighted(
    tmp_path: Path,
) -> None:
    """The batch deleted the file but has not journaled `deleted` yet: exit 0, not 'no such'."""
    root = project(tmp_path / "p", TASKS, todo=TODO, artifacts=True)
    first = write_meta(root, "259_prove_completeness", researched_doc())
    write_meta(root, "260_second_task", researched_doc("260_second_task"))
    batch = _scan_apply_stopped_at(root, "after-delete")
    try:
        assert not first.exists()  # deleted by the batch, which now holds the lock, stopped
        assert not journal_rows("deleted")
        answer = run("process", str(first))
        assert answer.returncode == 0, answer.stdout + answer.stderr
        assert "already post-flighted" in answer.stdout
    finally:
        assert _finish(batch) == 0
    assert state_entry(root, 259)["status"] == "researched"


def test_process_of_a_file_that_vanishes_while_it_waits_for_the_lock(tmp_path: Path) -> None:
    """Read by `process`, then applied and deleted by the batch holding the lock: exit 0."""
    root = project(tmp_path / "p", TASKS, todo=TODO, artifacts=True)
    write_meta(root, "259_prove_completeness", researched_doc())
    second = write_meta(root, "260_second_task", researched_doc("260_second_task"))
    batch = _scan_apply_stopped_at(root, "before-delete")
    # `process` reads the file, then tries the project lock, opening its file at each try:
    # the lock file opened while the batch holds it means the file was read. (Its own
    # `validated` row is no sign: the journal records an unchanged file seen again once.)
    opened = threading.Event()

    class LockOpened(FileSystemEventHandler):
        def on_opened(self, event: FileSystemEvent) -> None:
            if str(event.src_path).endswith(".state.lock"):
                opened.set()

    observer = Observer()
    observer.schedule(LockOpened(), str(root / "specs"))
    observer.start()
    try:
        waiting = subprocess.Popen(
            [sys.executable, "-m", "postflightd", "process", str(second)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert opened.wait(60), "process never tried the lock"
        finally:
            assert _finish(batch) == 0
    finally:
        observer.stop()
        observer.join(10)
    out, err = waiting.communicate(timeout=60)
    assert waiting.returncode == 0, out + err
    assert "already post-flighted" in out
    assert len(state_entry(root, 260)["artifacts"]) == 1


def test_process_of_a_file_never_applied_is_still_no_such_file(tmp_path: Path) -> None:
    root = project(tmp_path / "p", TASKS, todo=TODO, artifacts=True)
    missing = root / "specs" / "259_prove_completeness" / META
    answer = run("process", str(missing))
    assert answer.returncode == 2
    assert "no such file" in answer.stderr


# --- 4. what a kill -9 leaves behind is cleaned up by the next run ----------------------------


@pytest.mark.parametrize(
    ("point", "doc"),
    [
        ("state:after-temp-write", researched_doc()),
        ("todo:after-temp-write", researched_doc()),
        ("errors:after-temp-write", partial_doc()),
    ],
)
def test_temp_files_of_a_killed_writer_are_removed_by_the_next_run(
    tmp_path: Path, point: str, doc: dict[str, Any]
) -> None:
    root = project(tmp_path / "p", TASKS, todo=TODO, artifacts=True)
    meta = write_meta(root, "259_prove_completeness", doc)
    killed = run("process", str(meta), POSTFLIGHTD_CRASH_AT=point)
    assert killed.returncode == -signal.SIGKILL
    litter = list((root / "specs").glob(".*.tmp"))
    assert len(litter) == 1, litter
    # A temp file of a live writer (this test's pid) is left alone.
    live = root / "specs" / f".state.json.{os.getpid()}.0123abcd.tmp"
    live.write_text("{}", "utf-8")

    again = run("process", str(meta))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "a temporary file a killed writer left" in again.stderr
    assert not litter[0].exists()
    assert live.exists()
    assert not meta.exists()


def test_a_deletion_interrupted_by_kill_is_finished_after_checking_the_journal(
    tmp_path: Path,
) -> None:
    """The aside file's content is journaled: the next run removes it and says so."""
    root = project(tmp_path / "p", TASKS, todo=TODO, artifacts=True)
    meta = write_meta(root, "259_prove_completeness", researched_doc())
    killed = run("process", str(meta), POSTFLIGHTD_CRASH_AT="delete:after-rename")
    assert killed.returncode == -signal.SIGKILL
    (aside,) = meta.parent.glob("..return-meta.json.*.deleting")
    assert not meta.exists()
    assert [c for _, c in journal_rows("postflighted")] == [aside.read_text("utf-8")]

    again = run("scan", "--apply", str(root))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "content is in the journal" in again.stderr
    assert not aside.exists() and not meta.exists()
    assert len(state_entry(root, 259)["artifacts"]) == 1


def _dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(child.stdout)


def test_an_aside_file_the_journal_does_not_hold_is_put_back_and_applied(tmp_path: Path) -> None:
    root = project(tmp_path / "p", TASKS, todo=TODO, artifacts=True)
    task_dir = root / "specs" / "259_prove_completeness"
    task_dir.mkdir(parents=True, exist_ok=True)
    aside = task_dir / f"..return-meta.json.{_dead_pid()}.00ff00ff.deleting"
    aside.write_text(json.dumps(researched_doc()), "utf-8")

    again = run("scan", "--apply", str(root))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "restored" in again.stderr
    assert not aside.exists() and not (task_dir / META).exists()
    assert state_entry(root, 259)["status"] == "researched"
    assert len(journal_rows("postflighted")) == 1


def test_an_unjournaled_aside_file_is_kept_when_a_newer_file_took_its_name(
    tmp_path: Path,
) -> None:
    root = project(tmp_path / "p", TASKS, todo=TODO, artifacts=True)
    task_dir = root / "specs" / "259_prove_completeness"
    task_dir.mkdir(parents=True, exist_ok=True)
    aside = task_dir / f"..return-meta.json.{_dead_pid()}.00ff00ff.deleting"
    older = partial_doc()
    aside.write_text(json.dumps(older), "utf-8")
    newer = write_meta(root, "259_prove_completeness", researched_doc())

    again = run("process", str(newer))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "kept" in again.stderr and "look at it" in again.stderr
    assert json.loads(aside.read_text("utf-8")) == older
    assert state_entry(root, 259)["status"] == "researched"


def test_daemon_start_cleans_what_a_killed_run_left(tmp_path: Path) -> None:
    root = project(tmp_path / "p", TASKS, todo=TODO, artifacts=True)
    meta = write_meta(root, "259_prove_completeness", researched_doc())
    killed = run("process", str(meta), POSTFLIGHTD_CRASH_AT="delete:after-rename")
    assert killed.returncode == -signal.SIGKILL
    (aside,) = meta.parent.glob("..return-meta.json.*.deleting")
    temp = root / "specs" / f".TODO.md.{_dead_pid()}.abcdef01.tmp"
    temp.write_text("half a TODO", "utf-8")
    log_path = tmp_path / "daemon.log"
    with log_path.open("wb") as log_file:
        daemon = subprocess.Popen(
            [sys.executable, "-m", "postflightd", "watch", str(root), "--log-format", "json"],
            stdout=subprocess.DEVNULL,
            stderr=log_file,
        )
    try:
        wait_until("the daemon to start", lambda: "daemon_started" in log_path.read_text())
        assert not aside.exists() and not temp.exists()
        assert log_path.read_text().count('"crash_leftover"') == 2
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(10)


# --- 4. malformed leftovers: only our own regular files are ever touched ----------------------


def test_names_like_our_leftovers_that_are_not_ours_are_left_alone(tmp_path: Path) -> None:
    """Links, directories, FIFOs, other names and impossible pids: nothing removed or followed."""
    root = project(tmp_path / "p", TASKS, todo=TODO, artifacts=True)
    specs, dead = root / "specs", _dead_pid()
    outside = tmp_path / "outside.txt"
    outside.write_text("not yours", "utf-8")
    planted = {
        "link": specs / f".state.json.{dead}.0123abcd.tmp",
        "dir": specs / f".TODO.md.{dead}.0123abcd.tmp",
        "fifo": specs / f".errors.json.{dead}.0123abcd.tmp",
        "other target": specs / f".notes.md.{dead}.0123abcd.tmp",
        "no hex": specs / f".state.json.{dead}.tmp",
        "huge pid": specs / ".state.json.99999999999999999999.0123abcd.tmp",
    }
    planted["link"].symlink_to(outside)
    planted["dir"].mkdir()
    os.mkfifo(planted["fifo"])
    for name in ("other target", "no hex", "huge pid"):
        planted[name].write_text("x", "utf-8")
    aside_link = specs / "259_prove_completeness" / f"..return-meta.json.{dead}.0123abcd.deleting"
    aside_link.symlink_to(outside)

    done = run("scan", "--apply", str(root))
    assert done.returncode == 0, done.stdout + done.stderr
    assert all(os.path.lexists(p) for p in planted.values())
    assert os.path.lexists(aside_link)
    assert outside.read_text("utf-8") == "not yours"
    assert not (specs / "259_prove_completeness" / META).exists()


def test_an_oversized_aside_file_is_put_back_never_removed(tmp_path: Path) -> None:
    """Too big to have been post-flighted: it goes back under its name (then PF101, kept)."""
    root = project(tmp_path / "p", TASKS, todo=TODO, artifacts=True)
    task_dir = root / "specs" / "259_prove_completeness"
    aside = task_dir / f"..return-meta.json.{_dead_pid()}.00ff00ff.deleting"
    aside.write_text(" " * (1024 * 1024 + 10), "utf-8")
    done = run("scan", "--apply", str(root))
    assert done.returncode == 1
    assert "restored" in done.stderr and "PF101" in done.stdout
    assert (task_dir / META).stat().st_size == 1024 * 1024 + 10
