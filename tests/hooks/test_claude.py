"""`postflightd hook claude` as a stop hook: real subprocess, JSON on stdin."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from helpers.documents import researched_doc, task_entry
from helpers.project import project, write_meta

#: Task 259 ready for a researched file; task 260 without its report.
TASKS = [task_entry(259, "prove_completeness"), task_entry(260, "plan_it")]

HOOK = [sys.executable, "-m", "postflightd", "hook", "claude"]

#: Runs argv[2:] as its own child and writes that child's peak memory (KiB) to argv[1]. A child
#: started straight from the test process would report the test process's peak instead: exec
#: keeps the peak of the memory it replaces in ru_maxrss, and pytest's grows over a session.
PEAK_MEMORY = (
    "import os, subprocess, sys\n"
    "proc = subprocess.Popen(sys.argv[2:])\n"
    "_, status, usage = os.wait4(proc.pid, 0)\n"
    "with open(sys.argv[1], 'w') as fh:\n"
    "    fh.write(str(usage.ru_maxrss))\n"
    "sys.exit(os.waitstatus_to_exitcode(status))\n"
)


def hook(
    payload: Any, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[bytes]:
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return subprocess.run(
        HOOK,
        input=raw,
        capture_output=True,
        check=False,
        env={**os.environ, **(env or {})},
        timeout=timeout,
    )


def one_object(out: subprocess.CompletedProcess[bytes]) -> dict[str, Any]:
    """The hook's stdout is exactly one JSON object, and its exit code is never 2.

    What the protocol promises (docs/hooks/claude.md, docs/decisions/hook-protocol.md):
    stdout holds only that object, ``{}`` when the hook does not block. So the object is
    compared, not the bytes: the whitespace around it (a trailing newline) is not part of the
    promise, and anything else printed there fails ``json.loads``.
    """
    assert out.returncode != 2, out.stderr
    doc = json.loads(out.stdout.decode("utf-8"))  # extra output would be "Extra data"
    assert isinstance(doc, dict), out.stdout
    return doc


def test_valid_final_file_is_applied_and_hook_prints_empty_object(tmp_path: Path) -> None:
    """A valid researched file: applied, `{}` on stdout, exit 0."""
    root = project(tmp_path / "proj", TASKS, artifacts=[259])
    meta = write_meta(root, "259_prove_completeness", researched_doc())
    out = hook({"cwd": str(root / "specs"), "hook_event_name": "Stop", "stop_hook_active": False})
    assert out.returncode == 0, out.stderr
    assert one_object(out) == {}
    assert not meta.exists()
    state = json.loads((root / "specs" / "state.json").read_text("utf-8"))
    assert state["active_projects"][0]["status"] == "researched"


def test_invalid_file_blocks_with_exact_fixes_but_valid_ones_are_still_applied(
    tmp_path: Path,
) -> None:
    """The block reason names the file and what to fix; the valid file is applied anyway."""
    root = project(tmp_path / "proj", TASKS, artifacts=[259])
    good = write_meta(root, "259_prove_completeness", researched_doc())
    bad_doc = researched_doc("260_plan_it")
    bad_doc["status"] = "completed"
    bad = write_meta(root, "260_plan_it", bad_doc)
    out = hook({"cwd": str(root), "stop_hook_active": False})
    assert out.returncode == 0
    decision = one_object(out)
    assert decision["decision"] == "block"
    assert "specs/260_plan_it/.return-meta.json" in decision["reason"]
    assert "PF203" in decision["reason"]
    assert not good.exists()
    assert bad.exists()


def test_never_blocks_when_stop_hook_active_and_tells_the_person(tmp_path: Path) -> None:
    """stop_hook_active: the runtime is already looping; never a block, whatever is wrong, but
    the person hears that the agent stopped with its file invalid."""
    root = project(tmp_path / "proj", TASKS, artifacts=[259])
    bad_doc = researched_doc()
    bad_doc["status"] = "completed"
    write_meta(root, "259_prove_completeness", bad_doc)
    out = hook({"cwd": str(root), "stop_hook_active": True})
    assert out.returncode == 0
    answer = one_object(out)
    assert set(answer) == {"systemMessage"}
    assert answer["systemMessage"].startswith(
        "postflightd: specs/259_prove_completeness/.return-meta.json is invalid (PF203"
    )


def test_other_agents_in_progress_files_are_left_alone(tmp_path: Path) -> None:
    """A running agent's in_progress file is neither deleted nor a reason to block."""
    root = project(tmp_path / "proj", TASKS, artifacts=[259])
    doc = researched_doc()
    doc.update(
        status="in_progress",
        started_at=datetime.now(UTC).isoformat(),
        partial_progress={"stage": "s", "details": "d"},
    )
    meta = write_meta(root, "259_prove_completeness", doc)
    before = meta.read_bytes()
    out = hook({"cwd": str(root), "stop_hook_active": False})
    assert out.returncode == 0
    assert meta.read_bytes() == before


