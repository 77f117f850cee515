"""Benchmark ``postflightd watch`` at the scale of real projects (10,000 and 100,000 task dirs).

    .venv/bin/python bench/scale.py [--sizes 1000,10000,100000] [--roots 50] [--idle 20]
                                    [--idle-10k 60] [--latency 100] [--main SRC]

Generated projects of 1,000 / 10,000 / 100,000 task directories: every 10th one holds a small
artifact tree (``build/obj/x``), task 1 holds a ``node_modules`` of 6,000 directories. state.json
lists 1,000 active tasks whatever the number of directories (older tasks are archived out
of state.json in the projects studied; the directories stay). Then one daemon over 50 roots
of 1,000 task directories each. For each: start-up reconciliation time (process start to
``daemon_started``), inotify watches (counted from /proc/PID/fdinfo of every inotify fd), idle
CPU over a window and RSS, rename-into-place -> applied latency (p50/p99), and the 1 MiB
hostile file (350,000 empty ``errors`` entries): the daemon's CPU seconds and peak RSS for it,
and the latency of a valid file written right behind it (in another root, for the 50 roots).

``--main DIR`` also runs the status quo (the daemon of the given source tree, e.g. main's
``src``) on the same trees for the idle figures, in the same run. The 100,000 size is skipped
for it: its recursive watch would take the whole per-user inotify limit of this shared machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from machine import describe

SESSION = "sess_1736700000_abc123"
META = ".return-meta.json"
ACTIVE = 1000
TARGETS = {"idle_pct": 0.1, "rss_mb": 60.0, "watches_per_dir": 2.0, "hostile_s": 1.0}


def researched(n: int) -> str:
    task_dir = f"{n}_task{n}"
    return json.dumps(
        {
            "status": "researched",
            "artifacts": [
                {
                    "type": "report",
                    "path": f"specs/{task_dir}/reports/research-001.md",
                    "summary": "Research report",
                }
            ],
            "next_steps": "Run /plan",
            "metadata": {
                "session_id": SESSION,
                "agent_type": "general-research-agent",
                "duration_seconds": 60,
                "delegation_depth": 1,
                "delegation_path": ["orchestrator", "research", "general-research-agent"],
            },
        }
    )


def hostile() -> bytes:
    """Just under 1 MiB: a partial status with 350,000-odd empty ``errors`` entries."""
    head = {
        "status": "partial",
        "artifacts": [],
        "metadata": {"session_id": SESSION, "agent_type": "a", "delegation_path": ["o", "a"]},
    }
    prefix = json.dumps(head)[:-1] + ', "errors": ['
    n = (1024 * 1024 - len(prefix) - 2) // 3
    return (prefix + ",".join(["{}"] * n) + "]}").encode()


def make_project(root: Path, dirs: int, *, big_tree: bool) -> None:
    specs = root / "specs"
    specs.mkdir(parents=True)
    active = min(dirs, ACTIVE)
    entries = [
        {
            "project_number": n,
            "project_name": f"task{n}",
            "status": "researching",
            "language": "general",
            "session_id": SESSION,
            "last_updated": "2026-01-08T14:30:00Z",
            "artifacts": [],
        }
        for n in range(1, active + 1)
    ]
    state = {"next_project_number": dirs + 1, "active_projects": entries}
    (specs / "state.json").write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
    todo = ["# TODO\n"]
    for n in range(1, active + 1):
        todo.append(f"\n### {n}. Task {n}\n- **Effort**: 1 hour\n- **Status**: [RESEARCHING]\n")
    (specs / "TODO.md").write_text("".join(todo), encoding="utf-8")
    for n in range(1, dirs + 1):
        task = specs / f"{n}_task{n}"
        if n <= active:
            (task / "reports").mkdir(parents=True)
            (task / "reports" / "research-001.md").write_text("# Research\n", encoding="utf-8")
        else:
            task.mkdir()
        if n % 10 == 0:
            (task / "build" / "obj" / "x").mkdir(parents=True)
    if big_tree:
        modules = specs / "1_task1" / "node_modules"
        for i in range(60):
            for j in range(99):
                (modules / f"pkg{i}" / f"sub{j}").mkdir(parents=True)
        # 60 + 60 * 99 = 6,000 directories


def inotify_watches(pid: int) -> int:
    """Watches held by the process: 'inotify wd:' lines of each inotify fd's fdinfo."""
    total = 0
    fd_dir = Path(f"/proc/{pid}/fd")
    for fd in fd_dir.iterdir():
        with contextlib.suppress(OSError):
            if os.readlink(fd) != "anon_inode:inotify":
                continue
            info = Path(f"/proc/{pid}/fdinfo/{fd.name}").read_text()
            total += sum(1 for line in info.splitlines() if line.startswith("inotify wd:"))
    return total


