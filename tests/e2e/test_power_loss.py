"""Power loss: every crash state the disk may leave is recovered and checked.

Each workload runs through the real CLI (``python -m postflightd ...``, a subprocess) under
strace, in a copy of the example project; its file-system calls on the project and on the
journal's directory are replayed on the tree as it was before, and every cut of them gives the
states a persistence model lets the disk hold after a power loss there
(``helpers.crash_states``: a weak POSIX model and ext4's ``data=ordered``). Each distinct
state is put on disk, checked as it is, recovered the way a user would (the same command
again, then ``verify --repair``, in-process), and checked again. The invariants are those of
docs/safety.md, "Power loss":

* in the crash state: state.json, TODO.md and errors.json are each one whole version that was
  written (or the one before), never torn; a metadata file is gone only if its outcome is in
  state.json and its ``postflighted`` row in the journal (a file renamed aside for deletion
  counts as still there);
* after recovery: the project holds what the run without a crash left, timestamps aside
  (every outcome applied, nothing reported lost); no temporary or renamed-aside file is left;
  the journal passes SQLite's integrity check and holds every outcome; ``verify`` is clean.

The counts are printed (``-s`` shows them). The states checked are sampled deterministically
(a fixed seed) so that the whole runs within a few minutes; ``PF_CRASH_STATES`` sets how many
per workload (190).
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from helpers import crash_states as cs
from helpers.needs import require_strace
from helpers.paths import copy_example
from helpers.waiting import wait_until
from postflightd.cli import main
from postflightd.journal.database import default_journal_path
from postflightd.project.state import STATE_CACHE

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

SEED = 20261128
#: Distinct crash states checked at most per workload.
STATES_PER_WORKLOAD = int(os.environ.get("PF_CRASH_STATES", "190"))
META = ".return-meta.json"
VALID = "259_prove_completeness"
PLANNED = "260_lsp_setup"
FAILED = "263_flaky_ci"
STUCK = "262_parser_rewrite"

FAILED_DOC = {
    "status": "failed",
    "artifacts": [],
    "metadata": {
        "session_id": "sess_1736700400_mno345",
        "agent_type": "general-research-agent",
        "delegation_depth": 1,
        "delegation_path": ["orchestrator", "research", "general-research-agent"],
    },
    "errors": [
        {
            "type": "timeout",
            "message": "the CI runner timed out",
            "recoverable": True,
            "recommendation": "run it again",
        }
    ],
}


def example(root: Path) -> Path:
    """The example project with three files ready: researched, planned, failed."""
    copy_example(root)
    planned = root / "specs" / PLANNED / META
    planned.write_text(
        planned.read_text(encoding="utf-8").replace('"completed"', '"planned"', 1),
        encoding="utf-8",
    )
    (root / "specs" / FAILED / META).write_text(json.dumps(FAILED_DOC, indent=2), "utf-8")
    return root


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "postflightd", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        cwd=cwd,
    )


@dataclass(slots=True)
class Workload:
    name: str
    #: the traced command's arguments, given the project root
    argv: Callable[[Path], list[str]]
    #: task directories whose metadata file the workload applies
    applies: tuple[str, ...] = ()
    #: untraced set-up after the example is copied (given the root)
    prepare: Callable[[Path], None] | None = None
    #: what a user runs next, in-process (given the root and the crash state's tree)
    recover: Callable[[Path], list[list[str]]] = lambda root: []
    #: no journal before the workload (its first run on the machine)
    fresh_journal: bool = False
    #: a daemon (``watch``): stopped with SIGTERM once the files it applies are gone
    daemon: bool = False


def _lose_an_update(root: Path) -> None:
    """A postflight of 259 whose state.json a writer that ignores the lock then put back."""
    state = root / "specs" / "state.json"
    before = state.read_bytes()
    done = cli("process", str(root / "specs" / VALID / META), cwd=root)
    assert done.returncode == 0, done.stdout + done.stderr
    state.write_bytes(before)


def _again_then_repair(command: list[str]) -> Callable[[Path], list[list[str]]]:
    """The same command again (``process`` of a file already applied says so, having
    settled what the crash left beside it), then ``verify --repair``."""

    def recover(root: Path) -> list[list[str]]:
        again = [a.replace("{root}", str(root)) for a in command]
        return [again, ["verify", "--repair", str(root)]]

    return recover


WORKLOADS = [
    Workload(
        "process a valid file",
        lambda r: ["process", str(r / "specs" / VALID / META)],
        (VALID,),
        recover=_again_then_repair(["process", "{root}/specs/" + VALID + "/" + META]),
    ),
    Workload(
        "process a valid file, the journal created by it",
        lambda r: ["process", str(r / "specs" / VALID / META)],
        (VALID,),
        recover=_again_then_repair(["process", "{root}/specs/" + VALID + "/" + META]),
        fresh_journal=True,
    ),
    Workload(
        "process a failed file (errors.json)",
        lambda r: ["process", str(r / "specs" / FAILED / META)],
        (FAILED,),
        recover=_again_then_repair(["process", "{root}/specs/" + FAILED + "/" + META]),
    ),
    Workload(
        "scan --apply of three files (one group commit)",
        lambda r: ["scan", "--apply", str(r)],
        (VALID, PLANNED, FAILED),
        recover=_again_then_repair(["scan", "--apply", "{root}"]),
    ),
    Workload(
        "the daemon applying a burst of three files",
        lambda r: ["watch", str(r), "--log-format", "json"],
        (VALID, PLANNED, FAILED),
        # What the daemon does first when it starts again: settle what a crash left, then
        # apply every ready file (the same pipeline as scan --apply).
        recover=_again_then_repair(["scan", "--apply", "{root}"]),
        # Without the stuck run, which only the daemon records in errors.json.
        prepare=lambda r: (r / "specs" / STUCK / META).unlink(),
        daemon=True,
    ),
    Workload(
        "verify --repair of a lost update",
        lambda r: ["verify", "--repair", str(r)],
        prepare=_lose_an_update,
        recover=lambda r: [["verify", "--repair", str(r)]],
    ),
    Workload(
        "init",
        lambda r: ["init", "-y", str(r)],
        recover=lambda r: [["init", "-y", str(r)]],
    ),
]

TS = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)")
ERR_ID = re.compile(rb"err_\d+_\d+")
#: Lock files: their content is whoever last took them, and a stale one is harmless.
LOCKS = ("specs/.state.lock", "specs/.postflightd.pid")
LITTER = re.compile(r"\.(tmp|deleting)$")


def normal(data: bytes) -> bytes:
    """A file's bytes with timestamps and the ids made of them blanked."""
    return ERR_ID.sub(b"err_N", TS.sub(b"<ts>", data))


