"""Benchmark: one root's postflight latency while another root of the same daemon hangs.

    .venv/bin/python bench/stall.py [--tasks 100] [--files 30] [--before main] [--timeout 10]

One ``postflightd watch A B``: root A is a FUSE mount (tests/fixtures/hangfs.py) that blocks
every operation on demand, as a hard NFS mount whose server stopped answering; root B is a
plain directory. Timed: B's rename -> applied latency (the final file renamed into place until
state.json is updated and the file deleted), median of ``--files`` files, with A healthy and
then with A hung. The same runs are made with the code of ``--before`` (a git revision: the
one loop doing every root's work in turn), whose B never gets its files while A hangs:
reported as "never" with the timeout used. Needs /dev/fuse, libfuse2 and fusepy (root).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

from machine import describe
from watch import META, make_project, stage, wait_for

REPO = Path(__file__).resolve().parents[1]
HANGFS = REPO / "tests" / "fixtures" / "hangfs.py"


def latencies(root: Path, first: int, count: int, timeout: float) -> list[float] | None:
    """B's rename -> applied times for tasks first..first+count-1; None once one never is."""
    out = []
    for n in range(first, first + count):
        meta = root / "specs" / f"{n}_task{n}" / META
        tmp = stage(root, n)
        t0 = time.perf_counter()
        tmp.rename(meta)
        if not wait_for(lambda meta=meta: not meta.exists(), timeout):
            return None
        out.append(time.perf_counter() - t0)
        time.sleep(0.005)
    return out


def source_of(rev: str, into: Path) -> Path:
    """``src/`` of the git revision ``rev``, extracted under ``into``."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", rev, "src"],
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def run(work: Path, name: str, src: Path, args: argparse.Namespace) -> dict[str, str]:
    """Both figures for the code under ``src``."""
    a_src, a, b, control = (
        work / f"{name}-a-src",
        work / f"{name}-a",
        work / f"{name}-b",
        work / f"{name}-hang",
    )
    make_project(a_src, args.tasks)
    make_project(b, 2 * args.files + 1)
    a.mkdir()
    fs = subprocess.Popen(
        [sys.executable, str(HANGFS), str(a_src), str(a), str(control)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(src),
        "XDG_STATE_HOME": str(work / f"{name}-state"),
        "XDG_CONFIG_HOME": str(work / f"{name}-config"),
    }
    config = work / f"{name}-config" / "postflightd" / "config.toml"
    config.parent.mkdir(parents=True)
    # A reconciliation every second: the daemon meets the hang soon, with no event needed.
    config.write_text("[watch]\nrescan_interval_s = 1\n", encoding="utf-8")
    daemon = None
    try:
        if not wait_for(lambda: os.path.ismount(a), 15, 0.05):
            raise SystemExit("the FUSE mount did not appear: needs /dev/fuse, libfuse2, fusepy")
        daemon = subprocess.Popen(
            [sys.executable, "-m", "postflightd", "watch", str(a), str(b), "--log-level", "error"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        if not wait_for((b / "specs" / ".postflightd.pid").exists, 15, 0.05):
            raise SystemExit(f"{name}: the daemon did not start")
        time.sleep(1.0)
        healthy = latencies(b, 1, args.files, args.timeout)
        control.touch()
        time.sleep(2.5)  # the next reconciliation of A blocks
        hung = latencies(b, args.files + 1, args.files, args.timeout)
    finally:
        control.unlink(missing_ok=True)
        if daemon is not None:
            daemon.send_signal(signal.SIGTERM)
            try:
                daemon.wait(20)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()
        subprocess.run(["fusermount", "-u", "-z", str(a)], check=False)
        fs.terminate()
        fs.wait(10)

    def median(values: list[float] | None) -> str:
        if values is None:
            return f"never (no file applied within {args.timeout:g} s)"
        return f"{statistics.median(values) * 1000:.1f} ms"

    return {"healthy": median(healthy), "hung": median(hung)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100, help="task directories in root A")
    parser.add_argument("--files", type=int, default=30, help="files timed in root B, per case")
    parser.add_argument("--before", default="main", help="git revision of the code before")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds to wait per file")
    args = parser.parse_args()
    if not os.path.exists("/dev/fuse") or shutil.which("fusermount") is None:
        raise SystemExit("needs /dev/fuse and fusermount (Debian: fuse, libfuse2)")
    print(describe())
    with tempfile.TemporaryDirectory(prefix="pf-stall-") as tmp:
        work = Path(tmp)
        now = run(work, "now", REPO / "src", args)
        before = run(work, "before", source_of(args.before, work / "before-src"), args)
    print(f"\nroot B's rename -> applied latency (median of {args.files} files)")
    print(f"{'':24}{'A healthy':>14}  A hung")
    print(f"{'a worker per root':24}{now['healthy']:>14}  {now['hung']}")
    print(f"{'one loop (' + args.before + ')':24}{before['healthy']:>14}  {before['hung']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
