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
  the journal passes SQLite's integrity check and holds every outcome; ``verify`` is clean;
* with a writer that ignores the lock replacing state.json during the run (``WRITER``, traced
  with it): every version postflightd puts in place is its outcome on top of one that stood
  there, and no fsync of the run finds the writer's counter gone back; in each state an update
  of the writer's that was durable is in state.json, and recovery keeps the counter the crash
  left, with the outcome applied. What the writer could lose alone (its renames not yet
  durable, its data never fsynced: state.json empty, which postflightd refuses) is fair.

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
from postflightd.fs.atomic import TEMP_RE
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
    #: a writer that ignores the lock replaces state.json in a loop while the command runs
    #: (``WRITER``, traced with it)
    writer: bool = False


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
        "process a valid file, a writer that ignores the lock replacing state.json meanwhile",
        lambda r: ["process", str(r / "specs" / VALID / META)],
        (VALID,),
        recover=_again_then_repair(["process", "{root}/specs/" + VALID + "/" + META]),
        writer=True,
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

#: The command in the background and, while it runs, a writer that ignores the lock (as a user's
#: `jq` one-liner does: no lock, no fsync) replacing state.json, its counter ``x`` one more
#: each time. ``$1``: the project, ``$2``: the Python running postflightd, then its arguments.
WRITER = """
state="$1/specs/state.json"
python="$2"
shift 2
"$python" -m postflightd "$@" &
pf=$!
n=0
while kill -0 $pf 2>/dev/null && [ $n -lt 200 ]; do
  jq '.x += 1' "$state" > "$state.w" && mv "$state.w" "$state"
  n=$((n + 1))
done
wait $pf
"""
#: The writer's temporary file (its own litter, not postflightd's).
WRITER_TEMP = "state.json.w"
#: How many times the writer workload is recorded, at most, until the trace shows the writer's
#: rename landing between postflightd's read of state.json and its exchange.
WRITER_TRIES = 12

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
    #: states whose state.json is the writer's own file with its unsynced data lost
    writer_lost: int = 0
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


def _without(data: bytes, task: str) -> object:
    """state.json parsed, the entry of ``task`` (if one is named) and the writer's counter
    ``x`` left out, timestamps blanked: what a postflight of ``task`` must keep of the version
    it read."""
    doc = json.loads(normal(data))
    if task:
        number = int(task.split("_", maxsplit=1)[0])
        doc["active_projects"] = [
            e for e in doc.get("active_projects", []) if e.get("project_number") != number
        ]
    doc.pop("x", None)
    return doc


def _counter(data: bytes | None) -> int | None:
    """The writer's counter in a version of state.json (None: none, or not JSON)."""
    try:
        doc = json.loads(data or b"")
    except ValueError:
        return None
    x = doc.get("x") if isinstance(doc, dict) else None
    return x if isinstance(x, int) else None


@dataclass(slots=True)
class WriterRun:
    """What a recording of the writer workload says about the writer's versions of state.json
    and postflightd's."""

    #: each content a writer's file may have under state.json after a power loss: the writer
    #: never fsyncs, so its data may be missing (the file empty) or torn by block
    torn: set[bytes] = field(default_factory=set)
    #: every content the writer renamed into place
    theirs: set[bytes] = field(default_factory=set)
    #: (index of the operation, counter) of each rename of the writer's into state.json
    renames: list[tuple[int, int]] = field(default_factory=list)
    #: a version of postflightd's that is not its outcome on top of one that stood there
    problems: list[str] = field(default_factory=list)


