"""Faults during postflight: crashes at every step, concurrent writers, rewrites, permissions."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers.crash_points import unknown
from helpers.documents import partial_doc, researched_doc, task_entry
from helpers.needs import require, require_tool, unavailable
from helpers.project import journal_rows, project, write_artifact, write_meta
from helpers.waiting import wait_until

#: Real daemons and console-script runs in bulk: `pytest -m "not slow"` leaves them out (all
#: but the check of the crash-point table, which reads the source).
slow = pytest.mark.slow

CRASH_POINTS = [
    "before-state-write",
    "state:after-temp-write",
    "state:before-exchange",
    "state:after-exchange",
    "state:after-replace",
    "after-state-write",
    "todo:after-temp-write",
    "todo:after-replace",
    "after-todo-write",
    "errors:after-replace",
    "before-delete",
    "after-delete",
]
KINDS = ["researched", "partial"]
#: (kind, point) pairs whose run never passes the point, each with the reason: killed there,
#: it would finish normally, so these are held to finishing instead of to dying.
NEVER_REACHED = {
    ("researched", "errors:after-replace"): (
        "a researched outcome reports no errors, so errors.json is never written"
    ),
}
CRASHES = [
    (kind, point) for kind in KINDS for point in CRASH_POINTS if (kind, point) not in NEVER_REACHED
]

TODO = "# TODO\n\n### 259. Prove completeness\n- **Status**: [RESEARCHING]\n"


def process(path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "postflightd", "process", str(path)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **env},
    )


def test_every_crash_point_in_the_table_is_one_the_source_passes() -> None:
    """A label renamed in src/ would turn its crash cases into normal runs: say it here."""
    assert unknown(CRASH_POINTS) == []
    assert {point for _, point in NEVER_REACHED} <= set(CRASH_POINTS)


def _sample(kind: str, tmp_path: Path) -> tuple[Path, Path, dict[str, Any]]:
    root = project(
        tmp_path / "p", [task_entry(259, "prove_completeness")], todo=TODO, artifacts=True
    )
    doc = researched_doc() if kind == "researched" else partial_doc()
    return root, write_meta(root, "259_prove_completeness", doc), doc


@slow
@pytest.mark.parametrize(("kind", "point"), CRASHES)
def test_crash_at_every_step_then_rerun_applies_exactly_once(
    tmp_path: Path, point: str, kind: str
) -> None:
    """SIGKILL at a step, run again: state.json parses, applied once, content never lost."""
    root, meta, doc = _sample(kind, tmp_path)

    crashed = process(meta, POSTFLIGHTD_CRASH_AT=point)
    assert crashed.returncode == -signal.SIGKILL, crashed.stdout + crashed.stderr
    json.loads((root / "specs" / "state.json").read_text("utf-8"))  # never torn
    assert meta.exists() or any(json.loads(c) == doc for _, c in journal_rows("postflighted"))

    if meta.exists():
        again = process(meta)
        assert again.returncode == 0, again.stdout + again.stderr
    _assert_applied_once(root, meta, kind)


@slow
@pytest.mark.parametrize(
    ("kind", "point", "reason"), [(*pair, reason) for pair, reason in NEVER_REACHED.items()]
)
def test_a_run_that_never_reaches_the_crash_point_finishes(
    tmp_path: Path, kind: str, point: str, reason: str
) -> None:
    """The point names a write this outcome never makes: the run applies it in full."""
    root, meta, _doc = _sample(kind, tmp_path)
    finished = process(meta, POSTFLIGHTD_CRASH_AT=point)
    assert finished.returncode == 0, f"{reason}; yet: {finished.stdout + finished.stderr}"
    assert not (root / "specs" / "errors.json").exists(), reason
    _assert_applied_once(root, meta, kind)


def _assert_applied_once(root: Path, meta: Path, kind: str) -> None:
    assert not meta.exists()
    state = json.loads((root / "specs" / "state.json").read_text("utf-8"))
    entry = state["active_projects"][0]
    assert len(entry["artifacts"]) == 1
    if kind == "researched":
        assert entry["status"] == "researched"
        assert "[RESEARCHED]" in (root / "specs" / "TODO.md").read_text("utf-8")
    else:
        assert entry["resume_phase"] == 3
        errors = json.loads((root / "specs" / "errors.json").read_text("utf-8"))
        assert [e["message"] for e in errors] == ["ran out of time"]
    leftovers = [p.name for p in (root / "specs").iterdir() if "tmp" in p.name.lower()]
    assert all(not name.startswith(("state.json", "TODO.md")) for name in leftovers)


@slow
def test_two_process_runs_on_the_same_file_apply_it_once(tmp_path: Path) -> None:
    """Concurrent runs serialise on the lock: one applies, the other finds it gone."""
    root = project(tmp_path / "p", [task_entry(259, "prove_completeness")])
    write_artifact(root, "specs/259_prove_completeness/reports/research-001.md")
    meta = write_meta(root, "259_prove_completeness", researched_doc())
    cmd = [sys.executable, "-m", "postflightd", "process", str(meta)]
    procs = [
        subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(4)
    ]
    outs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], outs
    state = json.loads((root / "specs" / "state.json").read_text("utf-8"))
    assert len(state["active_projects"][0]["artifacts"]) == 1
    assert len(journal_rows("postflighted")) == 1
    assert not meta.exists()


@slow
def test_file_rewritten_during_postflight_is_processed_again(tmp_path: Path) -> None:
    """The agent rewrites the file while postflight waits for the lock: the new content wins."""
    require_tool("flock", "the lock is held from outside by util-linux flock")
    root = project(tmp_path / "p", [task_entry(259, "prove_completeness")])
    write_artifact(root, "specs/259_prove_completeness/reports/research-001.md")
    write_artifact(root, "specs/259_prove_completeness/reports/research-002.md")
    meta = write_meta(root, "259_prove_completeness", researched_doc())
    lock = root / "specs" / ".state.lock"
    ready = tmp_path / "locked"
    # Its own process group, so that killing it also kills the `sleep` that holds the lock fd.
    holder = subprocess.Popen(
        ["flock", str(lock), "sh", "-c", f"touch {ready}; sleep 30"], start_new_session=True
    )
    try:
        wait_until("the holder to take the lock", ready.exists)
        runner = subprocess.Popen(
            [sys.executable, "-m", "postflightd", "process", str(meta)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        # The run has validated the first content once the journal says so; then rewrite it.
        wait_until(
            "process to validate the file",
            lambda: any(f.endswith(".return-meta.json") for f, _ in journal_rows("validated")),
        )
        second = researched_doc()
        second["artifacts"][0]["path"] = "specs/259_prove_completeness/reports/research-002.md"
        tmp = meta.with_name("tmp.json")
        tmp.write_text(json.dumps(second), encoding="utf-8")
        tmp.replace(meta)
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait()
    out, err = runner.communicate(timeout=60)
    assert runner.returncode == 0, out + err
    state = json.loads((root / "specs" / "state.json").read_text("utf-8"))
    paths = [a["path"] for a in state["active_projects"][0]["artifacts"]]
    assert paths == ["specs/259_prove_completeness/reports/research-002.md"]
    assert not meta.exists()


@slow
def test_locking_jq_writer_and_500_postflights_lose_no_update(tmp_path: Path) -> None:
    """A jq loop that joins the lock protocol and scan --apply never lose each other's writes."""
    require_tool("flock", "the jq writer joins the lock through util-linux flock")
    require_tool("jq", "the writer that joins the lock protocol is a jq loop")
    n = 500
    tasks = [task_entry(i, f"t{i}") for i in range(1, n + 1)] + [task_entry(9999, "counter")]
    root = project(tmp_path / "p", tasks)
    for i in range(1, n + 1):
        write_artifact(root, f"specs/{i}_t{i}/reports/research-001.md")
        write_meta(root, f"{i}_t{i}", researched_doc(f"{i}_t{i}"))
    specs = root / "specs"
    rounds = 80
    script = (
        f"cd {specs} && for i in $(seq {rounds}); do "
        "flock .state.lock sh -c '"
        'jq ".active_projects[-1].counter = ((.active_projects[-1].counter // 0) + 1)" '
        "state.json > .jq.tmp && mv .jq.tmp state.json' || exit 1; done"
    )
    writer = subprocess.Popen(["bash", "-c", script])
    scans = []
    # Several scan --apply runs while the writer loops: each takes the files still there.
    while writer.poll() is None or not scans:
        scans.append(
            subprocess.run(
                [sys.executable, "-m", "postflightd", "scan", "--apply", str(root)],
                capture_output=True,
                text=True,
                check=False,
            )
        )
    assert writer.wait(timeout=120) == 0
    last = subprocess.run(
        [sys.executable, "-m", "postflightd", "scan", "--apply", str(root)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert last.returncode == 0, last.stdout[-2000:] + last.stderr
    state = json.loads((specs / "state.json").read_text("utf-8"))
    assert state["active_projects"][-1]["counter"] == rounds
    assert sum(1 for t in state["active_projects"] if t["status"] == "researched") == n
    assert not list(specs.glob("*/.return-meta.json"))


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A directory an unprivileged user can traverse (pytest's tmp_path is 0700)."""
    path = Path(tempfile.mkdtemp(prefix="pf-perm-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _nobody_python() -> list[str] | None:
    """An interpreter command an unprivileged user can run with postflightd importable.

    The venv's python may live under /root (pyenv), which user nobody cannot traverse; the
    system python of the same minor version can import the venv's packages instead.
    """
    import postflightd

    paths = os.pathsep.join(
        [str(Path(postflightd.__file__).parent.parent), sysconfig.get_paths()["purelib"]]
    )
    minor = sys.version_info.minor
    for exe in (sys.executable, f"/usr/bin/python3.{minor}", f"/usr/local/bin/python3.{minor}"):
        if not Path(exe).exists():
            continue
        try:
            probe = subprocess.run(
                [exe, "-c", "import postflightd.cli, pydantic"],
                env={**os.environ, "PYTHONPATH": paths},
                user=65534,
                group=65534,
                cwd="/",
                capture_output=True,
                check=False,
            )
        except PermissionError:
            continue
        if probe.returncode == 0:
            return [exe]
    return None


def as_nobody(argv: list[str], state_home: Path) -> subprocess.CompletedProcess[str]:
    python = _nobody_python()
    if python is None:
        unavailable("no Python interpreter with postflightd is runnable by user nobody here")
    import postflightd

    paths = os.pathsep.join(
        [str(Path(postflightd.__file__).parent.parent), sysconfig.get_paths()["purelib"]]
    )
    env = {
        **os.environ,
        "XDG_STATE_HOME": str(state_home),
        "XDG_CONFIG_HOME": str(state_home),
        "XDG_CACHE_HOME": str(state_home),
        "HOME": str(state_home),
        "PYTHONPATH": paths,
    }
    return subprocess.run(
        [*python, "-m", "postflightd", *argv],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        user=65534,
        group=65534,
        cwd=str(state_home),
    )


def give_to_nobody(root: Path) -> None:
    """The project's root and specs directory, and what is in specs/, owned by nobody."""
    for path in (root, *root.glob("specs"), *root.glob("specs/**/*")):
        os.chown(path, NOBODY, NOBODY)


NOBODY = 65534


@pytest.fixture
def needs_root() -> None:
    require(os.geteuid() == 0, "switching to an unprivileged user needs root")


@slow
@pytest.mark.usefixtures("needs_root")
def test_permission_denied_on_state_json_is_a_clear_error(shared_tmp: Path) -> None:
    """state.json and its directory not writable: exit 4, one clear line, nothing changed."""
    root = project(shared_tmp / "p", [task_entry(259, "prove_completeness")])
    write_artifact(root, "specs/259_prove_completeness/reports/research-001.md")
    meta = write_meta(root, "259_prove_completeness", researched_doc())
    # The project is nobody's (another user's project is left alone), but neither specs/ nor
    # state.json can be written by it.
    give_to_nobody(root)
    (root / "specs").chmod(0o555)
    os.chown(root / "specs" / "state.json", 0, 0)
    state_home = shared_tmp / "home"
    state_home.mkdir(mode=0o777)
    state_home.chmod(0o777)
    before = (root / "specs" / "state.json").read_bytes()
    out = as_nobody(["process", str(meta)], state_home)
    assert out.returncode == 4, out.stdout + out.stderr
    assert "Traceback" not in out.stderr + out.stdout
    assert "ermission denied" in out.stdout + out.stderr
    assert (root / "specs" / "state.json").read_bytes() == before
    assert meta.exists()


@slow
@pytest.mark.usefixtures("needs_root")
def test_permission_denied_on_the_task_dir_applies_but_keeps_the_file(shared_tmp: Path) -> None:
    """The metadata file cannot be deleted: applied, kept, said; a second run is harmless."""
    root = project(shared_tmp / "p", [task_entry(259, "prove_completeness")])
    write_artifact(root, "specs/259_prove_completeness/reports/research-001.md")
    meta = write_meta(root, "259_prove_completeness", researched_doc())
    specs = root / "specs"
    give_to_nobody(root)  # but its task directory stays root's: the file cannot be deleted
    os.chown(meta.parent, 0, 0)
    specs.chmod(0o777)
    (specs / "state.json").chmod(0o666)
    state_home = shared_tmp / "home"
    state_home.mkdir()
    state_home.chmod(0o777)
    out = as_nobody(["process", str(meta)], state_home)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "could not be deleted" in out.stdout
    assert meta.exists()
    state = json.loads((specs / "state.json").read_text("utf-8"))
    assert state["active_projects"][0]["status"] == "researched"
    again = as_nobody(["process", str(meta)], state_home)
    assert again.returncode == 0
    state = json.loads((specs / "state.json").read_text("utf-8"))
    assert len(state["active_projects"][0]["artifacts"]) == 1
