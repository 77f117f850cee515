"""fs.renameat2 and the exchange in replace_if_unchanged: a version another writer renamed in
between our check and our swap is put back and built on, never overwritten."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from helpers.documents import researched_doc
from helpers.needs import unavailable
from helpers.project import project, task_status, write_meta
from helpers.waiting import wait_until
from postflightd.fs import renameat2
from postflightd.fs.atomic import Snapshot, replace_if_unchanged
from postflightd.fs.directory import Directory, StoreError

DEADLINE_S = 30.0


def _exchange_works(directory: Path) -> bool:
    a, b = directory / ".probe-a", directory / ".probe-b"
    a.write_bytes(b"a")
    b.write_bytes(b"b")
    try:
        with Directory.anchor(directory) as d:
            d.exchange(a.name, b.name)
    except OSError as exc:
        if exc.errno in renameat2.UNSUPPORTED:
            return False
        raise
    finally:
        swapped = a.read_bytes() == b"b"
        a.unlink()
        b.unlink()
    return swapped


@pytest.fixture
def exchangeable(tmp_path: Path) -> Path:
    if not _exchange_works(tmp_path):
        unavailable("this kernel or filesystem cannot exchange two names")
    return tmp_path


def test_exchange_swaps_two_names(exchangeable: Path) -> None:
    a, b = exchangeable / "a", exchangeable / "b"
    a.write_bytes(b"first")
    b.write_bytes(b"second")
    ino_a = a.stat().st_ino
    with Directory.anchor(exchangeable) as d:
        d.exchange("a", "b")
    assert (a.read_bytes(), b.read_bytes()) == (b"second", b"first")
    assert b.stat().st_ino == ino_a


def test_exchange_needs_both_names(exchangeable: Path) -> None:
    (exchangeable / "a").write_bytes(b"x")
    with Directory.anchor(exchangeable) as d, pytest.raises(FileNotFoundError):
        d.exchange("a", "missing")
    assert (exchangeable / "a").read_bytes() == b"x"


def test_rename_noreplace_never_replaces(exchangeable: Path) -> None:
    (exchangeable / "new").write_bytes(b"new")
    (exchangeable / "taken").write_bytes(b"theirs")
    with Directory.anchor(exchangeable) as d:
        with pytest.raises(FileExistsError):
            d.rename_noreplace("new", "taken")
        assert (exchangeable / "taken").read_bytes() == b"theirs"
        d.rename_noreplace("new", "free")
    assert (exchangeable / "free").read_bytes() == b"new"
    assert not (exchangeable / "new").exists()


def test_exchange_swaps_a_link_never_its_target(exchangeable: Path) -> None:
    target = exchangeable / "target"
    target.write_bytes(b"target")
    (exchangeable / "link").symlink_to(target)
    (exchangeable / "file").write_bytes(b"file")
    with Directory.anchor(exchangeable) as d:
        d.exchange("file", "link")
    assert (exchangeable / "file").is_symlink()
    assert (exchangeable / "link").read_bytes() == b"file"
    assert target.read_bytes() == b"target"


# --- replace_if_unchanged's exchange ------------------------------------------------------------

WRITER = """
    import sys
    from pathlib import Path
    from postflightd.fs.atomic import replace_if_unchanged
    from postflightd.fs.directory import Directory

    def transform(snap):
        print("read", (snap.raw or b"").decode().replace("\\n", "|"), flush=True)
        return (snap.raw or b"") + b"ours\\n"

    with Directory.anchor(Path(sys.argv[1])) as specs:
        replace_if_unchanged(specs, "state.json", transform, crash_label="state")
    """


def _stopped(proc: subprocess.Popen[str]) -> bool:
    try:
        fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] == "T"


def _foreign_write(target: Path, data: bytes) -> None:
    """What a writer that ignores the lock does: a temporary file renamed over the target."""
    tmp = target.with_name(".jq.tmp")
    tmp.write_bytes(data)
    tmp.replace(target)


def test_a_version_renamed_in_just_before_the_exchange_is_put_back_and_built_on(
    exchangeable: Path,
) -> None:
    """The foreign write lands after the last check, before the swap: only the exchange can
    see it. It is put back, read, and our outcome applied on top of it."""
    target = exchangeable / "state.json"
    target.write_bytes(b"a\n")
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(WRITER), str(exchangeable)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "POSTFLIGHTD_STOP_AT": "state:before-exchange"},
    )
    try:
        wait_until("the writer to stop before its exchange", lambda: _stopped(proc))
        # Checked, about to swap: another writer's version lands now.
        _foreign_write(target, b"a\nforeign\n")
        proc.send_signal(signal.SIGCONT)
        deadline = time.monotonic() + DEADLINE_S
        while proc.poll() is None and time.monotonic() < deadline:
            if _stopped(proc):
                proc.send_signal(signal.SIGCONT)  # the second attempt passes the point too
            time.sleep(0.01)
        out, err = proc.communicate(timeout=DEADLINE_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert out.splitlines() == ["read a|", "read a|foreign|"]
    assert target.read_bytes() == b"a\nforeign\nours\n"
    assert sorted(p.name for p in exchangeable.iterdir()) == ["state.json"]


def test_without_the_exchange_a_plain_rename_after_comparing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the kernel or filesystem cannot exchange (ENOSYS here, by the fault hook), the
    compare-then-rename still writes, and still re-applies over a version it sees."""
    monkeypatch.setenv("POSTFLIGHTD_FAULT_AT", "state:exchange=ENOSYS")
    target = tmp_path / "state.json"
    target.write_bytes(b"a\n")
    calls: list[bytes | None] = []

    def transform(snap: Snapshot) -> bytes:
        calls.append(snap.raw)
        if len(calls) == 1:
            _foreign_write(target, b"a\nforeign\n")
        return (snap.raw or b"") + b"ours\n"

    with Directory.anchor(tmp_path) as d:
        written_over = replace_if_unchanged(d, "state.json", transform, crash_label="state")
    assert calls == [b"a\n", b"a\nforeign\n"]
    assert written_over is not None
    assert written_over.raw == b"a\nforeign\n"
    assert target.read_bytes() == b"a\nforeign\nours\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