def test_cwd_without_a_project_prints_empty_object(tmp_path: Path) -> None:
    """Nothing to do outside a project: {} and exit 0."""
    out = hook({"cwd": str(tmp_path), "stop_hook_active": False})
    assert out.returncode == 0
    assert one_object(out) == {}


@pytest.mark.parametrize(
    "stdin",
    [
        b"",
        b"{truncated",
        b"[1, 2]",
        b'{"stop_hook_active": false}',
        b"\xff\xfe",
        b'{"cwd": 5}',
        b'{"cwd": "/x"} trailing',
        b'{"cwd": "/x", "stop_hook_active": "yes"}',
    ],
    ids=[
        "empty",
        "truncated",
        "array",
        "no-cwd",
        "not-utf8",
        "cwd-not-string",
        "trailing",
        "active-not-bool",
    ],
)
def test_malformed_hook_input_is_exit_1_with_one_stderr_line_never_2(stdin: bytes) -> None:
    """Malformed stdin: exit 1 (non-blocking), one line on stderr, `{}` on stdout, no traceback.

    Exit 2 would tell the runtime to block and feed stderr to the agent.
    """
    out = hook(stdin)
    assert out.returncode == 1
    assert one_object(out) == {}
    assert b"Traceback" not in out.stderr
    assert out.stderr.startswith(b"postflightd: ")
    assert out.stderr.count(b"\n") == 1


# --- the runtime's protocol: problems that are not the metadata's ----------------------------


def test_unusable_journal_is_a_system_message_and_stdout_holds_only_the_answer(
    tmp_path: Path,
) -> None:
    """A broken [journal] path: the file is applied, and the warning goes to stderr, not stdout."""
    root = project(tmp_path / "proj", TASKS, artifacts=[259])
    meta = write_meta(root, "259_prove_completeness", researched_doc())
    config = tmp_path / "user.toml"
    config.write_text('[journal]\npath = "/dev/null/not-a-dir/journal.db"\n', encoding="utf-8")
    out = hook({"cwd": str(root), "stop_hook_active": False}, {"POSTFLIGHTD_CONFIG": str(config)})
    answer = one_object(out)
    assert out.returncode == 0
    assert "decision" not in answer
    assert "journal" in answer["systemMessage"]
    assert answer["systemMessage"].startswith("postflightd: ")
    assert b"journal" in out.stderr  # the log line, on stderr
    state = json.loads((root / "specs" / "state.json").read_text("utf-8"))
    assert state["active_projects"][0]["status"] == "researched"
    assert meta.exists()  # applied; kept because its content could not be recorded


def test_a_stop_with_nothing_to_record_never_opens_the_journal(tmp_path: Path) -> None:
    """No metadata file and nothing a crash left: the journal is not opened, so a journal that
    cannot open is not the person's business at every such stop; a stop that settles a deletion
    a crash left aside opens it (to see whether it holds that content) and says so."""
    root = project(tmp_path / "proj", TASKS, artifacts=[259])
    config = tmp_path / "user.toml"
    config.write_text('[journal]\npath = "/dev/null/not-a-dir/journal.db"\n', encoding="utf-8")
    env = {"POSTFLIGHTD_CONFIG": str(config)}
    stop = {"cwd": str(root), "stop_hook_active": False}
    out = hook(stop, env)
    assert out.returncode == 0, out.stderr
    assert one_object(out) == {}
    aside = (
        root / "specs" / "259_prove_completeness" / "..return-meta.json.999999.0badc0de.deleting"
    )
    aside.write_text(json.dumps(researched_doc()), encoding="utf-8")
    out = hook(stop, env)
    answer = one_object(out)
    assert "journal is unavailable" in answer["systemMessage"]
    assert b"restored" in out.stderr
    assert (aside.parent / ".return-meta.json").exists()  # not in the journal: processed again


