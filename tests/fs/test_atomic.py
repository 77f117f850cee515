"""fs.atomic, fs.locks, fs.litter: atomic writes, crash safety, the project lock, the
conditional replace (replace_if_unchanged), safe deletion."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from helpers.waiting import wait_until
from postflightd.errors import PostflightError
from postflightd.fs.atomic import (
    Snapshot,
    TooLargeError,
    atomic_write,
    delete_if_unchanged,
    read_snapshot,
    replace_if_unchanged,
)
from postflightd.fs.directory import Directory, FileIdentity, RefusedError, StoreError
from postflightd.fs.locks import LOCK_NAME, LockTimeoutError, project_lock

DEADLINE_S = 10.0


def at(path: Path) -> tuple[Directory, str]:
    """The open parent directory and the name: how the store names every file."""
    return Directory.anchor(path.parent), path.name


def leftovers(directory: Path, keep: set[str]) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name not in keep)


def run_python(code: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[str]]]:
    """Processes a test starts; any still running at the end are killed, never leaked."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            if _own_group(proc):
                # The shell flock test: its sleep child holds the lock too.
                os.killpg(proc.pid, signal.SIGKILL)
            else:
                proc.kill()
        proc.communicate()


def _own_group(proc: subprocess.Popen[str]) -> bool:
    try:
        return os.getpgid(proc.pid) == proc.pid
    except ProcessLookupError:
        return False


# --- atomic_write -----------------------------------------------------------------------------


def test_atomic_write_creates_a_new_file_with_default_mode(tmp_path: Path) -> None:
    """A new file gets 0o644 less the umask, and no temporary file is left."""
    target = tmp_path / "state.json"
    old = os.umask(0o022)
    try:
        atomic_write(*at(target), b"{}\n")
    finally:
        os.umask(old)
    assert target.read_bytes() == b"{}\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert leftovers(tmp_path, {"state.json"}) == []


def test_atomic_write_keeps_permission_bits(tmp_path: Path) -> None:
    """A 0o600 file stays 0o600 (fchmod, not subject to the umask)."""
    target = tmp_path / "state.json"
    target.write_bytes(b"old")
    target.chmod(0o600)
    atomic_write(*at(target), b"new")
    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    target.chmod(0o664)
    atomic_write(*at(target), b"newer")
    assert stat.S_IMODE(target.stat().st_mode) == 0o664
    assert leftovers(tmp_path, {"state.json"}) == []


def test_atomic_write_replaces_the_inode(tmp_path: Path) -> None:
    """The write is a rename of a new file, never an in-place rewrite."""
    target = tmp_path / "state.json"
    target.write_bytes(b"old")
    before = target.stat().st_ino
    atomic_write(*at(target), b"new")
    assert target.stat().st_ino != before


def test_atomic_write_refuses_a_symlink_and_writes_nothing(tmp_path: Path) -> None:
    """A symlinked state.json is refused: its target is not written, the link stays."""
    real = tmp_path / "real.json"
    real.write_bytes(b"old")
    link = tmp_path / "state.json"
    link.symlink_to(real)
    with pytest.raises(StoreError, match="symbolic link"):
        atomic_write(*at(link), b"new")
    assert link.is_symlink()
    assert real.read_bytes() == b"old"
    assert leftovers(tmp_path, {"state.json", "real.json"}) == []


def test_atomic_write_through_a_dangling_link_creates_nothing(tmp_path: Path) -> None:
    """A dangling link (errors.json -> anywhere) never creates its target."""
    target = tmp_path / "elsewhere" / "created.json"
    target.parent.mkdir()
    link = tmp_path / "errors.json"
    link.symlink_to(target)
    with pytest.raises(StoreError, match="symbolic link"):
        atomic_write(*at(link), b"[]")
    assert not target.exists()
    assert link.is_symlink()


def test_read_snapshot_and_replace_if_unchanged_refuse_a_symlink(tmp_path: Path) -> None:
    """Nothing is read through a link either: the transform never runs."""
    real = tmp_path / "real.json"
    real.write_bytes(b"secret")
    (tmp_path / "state.json").symlink_to(real)
    with pytest.raises(StoreError, match="symbolic link"):
        read_snapshot(*at(tmp_path / "state.json"))
    with pytest.raises(StoreError, match="symbolic link"):
        replace_if_unchanged(
            *at(tmp_path / "state.json"), lambda _s: pytest.fail("read through a link")
        )
    assert real.read_bytes() == b"secret"