@dataclass(slots=True)
class Violation:
    workload: str
    label: str
    problem: str
    #: the state, as what it changed from the tree before the workload
    diff: list[str]


@dataclass(slots=True)
class Counts:
    workloads: int = 0
    calls: int = 0
    ops: int = 0
    generated: int = 0
    distinct: int = 0
    #: name, calls recorded, operations on the tracked files, states checked
    per_workload: list[tuple[str, int, int, int]] = field(default_factory=list)
    checked: int = 0
    violations: list[Violation] = field(default_factory=list)


def versions(rec: cs.Recording, before: cs.Tree) -> dict[str, set[bytes]]:
    """Each file's contents as each rename (or exchange) put one in place, and before."""
    disk = cs._Disk(rec)
    seen: dict[str, set[bytes]] = {}
    for path, data in before.items():
        if data is not None:
            seen.setdefault(path, set()).add(data)
    for op in rec.ops:
        disk.apply(op)
        if op.kind in ("mv", "xchg"):
            for p in (op.path2, op.path) if op.kind == "xchg" else (op.path2,):
                d = disk.data.get(disk.names.get(p, -1))
                if d is not None:
                    seen.setdefault(p, set()).add(bytes(d))
    return seen


def journal_rows(path: Path) -> list[tuple[str, str]]:
    """(kind, file) of every row; opening it is what the next postflightd would do first."""
    if not path.exists():
        return []
    conn = sqlite3.connect(path)
    try:
        return list(conn.execute("SELECT kind, file FROM observations"))
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return []  # created, its schema not yet committed: the next run writes it
        raise
    finally:
        conn.close()


def tree_diff(before: cs.Tree, state: cs.Tree) -> list[str]:
    out = []
    for path in sorted(set(before) | set(state)):
        a, b = before.get(path, b"<none>"), state.get(path, b"<none>")
        if a == b:
            continue
        if path not in state:
            out.append(f"- {path}")
        elif path not in before:
            out.append(f"+ {path} ({'dir' if b is None else f'{len(b)} bytes'})")
        else:
            sizes = f"{0 if a is None else len(a)} -> {0 if b is None else len(b)}"
            out.append(f"~ {path} ({sizes} bytes)")
    return out