def test_bad_project_config_is_a_system_message_never_exit_2(tmp_path: Path) -> None:
    """The user's broken .postflightd.toml is not the agent's to fix: systemMessage, exit 0."""
    root = project(tmp_path / "proj", TASKS, artifacts=[259])
    bad_doc = researched_doc()
    bad_doc["status"] = "completed"
    meta = write_meta(root, "259_prove_completeness", bad_doc)
    (root / ".postflightd.toml").write_text("specs_dir = [unclosed\n", encoding="utf-8")
    out = hook({"cwd": str(root), "stop_hook_active": False})
    answer = one_object(out)
    assert out.returncode == 0
    assert "decision" not in answer
    assert ".postflightd.toml" in answer["systemMessage"]
    assert meta.exists()


def test_unusable_state_json_is_a_system_message_not_a_block(tmp_path: Path) -> None:
    """A corrupt state.json (PF604): the person is told, the agent is not blocked over it."""
    root = project(tmp_path / "proj", TASKS, artifacts=[259])
    meta = write_meta(root, "259_prove_completeness", researched_doc())
    (root / "specs" / "state.json").write_text("{not json", encoding="utf-8")
    out = hook({"cwd": str(root), "stop_hook_active": False})
    answer = one_object(out)
    assert out.returncode == 0
    assert "decision" not in answer
    assert "state.json" in answer["systemMessage"]
    assert meta.exists()