def test_a_file_over_the_limit_is_refused_without_being_read_and_never_transformed(
    tmp_path: Path,
) -> None:
    """With a limit, a larger file is a TooLargeError, sparse or not; one of exactly the limit
    is read; the transform never sees the larger one."""
    path = tmp_path / "errors.json"
    with path.open("wb") as fh:
        fh.truncate(64 * 1024 * 1024)  # sparse: reading it whole would cost 64 MiB
    with pytest.raises(TooLargeError, match="larger than 1024 bytes"):
        read_snapshot(*at(path), limit=1024)
    with pytest.raises(TooLargeError):
        replace_if_unchanged(*at(path), lambda _s: pytest.fail("transformed"), limit=1024)
    assert path.stat().st_size == 64 * 1024 * 1024
    path.write_bytes(b"x" * 1024)
    assert read_snapshot(*at(path), limit=1024).raw == b"x" * 1024


def test_atomic_write_error_when_parent_is_a_file(tmp_path: Path) -> None:
    """A path under a regular file is a clear StoreError, and nothing is created."""
    blocker = tmp_path / "specs"
    blocker.write_bytes(b"not a dir")
    with pytest.raises(NotADirectoryError):
        Directory.anchor(blocker)
    with pytest.raises(RefusedError, match="not a directory"):
        Directory.anchor(tmp_path).subdir("specs")
    assert leftovers(tmp_path, {"specs"}) == []


def test_atomic_write_error_removes_the_temp_file_and_keeps_the_original(tmp_path: Path) -> None:
    """A failing replace (a directory in place of the target) leaves no temp file behind."""
    target = tmp_path / "state.json"
    target.mkdir()
    (target / "inside").write_bytes(b"x")
    with pytest.raises(StoreError, match="is a directory"):
        atomic_write(*at(target), b"{}")
    assert target.is_dir()
    assert (target / "inside").read_bytes() == b"x"
    assert leftovers(tmp_path, {"state.json"}) == []