def cpu_rss(pid: int) -> tuple[float, float, float]:
    """CPU seconds, RSS MB, peak RSS MB."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    rss = hwm = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1])
        elif line.startswith("VmHWM:"):
            hwm = int(line.split()[1])
    return cpu, rss / 1024, hwm / 1024


def wait_for(cond: Callable[[], bool], timeout: float, poll: float = 0.0002) -> bool:
    deadline = time.perf_counter() + timeout
    while not cond():
        if time.perf_counter() > deadline:
            return False
        time.sleep(poll)
    return True


def pct(values: list[float], q: int) -> float:
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


class Daemon:
    def __init__(self, roots: list[Path], work: Path, env: dict[str, str], src: str | None):
        self.log = work / f"daemon-{time.monotonic_ns()}.log"
        env = dict(env)
        if src is not None:
            env["PYTHONPATH"] = src
        argv = [sys.executable, "-m", "postflightd", "watch", *map(str, roots)]
        argv += ["--log-format", "json"]
        self.t0 = time.perf_counter()
        with self.log.open("wb") as fh:
            self.proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, env=env)
        self.started_s = float("nan")

    def wait_started(self, timeout: float = 300) -> float:
        ok = wait_for(lambda: b"daemon_started" in self.log.read_bytes(), timeout, poll=0.005)
        if not ok:
            self.stop()
            raise SystemExit(f"daemon did not start: {self.log.read_text()[-2000:]}")
        self.started_s = time.perf_counter() - self.t0
        return self.started_s

    def count(self, event: str) -> int:
        return self.log.read_bytes().count(f'"event": "{event}"'.encode())

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def idle(d: Daemon, seconds: float) -> dict[str, float]:
    time.sleep(2)  # start-up's last events drained
    cpu0, _, _ = cpu_rss(d.proc.pid)
    overflows0 = d.count("event_queue_overflow")
    t0 = time.perf_counter()
    time.sleep(seconds)
    cpu1, rss, _ = cpu_rss(d.proc.pid)
    elapsed = time.perf_counter() - t0
    return {
        "idle_pct": 100 * (cpu1 - cpu0) / elapsed,
        "rss_mb": rss,
        "window_s": elapsed,
        "overflows": d.count("event_queue_overflow") - overflows0,
    }


def latency(roots: list[Path], count: int) -> list[float]:
    """Rename-into-place, one file at a time, cycling over the roots: seconds to applied."""
    times = []
    for i in range(count):
        root = roots[i % len(roots)]
        n = 2 + i // len(roots)
        meta = root / "specs" / f"{n}_task{n}" / META
        tmp = meta.with_name(f".meta.{n}.tmp")
        tmp.write_text(researched(n), encoding="utf-8")
        t0 = time.perf_counter()
        tmp.rename(meta)
        if not wait_for(lambda meta=meta: not meta.exists(), 30):
            raise SystemExit(f"{meta}: not applied within 30 s")
        times.append(time.perf_counter() - t0)
        time.sleep(0.005)
    return times


def hostile_run(d: Daemon, bad_root: Path, good_root: Path, n_bad: int, n_good: int) -> dict:
    """The 1 MiB file, then a valid file right behind it: what each costs."""
    bad = bad_root / "specs" / f"{n_bad}_task{n_bad}" / META
    good = good_root / "specs" / f"{n_good}_task{n_good}" / META
    invalid0 = d.count("invalid")
    # Reset the peak RSS (VmHWM) to the current RSS, so the peak is this file's (proc(5)).
    with contextlib.suppress(OSError):
        Path(f"/proc/{d.proc.pid}/clear_refs").write_text("5")
    cpu0, rss0, _ = cpu_rss(d.proc.pid)
    data = hostile()
    tmp_bad = bad.with_name(".hostile.tmp")
    tmp_bad.write_bytes(data)
    tmp_good = good.with_name(".good.tmp")
    tmp_good.write_text(researched(n_good), encoding="utf-8")
    t0 = time.perf_counter()
    tmp_bad.rename(bad)
    tmp_good.rename(good)
    ok = wait_for(lambda: not good.exists(), 60)
    good_s = time.perf_counter() - t0
    wait_for(lambda: d.count("invalid") > invalid0, 60, poll=0.01)
    bad_s = time.perf_counter() - t0
    time.sleep(0.5)
    cpu1, _, hwm = cpu_rss(d.proc.pid)
    bad.unlink(missing_ok=True)
    return {
        "bytes": len(data),
        "cpu_s": cpu1 - cpu0,
        "hwm_mb": hwm,
        "rss_before_mb": rss0,
        "reported_s": bad_s,
        "other_file_s": good_s if ok else float("nan"),
    }


def run_ours(roots: list[Path], work: Path, env: dict[str, str], args: Any, window: float) -> dict:
    d = Daemon(roots, work, env, None)
    try:
        out: dict[str, Any] = {"startup_s": d.wait_started()}
        out["watches"] = inotify_watches(d.proc.pid)
        out.update(idle(d, window))
        lat = latency(roots, args.latency)
        out["p50_ms"] = statistics.median(lat) * 1000
        out["p99_ms"] = pct(lat, 99) * 1000
        out["samples"] = len(lat)
        bad, good = (roots[0], roots[1]) if len(roots) > 1 else (roots[0], roots[0])
        out["hostile"] = hostile_run(d, bad, good, 900, 901)
        out["rescans"] = d.count("rescan")
        return out
    finally:
        d.stop()


def run_main(roots: list[Path], work: Path, env: dict[str, str], src: str, window: float) -> dict:
    d = Daemon(roots, work, env, src)
    try:
        out: dict[str, Any] = {"startup_s": d.wait_started()}
        out["watches"] = inotify_watches(d.proc.pid)
        out.update(idle(d, window))
        return out
    finally:
        d.stop()


def show(name: str, dirs: int, r: dict[str, Any]) -> None:
    per_dir = r["watches"] / dirs
    print(f"\n{name}")
    print(f"  start-up (process start -> reconciled, watching): {r['startup_s']:.2f} s")
    print(f"  inotify watches: {r['watches']:,} ({per_dir:.3f} per task directory)")
    print(
        f"  idle: {r['idle_pct']:.3f} % of a core over {r['window_s']:.0f} s, RSS "
        f"{r['rss_mb']:.1f} MB, queue overflows in the window: {r['overflows']}"
    )
    if "p50_ms" in r:
        print(
            f"  rename -> applied ({r['samples']} files): p50 {r['p50_ms']:.1f} ms, "
            f"p99 {r['p99_ms']:.1f} ms"
        )
        h = r["hostile"]
        print(
            f"  hostile {h['bytes']:,}-byte file: {h['cpu_s']:.2f} CPU s, reported after "
            f"{h['reported_s']:.2f} s, peak RSS {h['hwm_mb']:.1f} MB (RSS before it "
            f"{h['rss_before_mb']:.1f} MB); a valid file renamed in "
            f"right behind it applied after {h['other_file_s'] * 1000:.0f} ms"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--roots", type=int, default=50, help="roots of 1,000 (0: skip)")
    parser.add_argument("--idle", type=float, default=20, help="idle window, seconds")
    parser.add_argument("--idle-10k", type=float, default=60, help="idle window at 10,000")
    parser.add_argument("--latency", type=int, default=100, help="files renamed one at a time")
    parser.add_argument("--main", default=None, metavar="SRC", help="status quo source tree")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    print(f"machine: {describe()}")
    limit = Path("/proc/sys/fs/inotify/max_user_watches")
    if limit.exists():
        print(f"fs.inotify.max_user_watches = {limit.read_text().strip()}")
    with tempfile.TemporaryDirectory(prefix="postflightd-scale-") as tmp:
        work = Path(tmp)
        env = {
            **os.environ,
            "XDG_STATE_HOME": str(work / "state"),
            "XDG_CONFIG_HOME": str(work / "config"),
        }
        env.pop("POSTFLIGHTD_CONFIG", None)
        for dirs in sizes:
            root = work / f"p{dirs}"
            t0 = time.perf_counter()
            make_project(root, dirs, big_tree=True)
            print(
                f"\n== {dirs:,} task directories (node_modules of 6,000 dirs under task 1, "
                f"build/obj/x under every 10th; {min(dirs, ACTIVE):,} active tasks in "
                f"state.json); generated in {time.perf_counter() - t0:.1f} s"
            )
            window = args.idle_10k if dirs == 10_000 else args.idle
            if args.main and dirs <= 10_000:
                show("status quo (--main)", dirs, run_main([root], work, env, args.main, 10))
            ours = run_ours([root], work, env, args, window)
            show("postflightd watch (this tree)", dirs, ours)
            shutil.rmtree(root)
        if args.roots:
            roots = [work / f"r{i}" for i in range(args.roots)]
            t0 = time.perf_counter()
            for i, root in enumerate(roots):
                make_project(root, 1000, big_tree=i == 0)
            print(
                f"\n== {args.roots} roots of 1,000 task directories, one daemon "
                f"(generated in {time.perf_counter() - t0:.1f} s)"
            )
            ours = run_ours(roots, work, env, args, args.idle)
            show(
                f"postflightd watch, {args.roots} roots (hostile file in root 0, the valid "
                "file in root 1)",
                1000 * args.roots,
                ours,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