def check_state(
    w: Workload,
    root: Path,
    journal: Path,
    state: cs.Tree,
    written: dict[str, set[bytes]],
    final: cs.Tree,
    capsys: pytest.CaptureFixture[str],
) -> list[str]:
    """What is wrong with one crash state, before and after recovery (empty: nothing)."""
    problems: list[str] = []
    specs = root / "specs"
    # Before recovery: whole files only.
    for name in ("state.json", "TODO.md", "errors.json"):
        p = str(specs / name)
        if p in state and state[p] is not None and state[p] not in written.get(p, set()):
            problems.append(f"crash state: {name} is not a version that was written (torn)")
    for p in (".gitignore", ".postflightd.toml", ".claude/settings.json"):
        q = str(root / p)
        if q in state and state[q] not in written.get(q, set()):
            problems.append(f"crash state: {p} is not a version that was written (torn)")
    try:
        rows = journal_rows(journal)
    except sqlite3.DatabaseError as exc:
        rows = []
        problems.append(f"crash state: the journal does not open: {exc}")
    state_now = state.get(str(specs / "state.json")) or b""
    final_state = json.loads(final[str(specs / "state.json")] or b"{}")
    for task in w.applies:
        meta = specs / task / META
        aside = any(
            os.path.dirname(p) == str(specs / task) and p.endswith(".deleting") for p in state
        )
        if str(meta) in state or aside:
            continue
        if ("postflighted", str(meta)) not in {(k, f) for k, f in rows} and not any(
            k == "postflighted" and f.endswith(f"{task}/{META}") for k, f in rows
        ):
            problems.append(f"crash state: {task}/{META} gone, its postflighted row not journaled")
        number = int(task.split("_")[0])
        try:
            now = json.loads(state_now)
        except ValueError:
            problems.append(f"crash state: {task}/{META} gone, state.json unreadable")
            continue
        entry = [e for e in now.get("active_projects", []) if e.get("project_number") == number]
        want = [
            e for e in final_state.get("active_projects", []) if e.get("project_number") == number
        ]
        if normal(json.dumps(entry).encode()) != normal(json.dumps(want).encode()):
            problems.append(f"crash state: {task}/{META} gone, its outcome not in state.json")
    # Recovery: what a user runs next.
    STATE_CACHE.clear()
    for argv in w.recover(root):
        code = main(argv)
        capsys.readouterr()
        if code not in (0, 1):
            problems.append(f"recovery: {' '.join(argv[:2])} exited {code}")
    after = cs.snapshot((str(root), str(journal.parent.parent)))
    for path, data in sorted(after.items()):
        rel = os.path.relpath(path, root)
        if path.startswith(str(journal.parent)) or rel in LOCKS:
            continue
        if LITTER.search(path):
            problems.append(f"after recovery: litter left: {rel}")
        elif path not in final:
            problems.append(f"after recovery: {rel} is there, not after the run without a crash")
        elif (data is None) != (final[path] is None) or (
            data is not None and normal(data) != normal(final[path] or b"")
        ):
            problems.append(f"after recovery: {rel} differs from the run without a crash")
    for path in final:
        rel = os.path.relpath(path, root)
        if not path.startswith(str(journal.parent)) and path not in after and rel not in LOCKS:
            problems.append(f"after recovery: {rel} is missing")
    conn = sqlite3.connect(journal)
    try:
        ok = conn.execute("PRAGMA integrity_check").fetchone()[0]
        rows = list(conn.execute("SELECT kind, file FROM observations"))
    except sqlite3.DatabaseError as exc:
        ok, rows = f"does not open: {exc}", []
    finally:
        conn.close()
    files = {f for k, f in rows if k == "postflighted"}
    if ok != "ok":
        problems.append(f"after recovery: journal integrity: {ok}")
    for task in w.applies:
        if not any(f.endswith(f"{task}/{META}") for f in files):
            problems.append(f"after recovery: {task}'s outcome is not in the journal")
    code = main(["verify", str(root)])
    out = capsys.readouterr()
    if code != 0:
        problems.append(f"after recovery: verify exited {code}: {out.out.strip()[:200]}")
    return problems