def test_lock_held_by_another_process_is_a_system_message_while_it_is_held(tmp_path: Path) -> None:
    """A real `flock` holder on specs/.state.lock: the hook gives up waiting, says so in a
    systemMessage and exits 0, while the lock is still held."""
    root = project(tmp_path / "proj", TASKS, artifacts=[259])
    meta = write_meta(root, "259_prove_completeness", researched_doc())
    lock = root / "specs" / ".state.lock"
    # The script inherits the locked descriptor and holds it until its stdin closes.
    holder = subprocess.Popen(
        ["flock", str(lock), "sh", "-c", "echo locked; read -r _"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == b"locked\n"
        # The hook must give up on the lock by itself: the holder keeps it until its stdin
        # closes, so a hook that waited for the lock would run into this deadline and fail.
        out = hook({"cwd": str(root), "stop_hook_active": False}, timeout=25)
        held_throughout = holder.poll() is None
    finally:
        assert holder.stdin is not None and holder.stdout is not None
        holder.stdin.close()
        holder.wait(10)
        holder.stdout.close()
    answer = one_object(out)
    assert out.returncode == 0
    assert "decision" not in answer
    assert ".state.lock" in answer["systemMessage"]
    assert held_throughout  # the answer came while the lock was held, not after its release
    assert meta.exists()  # kept for the next run
    state = json.loads((root / "specs" / "state.json").read_text("utf-8"))
    assert state["active_projects"][0]["status"] == "researching"


# --- which project, which files -------------------------------------------------------------


def test_claude_project_dir_is_used_when_cwd_is_outside_the_project(tmp_path: Path) -> None:
    """The agent ran `cd /elsewhere`: the project comes from $CLAUDE_PROJECT_DIR."""
    root = project(tmp_path / "proj", TASKS, artifacts=[259])
    meta = write_meta(root, "259_prove_completeness", researched_doc())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = hook(
        {"cwd": str(elsewhere), "stop_hook_active": False}, {"CLAUDE_PROJECT_DIR": str(root)}
    )
    assert one_object(out) == {}
    assert out.returncode == 0
    assert not meta.exists()
    state = json.loads((root / "specs" / "state.json").read_text("utf-8"))
    assert state["active_projects"][0]["status"] == "researched"


def test_a_file_still_being_written_is_never_blocked_on(tmp_path: Path) -> None:
    """Another agent rewriting its file right now: not a reason to block this agent."""
    root = project(tmp_path / "proj", TASKS, artifacts=[259])
    # A wide settle window: a writer thread starved for a moment on a loaded machine must
    # not make its file look settled.
    (root / ".postflightd.toml").write_text("[watch]\nsettle_ms = 1000\n", encoding="utf-8")
    directory = root / "specs" / "260_plan_it"
    directory.mkdir(parents=True)
    path = directory / ".return-meta.json"
    halves = [b'{"status": "plan', b'ned", "artifacts": [], "metadata": {}}']
    stop = threading.Event()

    def keep_writing() -> None:
        while not stop.is_set():
            with path.open("wb") as fh:
                fh.write(halves[0])
                fh.flush()
                time.sleep(0.01)
                fh.write(halves[1])
            time.sleep(0.01)

    writer = threading.Thread(target=keep_writing)
    path.write_bytes(halves[0])
    writer.start()
    try:
        out = hook({"cwd": str(root), "stop_hook_active": False})
    finally:
        stop.set()
        writer.join()
    assert one_object(out) == {}
    assert out.returncode == 0


# --- stdin -----------------------------------------------------------------------------------


def test_300_mib_of_stdin_is_refused_without_reading_it_all(tmp_path: Path) -> None:
    """The 1 MiB limit holds while reading: memory stays bounded, reading stops early."""
    total = 300 * 1024 * 1024
    block = b"a" * (1024 * 1024)
    peak = tmp_path / "peak-kib"
    proc = subprocess.Popen(
        [sys.executable, "-c", PEAK_MEMORY, str(peak), *HOOK],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    written = 0
    outputs: dict[str, bytes] = {}

    def drain(name: str, stream: Any) -> None:
        outputs[name] = stream.read()

    readers = [
        threading.Thread(target=drain, args=("out", proc.stdout)),
        threading.Thread(target=drain, args=("err", proc.stderr)),
    ]
    for t in readers:
        t.start()
    try:
        proc.stdin.write(b'{"cwd": "')
        while written < total:
            proc.stdin.write(block)
            written += len(block)
    except BrokenPipeError:
        pass  # the hook stopped reading: what this test wants
    proc.wait(60)
    for t in readers:
        t.join(30)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        with contextlib.suppress(BrokenPipeError):
            stream.close()
    assert proc.returncode == 1
    assert json.loads(outputs["out"]) == {}
    assert b"larger than" in outputs["err"]
    assert written < 64 * 1024 * 1024, "the hook read far past its 1 MiB limit"
    # The whole interpreter stays well under the 300 MB it was sent.
    assert int(peak.read_text()) < 150 * 1024


def test_a_complete_document_with_stdin_left_open_returns_promptly(tmp_path: Path) -> None:
    """A runtime that never closes stdin: the hook answers once the object is complete."""
    root = project(tmp_path / "proj", TASKS, artifacts=[259])
    meta = write_meta(root, "259_prove_completeness", researched_doc())
    peak = tmp_path / "peak-kib"
    proc = subprocess.Popen(
        [sys.executable, "-c", PEAK_MEMORY, str(peak), *HOOK],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None
    try:
        doc = json.dumps({"cwd": str(root), "stop_hook_active": False, "x": '}{\\"}'})
        proc.stdin.write(doc.encode()[:20])
        proc.stdin.flush()
        time.sleep(0.05)  # the object arrives in two pieces
        proc.stdin.write(doc.encode()[20:] + b"\n")
        proc.stdin.flush()
        # A hook that waited for EOF would wait forever: the deadline fails the test.
        proc.wait(timeout=30)
    finally:
        proc.stdin.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.stdout is not None and proc.stderr is not None
    stdout = proc.stdout.read()
    proc.stdout.close()
    proc.stderr.close()
    assert proc.returncode == 0
    assert json.loads(stdout) == {}
    assert not meta.exists()


def test_closed_stdin_is_malformed_input_not_a_crash() -> None:
    """Started with descriptor 0 closed: exit 1, `{}`, one stderr line (no exit 70)."""
    out = subprocess.run(
        ["sh", "-c", 'exec "$0" -m postflightd hook claude <&-', sys.executable],
        capture_output=True,
        check=False,
        timeout=60,
    )
    assert out.returncode == 1, out.stderr
    assert one_object(out) == {}
    assert out.stderr.count(b"\n") == 1


def test_the_block_reason_says_every_finding_at_once(tmp_path: Path) -> None:
    """A bad status and a missing artifact are in one block reason: the agent fixes both in
    one try, not the status first and the artifact at its next stop."""
    root = project(tmp_path / "proj", TASKS)
    doc = researched_doc()
    doc["status"] = "done"
    doc["artifacts"] = [
        "specs/259_prove_completeness/reports/gone.md",
        {"type": "report", "path": "specs/259_prove_completeness/reports/also-gone.md"},
    ]
    write_meta(root, "259_prove_completeness", doc)
    out = hook({"cwd": str(root), "stop_hook_active": False})
    decision = one_object(out)
    assert decision["decision"] == "block"
    reason = decision["reason"]
    # The errors (the reason leaves the warnings out), in the order of the file: the status,
    # then each missing artifact.
    at = [reason.find(text) for text in ("PF202 (status)", "artifacts[0]", "artifacts[1].path")]
    assert -1 not in at and at == sorted(at), reason
    assert reason.count("PF502") == 2, reason