def writer_run(rec: cs.Recording, state_path: str, task: str) -> WriterRun:
    out = WriterRun()
    disk = cs._Disk(rec)
    temp = os.path.join(os.path.dirname(state_path), WRITER_TEMP)
    writes: dict[int, list[cs.Op]] = {}
    mine: set[int] = set()
    stood = {b for b in [rec.inodes.get(rec.names.get(state_path, -1))] if b is not None}
    landed = 0
    for i, op in enumerate(rec.ops):
        disk.apply(op)
        if op.kind == "sync" and landed:
            now = _counter(bytes(disk.data.get(disk.names.get(state_path, -1)) or b""))
            if (now or 0) < landed and not out.problems:
                out.problems.append(
                    f"recording: at operation {i} (an fsync) state.json has x={now}, the writer "
                    f"had put x={landed} in place before: its update lost"
                )
        if op.kind == "new" and op.path == temp:
            writes[op.ino] = []
        elif op.kind == "new" and TEMP_RE.fullmatch(os.path.basename(op.path)):
            mine.add(op.ino)
        elif op.kind == "w" and op.ino in writes:
            writes[op.ino].append(op)
        elif op.kind in ("mv", "xchg") and state_path in (op.path, op.path2):
            ino = disk.names.get(state_path, -1)
            data = bytes(disk.data.get(ino) or b"")
            if ino in writes:
                out.theirs.add(data)
                stood.add(data)
                out.renames.append((i, _counter(data) or 0))
                landed = max(landed, _counter(data) or 0)
            elif ino in mine and not any(_without(data, task) == _without(v, task) for v in stood):
                out.problems.append(
                    f"recording: postflightd's state.json at operation {i} is not its outcome "
                    "on top of a version that stood there"
                )
    for ops in writes.values():
        pieces = [
            (op, pos, min((pos // cs.BLOCK + 1) * cs.BLOCK, op.offset + len(op.data)))
            for op in ops
            for pos in sorted(
                {op.offset}
                | set(
                    range(
                        (op.offset // cs.BLOCK + 1) * cs.BLOCK, op.offset + len(op.data), cs.BLOCK
                    )
                )
            )
        ]
        for mask in range(1 << min(len(pieces), 10)):
            buf = bytearray()
            for n, (op, start, end) in enumerate(pieces):
                if n >= 10 or mask >> n & 1:
                    buf.extend(b"\0" * max(0, start - len(buf)))
                    buf[start:end] = op.data[start - op.offset : end - op.offset]
            out.torn.add(bytes(buf))
    return out


def raced(trace_text: str, state_path: str) -> bool:
    """Whether the writer's rename landed between a read of state.json by postflightd and its
    next step on its temporary file (the exchange, or the temporary file deleted to read
    again): the path that re-reads and re-applies, in the trace at least once."""
    calls = cs.read_trace(trace_text)
    ours = {c.pid for c in calls if c.name == "renameat2" and "RENAME_EXCHANGE" in c.args[-1]}
    reading = False
    landed = False
    for c in calls:
        if c.pid in ours:
            if c.name in ("open", "openat") and c.ret_path == state_path:
                reading, landed = True, False
            elif c.name in ("renameat2", "unlinkat") and TEMP_RE.fullmatch(
                cs._string(c.args[1]).decode("utf-8", "surrogateescape")
            ):
                if reading and landed:
                    return True
                reading = False
        elif c.name in ("rename", "renameat", "renameat2"):
            dst = c.args[1] if c.name == "rename" else c.args[3]
            if cs._string(dst).decode("utf-8", "surrogateescape").endswith("state.json"):
                landed = reading
    return False


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
    their: WriterRun | None = None,
) -> list[str]:
    """What is wrong with one crash state, before and after recovery (empty: nothing).
    ``their``: the writer's versions of state.json, in the writer workload (state.json itself
    is then checked by ``check_writer``)."""
    problems: list[str] = []
    specs = root / "specs"
    sp = str(specs / "state.json")
    # The writer's own loss: its file in place, its data never fsynced and gone.
    lost = (
        their is not None
        and state.get(sp) in their.torn
        and state.get(sp) not in written.get(sp, set())
    )
    # Before recovery: whole files only.
    for name in ("state.json", "TODO.md", "errors.json"):
        p = str(specs / name)
        if p == sp and lost:
            continue
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
        if their is not None and (lost or state_now in their.theirs):
            # A writer's version: one read before the postflight and put back after it loses
            # the outcome as it would without a power loss; verify --repair heals it (checked
            # after recovery).
            continue
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
        if code not in (0, 1) and not lost:
            problems.append(f"recovery: {' '.join(argv[:2])} exited {code}")
    if lost:
        # state.json as the writer left it (empty or torn): postflightd refuses it, with a
        # message, and writes nothing; mending it is the writer's business.
        return problems
    after = cs.snapshot((str(root), str(journal.parent.parent)))
    for path, data in sorted(after.items()):
        rel = os.path.relpath(path, root)
        if path.startswith(str(journal.parent)) or rel in LOCKS:
            continue
        if their is not None and path in (sp, str(specs / WRITER_TEMP)):
            continue  # state.json: check_writer; the writer's temporary file: its own litter
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


def check_writer(
    rec: cs.Recording,
    label: str,
    state: cs.Tree,
    state_path: str,
    their: WriterRun,
    final: cs.Tree,
) -> list[str]:
    """What is wrong with state.json in one crash state of the writer workload, and after its
    recovery. Fair to lose: what the writer itself could (its renames not yet durable, its data
    never fsynced). Never: an update of the writer's made durable (by the fsync of the
    directory after an exchange) missing from the crash state, a counter recovery changed, or
    state.json after recovery other than the run without a crash's, the counter aside."""
    crash = state.get(state_path)
    if crash in their.torn and crash not in their.theirs:
        return []  # the writer's own file, its unsynced data lost (check_state checked the rest)
    problems: list[str] = []
    cut = int(re.search(r"@(\d+)", label)[1])  # type: ignore[index]
    _data, named = cs._durable_points(rec, cut)
    durable = [x for i, x in their.renames if i in named]
    x_crash = _counter(crash)
    if durable and (x_crash or 0) < max(durable):
        problems.append(
            f"crash state: the writer's update x={max(durable)} was durable, state.json has "
            f"x={x_crash}"
        )
    after = Path(state_path).read_bytes() if os.path.exists(state_path) else b""
    if _counter(after) != x_crash:
        problems.append(
            f"after recovery: the writer's counter went from x={x_crash} to x={_counter(after)}"
        )
    want = final[state_path] or b""
    try:
        same = _without(after, "") == _without(want, "")
    except ValueError:
        same = False
    if not same:
        problems.append("after recovery: state.json differs from the run without a crash")
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
    if w.writer and shutil.which("jq") is None:
        counts.per_workload.append((f"{w.name} (skipped: no jq)", 0, 0, 0))
        return
    tries = 0
    for _ in range(WRITER_TRIES if w.writer else 1):
        tries += 1
        root, journal, roots, before, trace = _record(w, base)
        state_path = os.path.join(roots[0], "specs", "state.json")
        if not w.writer or raced(trace.read_text(encoding="utf-8"), state_path):
            break
    else:
        pytest.fail(f"{w.name}: the writer never landed between a read and the exchange")
    if w.writer:
        # What the run without a crash leaves once settled: the writer may have put back a
        # version read before the postflight (a lost update, as without any crash), which
        # verify --repair heals.
        done = cli("verify", "--repair", str(root), cwd=base)
        assert done.returncode == 0, done.stdout + done.stderr
    final = cs.snapshot(roots)
    rec = cs.record(trace.read_text(encoding="utf-8"), roots, before, str(base))
    written = versions(rec, before)
    their: WriterRun | None = None
    if w.writer:
        their = writer_run(rec, state_path, VALID)
        assert their.renames, "the writer's renames are not in the recording"
        assert _counter(final[state_path]) == their.renames[-1][1], "the writer's last update"
        counts.violations.extend(Violation(w.name, "recording", p, []) for p in their.problems)
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
    name = f"{w.name} (recorded {tries} times)" if w.writer else w.name
    counts.per_workload.append((name, rec.calls, len(rec.ops), min(len(chosen), cap)))
    if len(chosen) > cap:
        chosen = random.Random(SEED).sample(chosen, cap)
    on_disk = final
    for label, state in chosen:
        cs.materialize(state, roots, on_disk)
        problems = check_state(w, root, journal, state, written, final, capsys, their)
        if their is not None:
            problems += check_writer(rec, label, state, state_path, their, final)
        on_disk = cs.snapshot(roots)
        counts.checked += 1
        if their is not None and state.get(state_path) in their.torn - written[state_path]:
            counts.writer_lost += 1
        counts.violations.extend(
            Violation(w.name, label, problem, tree_diff(before, state)) for problem in problems
        )
    cs.materialize(final, roots, on_disk)


def _record(w: Workload, base: Path) -> tuple[Path, Path, tuple[str, str], cs.Tree, Path]:
    """``w`` run once under strace in a fresh copy of the example: the project, the journal,
    the roots traced, the tree before, the trace."""
    if base.exists():
        shutil.rmtree(base)
    base.mkdir(parents=True)
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
    elif w.writer:
        script = ["sh", "-c", WRITER, "sh", roots[0], sys.executable, *w.argv(root)]
        done = cs.run_traced(script, trace, cwd=base)
        assert done.returncode == 0, done.stdout + done.stderr
    else:
        done = cs.run_traced(argv, trace, cwd=base)
        assert done.returncode in (0, 1), done.stdout + done.stderr
    return root, journal, roots, before, trace


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
    if counts.writer_lost:
        lines.append(f"  ({counts.writer_lost} with state.json the writer's, its data lost)")
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