def explore(
    w: Workload,
    base: Path,
    capsys: pytest.CaptureFixture[str],
    counts: Counts,
    *,
    cap: int = STATES_PER_WORKLOAD,
    only: str = "",
) -> None:
    """Record ``w``, then check up to ``cap`` of its distinct crash states (those whose label
    contains ``only``), adding to ``counts``."""
    root = example(base / "project")
    journal = default_journal_path()
    if journal.parent.exists():
        shutil.rmtree(journal.parent)
    if not w.fresh_journal:
        # The journal exists before the workload, as it does after the first postflight.
        done = cli("verify", str(root), cwd=base)
        assert done.returncode == 0, done.stdout + done.stderr
    # Its directory's parent is there (the user's state directory), and is the root watched.
    journal.parent.parent.mkdir(parents=True, exist_ok=True)
    if w.prepare is not None:
        w.prepare(root)
    roots = (os.path.realpath(root), os.path.realpath(journal.parent.parent))
    before = cs.snapshot(roots)
    trace = base / "trace"
    argv = [sys.executable, "-m", "postflightd", *w.argv(root)]
    if w.daemon:
        run_daemon(argv, trace, base, [root / "specs" / t / META for t in w.applies])
    else:
        done = cs.run_traced(argv, trace, cwd=base)
        assert done.returncode in (0, 1), done.stdout + done.stderr
    final = cs.snapshot(roots)
    rec = cs.record(trace.read_text(encoding="utf-8"), roots, before, str(base))
    written = versions(rec, before)
    counts.workloads += 1
    counts.calls += rec.calls
    counts.ops += len(rec.ops)
    unique: dict[str, tuple[str, cs.Tree]] = {}
    for label, state in cs.crash_states(rec, SEED):
        if only not in label:
            continue
        counts.generated += 1
        unique.setdefault(cs.digest(state), (label, state))
    chosen = list(unique.values())
    counts.distinct += len(chosen)
    counts.per_workload.append((w.name, rec.calls, len(rec.ops), min(len(chosen), cap)))
    if len(chosen) > cap:
        chosen = random.Random(SEED).sample(chosen, cap)
    on_disk = final
    for label, state in chosen:
        cs.materialize(state, roots, on_disk)
        problems = check_state(w, root, journal, state, written, final, capsys)
        on_disk = cs.snapshot(roots)
        counts.checked += 1
        counts.violations.extend(
            Violation(w.name, label, problem, tree_diff(before, state)) for problem in problems
        )
    cs.materialize(final, roots, on_disk)


def run_daemon(argv: list[str], trace: Path, base: Path, metas: list[Path]) -> None:
    """The daemon under strace until every file in ``metas`` is applied, then SIGTERM."""
    log = base / "daemon.log"
    with log.open("wb") as err:
        tracer = subprocess.Popen(
            [*cs.strace_command(trace), *argv], stdout=subprocess.DEVNULL, stderr=err, cwd=base
        )
    try:

        def started() -> int | None:
            for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
                if line.startswith("{") and '"daemon_started"' in line:
                    return int(json.loads(line)["pid"])
            assert tracer.poll() is None, log.read_text(encoding="utf-8", errors="replace")
            return None

        pid = wait_until("the daemon to start", started, 120)
        wait_until("the burst applied", lambda: not any(m.exists() for m in metas), 120)
        os.kill(pid, signal.SIGTERM)
        assert tracer.wait(timeout=120) == 0, log.read_text(encoding="utf-8", errors="replace")
    finally:
        if tracer.poll() is None:
            tracer.kill()
            tracer.wait()


def report(counts: Counts) -> str:
    lines = [
        f"power loss: {counts.workloads} workloads, {counts.calls} calls recorded "
        f"({counts.ops} on the project and journal), {counts.generated} crash states built, "
        f"{counts.distinct} distinct, {counts.checked} checked, {len(counts.violations)} violations"
    ]
    lines.extend(
        f"  {name}: {calls} calls, {ops} operations, {checked} states"
        for name, calls, ops, checked in counts.per_workload
    )
    # Each problem once, shown by its smallest state.
    smallest: dict[tuple[str, str], Violation] = {}
    for v in counts.violations:
        key = (v.workload, v.problem)
        if key not in smallest or len(v.diff) < len(smallest[key].diff):
            smallest[key] = v
    for v in smallest.values():
        lines.append(f"- {v.workload}: {v.problem} [{v.label}]")
        lines.extend(f"    {d}" for d in v.diff)
    return "\n".join(lines)


@pytest.fixture
def strace(tmp_path: Path) -> None:
    require_strace(tmp_path)


def test_a_first_postflight_keeps_its_journal_through_a_power_loss(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], strace: None
) -> None:
    """The journal's directory, created by the first postflight, is durable before the
    metadata file is deleted: a power loss in the weak model keeps the deletion (a name
    change), and the new directory's name, never fsynced in its parent, may be lost with the
    journal in it."""
    counts = Counts()
    (first,) = [w for w in WORKLOADS if w.fresh_journal]
    explore(first, tmp_path / "w", capsys, counts, cap=10_000, only=":flushed")
    assert counts.checked > 10
    assert not counts.violations, report(counts)


def test_every_power_loss_state_is_recovered(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], strace: None
) -> None:
    counts = Counts()
    for n, w in enumerate(WORKLOADS):
        explore(w, tmp_path / f"w{n}", capsys, counts)
    text = report(counts)
    with capsys.disabled():
        print("\n" + text)
    assert counts.checked >= 1000, text
    assert not counts.violations, text