def test_an_exchange_fault_that_is_not_unsupported_is_an_error_leaving_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POSTFLIGHTD_FAULT_AT", "state:exchange=EIO")
    target = tmp_path / "state.json"
    target.write_bytes(b"a\n")
    with Directory.anchor(tmp_path) as d, pytest.raises(StoreError, match="cannot write"):
        replace_if_unchanged(d, "state.json", lambda s: b"new", crash_label="state")
    assert target.read_bytes() == b"a\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


def test_where_ctypes_cannot_be_imported_process_applies_with_a_plain_rename(
    tmp_path: Path,
) -> None:
    """An interpreter built without ctypes (or with it blocked): the exchange is unavailable,
    as on a kernel without renameat2, and ``process`` writes with the plain rename."""
    root = project(tmp_path / "p", 1)
    meta = write_meta(root, "1_task1", researched_doc("1_task1"))
    prelude = (
        "import sys; sys.modules['ctypes'] = None; "
        "from postflightd.cli import main; raise SystemExit(main(sys.argv[1:]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", prelude, "process", str(meta)],
        capture_output=True,
        text=True,
        check=False,
        timeout=DEADLINE_S * 4,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "applied to task 1 as researched" in done.stdout
    assert done.stderr == ""
    assert task_status(root, 1) == "researched"
    assert not meta.exists()
    # Nothing left behind: no temporary state.json beside the real one.
    assert sorted(p.name for p in (root / "specs").iterdir() if "state" in p.name) == [
        ".state.lock",
        "state.json",
    ]


def test_an_exchange_refused_by_a_seccomp_profile_fails_safe_in_process(tmp_path: Path) -> None:
    """EPERM (what a seccomp profile that denies renameat2 answers) is not "no such call":
    the plain rename, which could lose another writer's update, is not taken. ``process``
    applies nothing, keeps the metadata file and says why; a rerun where the call is allowed
    applies it."""
    root = project(tmp_path / "p", 1)
    meta = write_meta(root, "1_task1", researched_doc("1_task1"))
    state = (root / "specs" / "state.json").read_bytes()
    argv = [sys.executable, "-m", "postflightd", "process", str(meta)]
    env = {**os.environ, "POSTFLIGHTD_FAULT_AT": "state:exchange=EPERM"}
    done = subprocess.run(
        argv, capture_output=True, text=True, check=False, timeout=DEADLINE_S * 4, env=env
    )
    assert done.returncode == 4, done.stdout + done.stderr
    assert "Operation not permitted" in done.stdout and "the file is kept" in done.stdout
    assert "Traceback" not in done.stderr
    assert (root / "specs" / "state.json").read_bytes() == state
    assert meta.exists()
    assert sorted(p.name for p in (root / "specs").iterdir() if "state" in p.name) == [
        ".state.lock",
        "state.json",
    ]
    rerun = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert task_status(root, 1) == "researched"