def test_readers_never_see_a_torn_file(tmp_path: Path, procs: list[subprocess.Popen[str]]) -> None:
    """A reader process looping during 200 rewrites only ever sees a whole old or new file."""
    target = tmp_path / "state.json"
    size = 64 * 1024
    # Each version is one digit string repeated: a torn read mixes two versions or is short.
    atomic_write(*at(target), b"%08d" % 0 * (size // 8))
    stop = tmp_path / "stop"
    reader = run_python(
        f"""
        from pathlib import Path
        target, stop, size = Path({str(target)!r}), Path({str(stop)!r}), {size}
        reads = 0
        print("ready", flush=True)
        while not stop.exists():
            data = target.read_bytes()
            assert len(data) == size, f"short read: {{len(data)}}"
            assert data == data[:8] * (size // 8), "torn read"
            reads += 1
        print(reads)
        """
    )
    procs.append(reader)
    assert reader.stdout is not None
    assert reader.stdout.readline().strip() == "ready"
    for i in range(1, 201):
        atomic_write(*at(target), b"%08d" % i * (size // 8))
    stop.touch()
    out, err = reader.communicate(timeout=DEADLINE_S)
    assert reader.returncode == 0, err
    assert int(out) > 0
    assert leftovers(tmp_path, {"state.json", "stop"}) == []


# --- crash points -----------------------------------------------------------------------------

CRASH_WRITER = """
import sys
from pathlib import Path
from postflightd.fs.atomic import atomic_write
from postflightd.fs.directory import Directory
target = Path(sys.argv[1])
data = sys.argv[2].encode()
atomic_write(Directory.anchor(target.parent), target.name, data, crash_label="state")
print("survived")
"""


@pytest.mark.parametrize(
    ("point", "expected"),
    [("state:after-temp-write", "old"), ("state:after-replace", "new")],
)
def test_crash_leaves_old_or_new_never_torn(tmp_path: Path, point: str, expected: str) -> None:
    """SIGKILL at each crash point leaves the old or the new content, and no torn target."""
    target = tmp_path / "state.json"
    old, new = '{"v": "old"}\n', '{"v": "new", "pad": "' + "x" * 100_000 + '"}\n'
    target.write_text(old)
    proc = subprocess.run(
        [sys.executable, "-c", CRASH_WRITER, str(target), new],
        env={**os.environ, "POSTFLIGHTD_CRASH_AT": point},
        capture_output=True,
        text=True,
        check=False,
        timeout=DEADLINE_S,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert "survived" not in proc.stdout
    assert target.read_text() == {"old": old, "new": new}[expected]
    for name in leftovers(tmp_path, {"state.json"}):
        # A crash may leave the temp file; it is never confused with the target.
        assert name.startswith(".state.json.")
        assert name.endswith(".tmp")


def test_crash_point_not_armed_for_another_label(tmp_path: Path) -> None:
    """Only the named point kills: another label runs to completion."""
    target = tmp_path / "state.json"
    proc = subprocess.run(
        [sys.executable, "-c", CRASH_WRITER, str(target), "new"],
        env={**os.environ, "POSTFLIGHTD_CRASH_AT": "todo:after-replace"},
        capture_output=True,
        text=True,
        check=False,
        timeout=DEADLINE_S,
    )
    assert proc.returncode == 0, proc.stderr
    assert target.read_text() == "new"


# --- the lock ---------------------------------------------------------------------------------

LOCK_HOLDER = """
import sys, time
from pathlib import Path
from postflightd.fs.locks import project_lock
from postflightd.fs.directory import Directory
specs, released = Path(sys.argv[1]), Path(sys.argv[2])
with project_lock(Directory.anchor(specs)):
    print("locked", flush=True)
    sys.stdin.readline()
    released.touch()
"""


def start_holder(
    specs: Path, released: Path, procs: list[subprocess.Popen[str]]
) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [sys.executable, "-c", LOCK_HOLDER, str(specs), str(released)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    procs.append(holder)
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "locked"
    return holder


def test_lock_timeout_names_the_lock_file(
    tmp_path: Path, procs: list[subprocess.Popen[str]]
) -> None:
    """While another process holds the lock, a short wait raises LockTimeoutError."""
    released = tmp_path / "released"
    start_holder(tmp_path, released, procs)
    with (
        Directory.anchor(tmp_path) as directory,
        pytest.raises(LockTimeoutError) as info,
        project_lock(directory, timeout_s=0.2),
    ):
        pytest.fail("acquired a lock another process holds")
    assert not released.exists(), "the lock was held throughout"
    assert str(tmp_path / LOCK_NAME) in str(info.value)
    assert isinstance(info.value, PostflightError)


def test_lock_waits_for_the_holder(tmp_path: Path, procs: list[subprocess.Popen[str]]) -> None:
    """The second process waits and gets the lock only after the first released it."""
    released = tmp_path / "released"
    holder = start_holder(tmp_path, released, procs)
    assert holder.stdin is not None
    waiter = run_python(
        f"""
        from pathlib import Path
        from postflightd.fs.locks import LockTimeoutError, project_lock
        from postflightd.fs.directory import Directory
        specs = Path({str(tmp_path)!r})
        try:
            with project_lock(Directory.anchor(specs), timeout_s=0.05):
                print("acquired while held", flush=True)
        except LockTimeoutError:
            print("busy", flush=True)
        with project_lock(Directory.anchor(specs), timeout_s=10):
            print(Path({str(released)!r}).exists())
        """
    )
    procs.append(waiter)
    assert waiter.stdout is not None
    # The waiter met the held lock (it cannot have it while the holder holds it) before the
    # holder lets go; then it waits for it.
    assert waiter.stdout.readline() == "busy\n"
    holder.stdin.write("go\n")
    holder.stdin.flush()
    out, err = waiter.communicate(timeout=DEADLINE_S)
    assert waiter.returncode == 0, err
    assert out.strip() == "True"


def test_lock_serialises_read_modify_write_across_processes(
    tmp_path: Path, procs: list[subprocess.Popen[str]]
) -> None:
    """Two processes incrementing a counter under the lock lose no increment."""
    counter = tmp_path / "counter"
    atomic_write(*at(counter), b"0")
    code = f"""
        from pathlib import Path
        from postflightd.fs.atomic import atomic_write
        from postflightd.fs.locks import project_lock
        from postflightd.fs.directory import Directory
        specs = Directory.anchor(Path({str(tmp_path)!r}))
        counter = Path({str(tmp_path / "counter")!r})
        for _ in range(100):
            with project_lock(specs, timeout_s=20):
                atomic_write(specs, "counter", str(int(counter.read_bytes()) + 1).encode())
        """
    workers = [run_python(code) for _ in range(2)]
    procs.extend(workers)
    for worker in workers:
        _, err = worker.communicate(timeout=60)
        assert worker.returncode == 0, err
    assert counter.read_bytes() == b"200"


def test_shell_flock_excludes_us_and_we_exclude_it(
    tmp_path: Path, procs: list[subprocess.Popen[str]]
) -> None:
    """util-linux `flock specs/.state.lock` and project_lock exclude each other."""
    lock = tmp_path / LOCK_NAME
    ready = tmp_path / "ready"
    shell = subprocess.Popen(
        ["flock", str(lock), "sh", "-c", f"touch {ready}; exec sleep 60"],
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    procs.append(shell)
    wait_until("the shell to take the lock", ready.exists)
    with pytest.raises(LockTimeoutError), project_lock(Directory.anchor(tmp_path), timeout_s=0.2):
        pytest.fail("acquired a lock the shell holds")
    os.killpg(shell.pid, signal.SIGKILL)
    shell.communicate(timeout=DEADLINE_S)
    with project_lock(Directory.anchor(tmp_path), timeout_s=DEADLINE_S):
        busy = subprocess.run(["flock", "-n", str(lock), "true"], check=False)
        assert busy.returncode == 1
    free = subprocess.run(["flock", "-n", str(lock), "true"], check=False)
    assert free.returncode == 0


def test_lock_file_is_a_dedicated_file(tmp_path: Path) -> None:
    """The lock file is created 0o644 (less umask) and stays after the lock is released."""
    old = os.umask(0o022)
    try:
        with project_lock(Directory.anchor(tmp_path)):
            pass
    finally:
        os.umask(old)
    lock = tmp_path / LOCK_NAME
    assert lock.is_file()
    assert stat.S_IMODE(lock.stat().st_mode) == 0o644
    assert leftovers(tmp_path, {LOCK_NAME}) == []


def test_lock_on_a_removed_specs_dir_is_a_clear_error(tmp_path: Path) -> None:
    """A specs directory removed after it was opened: a StoreError naming the lock file."""
    gone = tmp_path / "nope"
    gone.mkdir()
    specs = Directory.anchor(gone)
    gone.rmdir()
    with pytest.raises(StoreError, match=r"\.state\.lock"), project_lock(specs):
        pytest.fail("locked a file in a missing directory")


@pytest.mark.parametrize("kind", ["link", "dangling", "fifo"])
def test_lock_file_that_is_not_a_regular_file_is_refused(tmp_path: Path, kind: str) -> None:
    """.state.lock as a link (to a file or nowhere) or a FIFO: refused, nothing created."""
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "victim"
    if kind == "link":
        target.write_bytes(b"keep")
    lock = tmp_path / LOCK_NAME
    if kind == "fifo":
        os.mkfifo(lock)
    else:
        lock.symlink_to(target)
    specs = Directory.anchor(tmp_path)
    with pytest.raises(StoreError, match="lock file is a"), project_lock(specs, timeout_s=0.2):
        pytest.fail("locked through a link")
    if kind == "link":
        assert target.read_bytes() == b"keep"
    else:
        assert not target.exists()


def test_lock_is_released_on_exception(tmp_path: Path) -> None:
    """An exception inside the block releases the lock for the next writer."""
    with pytest.raises(RuntimeError), project_lock(Directory.anchor(tmp_path)):
        raise RuntimeError("boom")
    free = subprocess.run(["flock", "-n", str(tmp_path / LOCK_NAME), "true"], check=False)
    assert free.returncode == 0


# --- snapshots and replace_if_unchanged -----------------------------------------------------


def test_snapshot_of_a_missing_file(tmp_path: Path) -> None:
    """A missing file is a snapshot with no bytes and no identity."""
    snap = read_snapshot(*at(tmp_path / "state.json"))
    assert snap.raw is None
    assert snap.identity is None


def test_replace_if_unchanged_sees_a_same_size_rewrite_in_place(tmp_path: Path) -> None:
    """A rewrite in place that keeps the inode, the size and the mtime (a write within the
    filesystem's timestamp granularity) is told by its content: it is kept, and the transform
    re-applied over it."""
    target = tmp_path / "state.json"
    target.write_bytes(b"aaaa")
    calls: list[bytes | None] = []

    def transform(snap: Snapshot) -> bytes:
        calls.append(snap.raw)
        if len(calls) == 1:
            st = target.stat()
            with target.open("r+b") as f:
                f.write(b"bbbb")
            os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
        return (snap.raw or b"") + b"+ours"

    replace_if_unchanged(*at(target), transform)
    assert calls == [b"aaaa", b"bbbb"]
    assert target.read_bytes() == b"bbbb+ours"
    assert leftovers(tmp_path, {"state.json"}) == []


def test_read_snapshot_refuses_a_directory(tmp_path: Path) -> None:
    """A directory in place of the file is a StoreError that says so."""
    (tmp_path / "state.json").mkdir()
    with pytest.raises(StoreError, match="is a directory"):
        read_snapshot(*at(tmp_path / "state.json"))


def test_read_snapshot_does_not_hang_on_a_fifo(tmp_path: Path) -> None:
    """A FIFO planted at the path is refused at once."""
    os.mkfifo(tmp_path / "state.json")
    with pytest.raises(StoreError, match="not a regular file"):
        read_snapshot(*at(tmp_path / "state.json"))


def append_line(line: bytes) -> Callable[[Snapshot], bytes]:
    def transform(snap: Snapshot) -> bytes:
        return (snap.raw or b"") + line

    return transform


def test_replace_if_unchanged_applies_the_transform(tmp_path: Path) -> None:
    """replace_if_unchanged writes what the transform returns and gives back what it wrote over."""
    target = tmp_path / "state.json"
    target.write_bytes(b"a\n")
    written_over = replace_if_unchanged(*at(target), append_line(b"b\n"))
    assert written_over is not None
    assert written_over.raw == b"a\n"
    assert target.read_bytes() == b"a\nb\n"
    assert leftovers(tmp_path, {"state.json"}) == []


def test_replace_if_unchanged_nothing_to_write(tmp_path: Path) -> None:
    """A transform returning None writes nothing and keeps the inode."""
    target = tmp_path / "state.json"
    target.write_bytes(b"a\n")
    ino = target.stat().st_ino
    assert replace_if_unchanged(*at(target), lambda _snap: None) is None
    assert target.stat().st_ino == ino


def test_replace_if_unchanged_reapplies_over_a_concurrent_update(tmp_path: Path) -> None:
    """Another writer replacing the file between read and check: both updates survive."""
    target = tmp_path / "state.json"
    target.write_bytes(b"a\n")
    calls: list[bytes | None] = []

    def transform(snap: Snapshot) -> bytes:
        calls.append(snap.raw)
        if len(calls) == 1:
            # A writer outside the lock (jq > tmp && mv) lands while we compute.
            other = tmp_path / "jq.tmp"
            other.write_bytes((snap.raw or b"") + b"jq\n")
            other.replace(target)
        return (snap.raw or b"") + b"ours\n"

    written_over = replace_if_unchanged(*at(target), transform)
    assert calls == [b"a\n", b"a\njq\n"]
    assert target.read_bytes() == b"a\njq\nours\n"
    assert written_over is not None
    assert written_over.raw == b"a\njq\n"
    assert leftovers(tmp_path, {"state.json"}) == []


def test_replace_if_unchanged_notices_a_file_created_meanwhile(tmp_path: Path) -> None:
    """A file that did not exist when read but appeared before the write is not clobbered."""
    target = tmp_path / "state.json"
    calls = 0

    def transform(snap: Snapshot) -> bytes:
        nonlocal calls
        calls += 1
        if calls == 1:
            target.write_bytes(b"theirs\n")
        return (snap.raw or b"") + b"ours\n"

    replace_if_unchanged(*at(target), transform)
    assert target.read_bytes() == b"theirs\nours\n"


def test_replace_if_unchanged_gives_up_when_the_file_keeps_changing(tmp_path: Path) -> None:
    """A file replaced at every attempt: a clear error, the other writer's content kept."""
    target = tmp_path / "state.json"
    target.write_bytes(b"0")
    calls = 0

    def transform(snap: Snapshot) -> bytes:
        nonlocal calls
        calls += 1
        other = tmp_path / "other.tmp"
        other.write_bytes(b"theirs %d" % calls)
        other.replace(target)
        return b"ours"

    directory, name = at(target)
    with directory, pytest.raises(StoreError, match="keeps changing") as info:
        replace_if_unchanged(directory, name, transform, attempts=3)
    assert calls == 3
    assert "state.json" in str(info.value)
    assert target.read_bytes() == b"theirs 3"
    assert leftovers(tmp_path, {"state.json"}) == []


def test_replace_if_unchanged_crash_after_temp_write_keeps_old(tmp_path: Path) -> None:
    """replace_if_unchanged passes its crash label through to the atomic write."""
    target = tmp_path / "state.json"
    target.write_bytes(b"old")
    code = f"""
        from pathlib import Path
        from postflightd.fs.atomic import replace_if_unchanged
        from postflightd.fs.directory import Directory
        specs = Directory.anchor(Path({str(tmp_path)!r}))
        replace_if_unchanged(specs, "state.json", lambda s: b"new", crash_label="state")
        """
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env={**os.environ, "POSTFLIGHTD_CRASH_AT": "state:after-temp-write"},
        capture_output=True,
        check=False,
        timeout=DEADLINE_S,
    )
    assert proc.returncode == -signal.SIGKILL
    assert target.read_bytes() == b"old"


# --- delete_if_unchanged ----------------------------------------------------------------------


def identity_of(path: Path) -> FileIdentity:
    return FileIdentity.of(path.stat())


def test_delete_unchanged_file(tmp_path: Path) -> None:
    """The file processed is deleted, and nothing is left aside."""
    meta = tmp_path / ".return-meta.json"
    meta.write_bytes(b"{}")
    assert delete_if_unchanged(*at(meta), identity_of(meta))
    assert list(tmp_path.iterdir()) == []


def test_delete_keeps_a_file_replaced_meanwhile(tmp_path: Path) -> None:
    """A new inode at the path (write-temp-then-rename) is kept for processing again."""
    meta = tmp_path / ".return-meta.json"
    meta.write_bytes(b'{"status": "in_progress"}')
    seen = identity_of(meta)
    other = tmp_path / "tmp"
    other.write_bytes(b'{"status": "implemented"}')
    other.replace(meta)
    after = identity_of(meta)
    assert not delete_if_unchanged(*at(meta), seen)
    assert meta.read_bytes() == b'{"status": "implemented"}'
    assert identity_of(meta) == after
    assert leftovers(tmp_path, {".return-meta.json"}) == []


def test_delete_keeps_a_file_rewritten_in_place(tmp_path: Path) -> None:
    """Same inode with a new size, or the same size with a new mtime: kept."""
    meta = tmp_path / ".return-meta.json"
    meta.write_bytes(b"aaaa")
    seen = identity_of(meta)
    meta.write_bytes(b"aaaaaa")
    assert identity_of(meta).ino == seen.ino
    assert not delete_if_unchanged(*at(meta), seen)
    assert meta.read_bytes() == b"aaaaaa"

    seen = identity_of(meta)
    meta.write_bytes(b"bbbbbb")
    os.utime(meta, ns=(seen.mtime_ns, seen.mtime_ns + 1_000_000))
    assert not delete_if_unchanged(*at(meta), seen)
    assert meta.read_bytes() == b"bbbbbb"
    assert leftovers(tmp_path, {".return-meta.json"}) == []


def test_delete_missing_file(tmp_path: Path) -> None:
    """A file already gone is not an error: False."""
    meta = tmp_path / ".return-meta.json"
    meta.write_bytes(b"{}")
    seen = identity_of(meta)
    meta.unlink()
    assert not delete_if_unchanged(*at(meta), seen)
