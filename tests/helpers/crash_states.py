"""The crash states a power loss may leave, built from a workload's system calls (strace).

A workload (a real ``python -m postflightd ...``) runs under strace; its file-system calls on
the files under the tracked roots (a project, the journal's directory) are turned into a list
of operations on a small model of the tree: inodes with their bytes, names pointing at them.
Replaying a prefix of those operations on the tree as it was before, with the operations that
were not yet made durable kept, dropped, reordered or torn as a persistence model allows,
gives the trees the disk may hold after a power loss at that instant.

Two models (docs/safety.md, "Power loss"):

* ``weak`` (POSIX as written): a file's data is durable once that file was fsynced (or
  fdatasynced) after the write; a name (create, rename, unlink, mkdir) once its directory
  was fsynced after the change. Anything else may be missing: data writes after a file's last
  fsync are kept or lost block by block (4096 bytes, so a write may be torn), directory
  operations after their directory's last fsync are kept or lost one by one, and applied in
  program order or reversed between two barriers.
* ``ext4`` (ext4, ``data=ordered``): metadata is journaled in one ordered stream, so the tree
  is that of a prefix of the operations, at least up to the last fsync of anything (an fsync
  commits the whole journal); data is written before the metadata that exposes it, so only
  overwrites in place after that prefix may land, torn at block granularity.

The SQLite journal's own files are replayed the same way (its ``-shm`` file is memory it maps,
not data it writes: it is rebuilt from the ``-wal`` on open, so it is left out).
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

BLOCK = 4096

#: The calls recorded: every way these programs create, write, rename, delete and sync.
CALLS = (
    "open,openat,creat,close,dup,dup2,dup3,write,pwrite64,writev,pwritev,lseek,"
    "ftruncate,truncate,fsync,fdatasync,rename,renameat,renameat2,unlink,unlinkat,"
    "mkdir,mkdirat,rmdir,link,linkat,clone,clone3,fork,vfork"
)


def strace_command(trace: Path) -> list[str]:
    """strace recording every process and thread into one file, strings as hex, paths of fds."""
    return [
        "strace",
        "-f",
        "-qq",
        "-y",
        "-xx",
        "-s",
        "16777216",
        "-e",
        f"trace={CALLS}",
        "-o",
        str(trace),
    ]


# --- reading the trace -------------------------------------------------------------------

HEAD = re.compile(r"^(?P<pid>\d+)\s+(?P<rest>.*)$")
CALL = re.compile(r"^(?P<name>\w+)\((?P<args>.*)\)\s+=\s+(?P<ret>-?\d+)(?:<(?P<rpath>[^>]*)>)?")
UNFINISHED = " <unfinished ...>"
RESUMED = re.compile(r"^<\.\.\. (?P<name>\w+) resumed>(?P<tail>.*)$")
FD_ARG = re.compile(r"^(?P<fd>-?\d+|AT_FDCWD)(?:<(?P<path>[^>]*)>)?$")


def _hex(text: str) -> bytes:
    return bytes.fromhex(text.replace("\\x", ""))


def _string(arg: str) -> bytes:
    arg = arg.strip()
    if arg.endswith("..."):
        raise ValueError("a string strace cut short: raise -s")
    assert arg.startswith('"') and arg.endswith('"'), arg
    return _hex(arg[1:-1])


def _split(args: str) -> list[str]:
    out: list[str] = []
    depth = 0
    quoted = False
    start = 0
    for i, ch in enumerate(args):
        if ch == '"':
            quoted = not quoted
        elif quoted:
            continue
        elif ch in "[{(<":
            depth += 1
        elif ch in "]})>":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(args[start:i].strip())
            start = i + 1
    out.append(args[start:].strip())
    return out


@dataclass(frozen=True, slots=True)
class Syscall:
    pid: int
    name: str
    args: list[str]
    ret: int
    #: the path of a returned descriptor (open), hex-decoded
    ret_path: str | None


def read_trace(text: str) -> list[Syscall]:
    """The successful calls of a ``strace -f`` trace, in the order they completed."""
    pending: dict[int, str] = {}
    calls: list[Syscall] = []
    for line in text.splitlines():
        head = HEAD.match(line)
        if head is None:
            continue
        pid, rest = int(head["pid"]), head["rest"]
        if rest.endswith(UNFINISHED):
            pending[pid] = rest[: -len(UNFINISHED)]
            continue
        resumed = RESUMED.match(rest)
        if resumed is not None:
            rest = pending.pop(pid, resumed["name"] + "(") + resumed["tail"]
        m = CALL.match(rest)
        if m is None or int(m["ret"]) < 0:
            continue
        rpath = m["rpath"]
        calls.append(
            Syscall(
                pid,
                m["name"],
                _split(m["args"]),
                int(m["ret"]),
                _hex(rpath).decode("utf-8", "surrogateescape") if rpath else None,
            )
        )
    return calls


# --- the model of the tree ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Op:
    """One operation on the model. ``kind``: ``new`` (path, ino: a name for a new inode),
    ``mv`` (path to path2, replacing), ``xchg`` (path and path2 swapped), ``rm`` (path),
    ``w`` (ino, offset, data), ``t`` (ino, size), ``sync`` (ino: a file's data, a directory's
    names)."""

    kind: str
    path: str = ""
    path2: str = ""
    ino: int = 0
    offset: int = 0
    data: bytes = b""

    def dirs(self) -> tuple[str, ...]:
        if self.kind in ("mv", "xchg"):
            return (os.path.dirname(self.path), os.path.dirname(self.path2))
        return (os.path.dirname(self.path),)


#: A tree: each path under the roots, its bytes (None for a directory).
Tree = dict[str, bytes | None]


@dataclass(slots=True)
class Recording:
    """A workload's tree before it ran, the operations it made, how many calls were read."""

    roots: tuple[str, ...]
    #: path -> ino, ino -> bytes (None: a directory), before the workload
    names: dict[str, int]
    inodes: dict[int, bytes | None]
    ops: list[Op] = field(default_factory=list)
    calls: int = 0


def snapshot(roots: tuple[str, ...], skip: tuple[str, ...] = ("-shm",)) -> Tree:
    """The tree under ``roots`` as it is on disk now."""
    tree: Tree = {}
    for root in roots:
        if not os.path.isdir(root):
            continue
        tree[root] = None
        for dirpath, dirnames, filenames in os.walk(root):
            for d in dirnames:
                tree[os.path.join(dirpath, d)] = None
            for f in filenames:
                p = os.path.join(dirpath, f)
                if p.endswith(skip) or os.path.islink(p):
                    continue
                with open(p, "rb") as fh:
                    tree[p] = fh.read()
    return tree


def record(trace_text: str, roots: tuple[str, ...], before: Tree, cwd: str) -> Recording:
    """The operations of a trace on the files under ``roots``, the tree ``before`` it ran."""
    roots = tuple(os.path.realpath(r) for r in roots)
    names: dict[str, int] = {}
    inodes: dict[int, bytes | None] = {}
    for n, (path, data) in enumerate(sorted(before.items()), start=1):
        names[path] = n
        inodes[n] = data
    rec = Recording(roots, dict(names), dict(inodes))
    # The volatile view, in program order: what each name is now, each inode's size.
    live = dict(names)
    size = {ino: len(d) for ino, d in inodes.items() if d is not None}
    dirs = {ino for ino, d in inodes.items() if d is None}
    next_ino = len(names) + 1
    #: (pid, fd) -> [ino, offset, append]
    fds: dict[tuple[int, int], list[int]] = {}

    def tracked(path: str) -> bool:
        return path.startswith(roots) and not path.endswith("-shm")

    def resolve(call: Syscall, fd_arg: str, name_arg: str) -> str:
        name = _string(name_arg).decode("utf-8", "surrogateescape")
        if name.startswith("/"):
            return os.path.normpath(name)
        m = FD_ARG.match(fd_arg) if fd_arg else None
        base = cwd
        if m is not None and m["path"]:
            base = _hex(m["path"]).decode("utf-8", "surrogateescape")
        return os.path.normpath(os.path.join(base, name))

    def fd_of(call: Syscall, arg: str) -> list[int] | None:
        m = FD_ARG.match(arg)
        if m is None or m["fd"] == "AT_FDCWD":
            return None
        return fds.get((call.pid, int(m["fd"])))

    for call in read_trace(trace_text):
        rec.calls += 1
        name, a = call.name, call.args
        if name in ("open", "openat", "creat"):
            path = call.ret_path
            if path is None or not tracked(path):
                continue
            flags = "O_CREAT|O_WRONLY|O_TRUNC" if name == "creat" else " ".join(a[1:])
            ino = live.get(path)
            if ino is None:
                ino = next_ino
                next_ino += 1
                kind_dir = "O_DIRECTORY" in flags and "O_CREAT" not in flags
                if kind_dir:
                    continue
                live[path] = ino
                size[ino] = 0
                rec.ops.append(Op("new", path=path, ino=ino))
            elif "O_TRUNC" in flags and ino not in dirs and ("WR" in flags):
                if size.get(ino, 0):
                    rec.ops.append(Op("t", ino=ino, offset=0))
                size[ino] = 0
            fds[(call.pid, call.ret)] = [ino, 0, int("O_APPEND" in flags)]
        elif name == "close":
            m = FD_ARG.match(a[0])
            if m is not None and m["fd"] != "AT_FDCWD":
                fds.pop((call.pid, int(m["fd"])), None)
        elif name in ("clone", "clone3", "fork", "vfork"):
            # A child starts with its parent's descriptors, sharing each one's offset (a shell
            # opens a redirection, then forks the command that writes to it).
            for (pid, fd), f in list(fds.items()):
                if pid == call.pid:
                    fds[(call.ret, fd)] = f
        elif name in ("dup", "dup2", "dup3"):
            f = fd_of(call, a[0])
            if f is not None:
                fds[(call.pid, call.ret)] = f
        elif name in ("write", "pwrite64", "writev", "pwritev"):
            f = fd_of(call, a[0])
            if f is None or call.ret == 0:
                continue
            ino = f[0]
            if name.startswith("pwrite"):
                offset = int(a[-1].split()[0]) if name == "pwrite64" else int(a[-1])
            else:
                offset = size[ino] if f[2] else f[1]
            if name.endswith("v"):
                data = b"".join(_string(s) for s in re.findall(r'iov_base=("[^"]*")', a[1]))
            else:
                data = _string(a[1])
            data = data[: call.ret]
            rec.ops.append(Op("w", ino=ino, offset=offset, data=data))
            size[ino] = max(size[ino], offset + len(data))
            if not name.startswith("pwrite"):
                f[1] = offset + len(data)
        elif name == "lseek":
            f = fd_of(call, a[0])
            if f is not None:
                f[1] = call.ret
        elif name == "ftruncate":
            f = fd_of(call, a[0])
            if f is not None:
                rec.ops.append(Op("t", ino=f[0], offset=int(a[1])))
                size[f[0]] = int(a[1])
        elif name in ("fsync", "fdatasync"):
            f = fd_of(call, a[0])
            if f is not None:
                rec.ops.append(Op("sync", ino=f[0]))
            else:
                m = FD_ARG.match(a[0])
                path = _hex(m["path"]).decode() if m is not None and m["path"] else ""
                if path in live and tracked(path):
                    rec.ops.append(Op("sync", ino=live[path]))
        elif name in ("rename", "renameat", "renameat2"):
            if name == "rename":
                src, dst = resolve(call, "", a[0]), resolve(call, "", a[1])
            else:
                src, dst = resolve(call, a[0], a[1]), resolve(call, a[2], a[3])
            if not (tracked(src) or tracked(dst)):
                continue
            exchange = name == "renameat2" and "RENAME_EXCHANGE" in a[4]
            if exchange:
                live[src], live[dst] = live[dst], live[src]
                rec.ops.append(Op("xchg", path=src, path2=dst))
            else:
                live[dst] = live.pop(src)
                rec.ops.append(Op("mv", path=src, path2=dst))
        elif name in ("unlink", "unlinkat", "rmdir"):
            path = resolve(call, "", a[0]) if name != "unlinkat" else resolve(call, a[0], a[1])
            if tracked(path) and path in live:
                del live[path]
                rec.ops.append(Op("rm", path=path))
        elif name in ("mkdir", "mkdirat"):
            path = resolve(call, "", a[0]) if name == "mkdir" else resolve(call, a[0], a[1])
            if tracked(path):
                ino = next_ino
                next_ino += 1
                live[path] = ino
                dirs.add(ino)
                rec.ops.append(Op("new", path=path, ino=ino, data=b"d"))
        elif name in ("link", "linkat"):
            raise AssertionError(f"hard links are not modelled: {call}")
    return rec


# --- the crash states --------------------------------------------------------------------


class _Disk:
    """A tree being built: names to inodes, inodes' bytes."""

    def __init__(self, rec: Recording) -> None:
        self.names = dict(rec.names)
        self.data: dict[int, bytearray | None] = {
            ino: None if d is None else bytearray(d) for ino, d in rec.inodes.items()
        }

    def apply(self, op: Op, keep: float = 1.0, rng: random.Random | None = None) -> None:
        if op.kind == "new":
            self.names[op.path] = op.ino
            self.data.setdefault(op.ino, None if op.data == b"d" else bytearray())
        elif op.kind == "mv":
            if op.path in self.names:
                self.names[op.path2] = self.names.pop(op.path)
        elif op.kind == "xchg":
            if op.path in self.names and op.path2 in self.names:
                n = self.names
                n[op.path], n[op.path2] = n[op.path2], n[op.path]
        elif op.kind == "rm":
            self.names.pop(op.path, None)
        elif op.kind == "t":
            buf = self.data.setdefault(op.ino, bytearray())
            assert buf is not None
            del buf[op.offset :]
            buf.extend(b"\0" * (op.offset - len(buf)))
        elif op.kind == "w":
            buf = self.data.setdefault(op.ino, bytearray())
            assert buf is not None
            start = op.offset
            # Torn at block granularity: each block-aligned piece of the write lands or not.
            pos = start
            while pos < start + len(op.data):
                end = min((pos // BLOCK + 1) * BLOCK, start + len(op.data))
                if keep >= 1.0 or (rng is not None and rng.random() < keep):
                    if len(buf) < pos:
                        buf.extend(b"\0" * (pos - len(buf)))
                    buf[pos:end] = op.data[pos - start : end - start]
                pos = end

    def tree(self) -> Tree:
        out: Tree = {}
        for path, ino in self.names.items():
            d = self.data.get(ino)
            out[path] = None if d is None else bytes(d)
        # A name whose directory is not there is not there either.
        kept: Tree = {}
        for path in sorted(out, key=len):
            parent = os.path.dirname(path)
            if path in self.roots or (parent in kept and kept[parent] is None):
                kept[path] = out[path]
        return kept

    roots: tuple[str, ...] = ()


def _durable_points(rec: Recording, k: int) -> tuple[set[int], set[int]]:
    """Which of ``ops[:k]`` are durable at k: data ops (by index) and name ops (by index)."""
    ops = rec.ops[:k]
    data: set[int] = set()
    named: set[int] = set()
    synced_after: dict[int, int] = {}
    for i in range(len(ops) - 1, -1, -1):
        op = ops[i]
        if op.kind == "sync":
            synced_after.setdefault(op.ino, i)
    # The directory inode of each path as of the end (directories are never renamed here).
    live: dict[str, int] = dict(rec.names)
    ino_at: list[dict[str, int]] = []
    for op in ops:
        ino_at.append(dict(live) if op.kind in ("new", "mv", "xchg", "rm") else {})
        if op.kind == "new":
            live[op.path] = op.ino
        elif op.kind == "mv" and op.path in live:
            live[op.path2] = live.pop(op.path)
        elif op.kind == "xchg":
            live[op.path], live[op.path2] = live[op.path2], live[op.path]
        elif op.kind == "rm":
            live.pop(op.path, None)
    for i, op in enumerate(ops):
        if op.kind in ("w", "t"):
            if synced_after.get(op.ino, -1) > i:
                data.add(i)
        elif op.kind in ("new", "mv", "xchg", "rm"):
            parents = [live.get(d, ino_at[i].get(d, -1)) for d in op.dirs()]
            if all(synced_after.get(p, -1) > i for p in parents):
                named.add(i)
    return data, named


def weak_state(
    rec: Recording, k: int, keep: float, seed: int, reverse: bool, flushed: str = ""
) -> Tree:
    """A crash state of the weak model at cut k: durable ops applied, the rest each kept with
    probability ``keep`` (writes block by block), reversed between barriers if ``reverse``.
    ``flushed``: instead, every pending name operation in the directories under that root is
    kept and every other one lost (one root's directories written back, not the other's)."""
    rng = random.Random(seed)
    data, named = _durable_points(rec, k)
    disk = _Disk(rec)
    disk.roots = rec.roots
    ops = rec.ops[:k]
    epoch: list[Op] = []

    def flush() -> None:
        for op in reversed(epoch) if reverse else epoch:
            disk.apply(op)
        epoch.clear()

    for i, op in enumerate(ops):
        if op.kind == "sync":
            flush()
        elif op.kind in ("w", "t"):
            if i in data:
                disk.apply(op)
            elif op.kind == "w":
                disk.apply(op, keep, rng)
            elif rng.random() < keep:
                disk.apply(op)
        elif i in named:
            disk.apply(op)
        elif flushed:
            if all(d.startswith(flushed) for d in op.dirs()):
                epoch.append(op)
        elif rng.random() < keep:
            epoch.append(op)
    flush()
    return disk.tree()


def ext4_state(rec: Recording, k: int, j: int, seed: int) -> Tree:
    """A crash state of ext4 data=ordered: the operations up to j (at least up to the last
    fsync before k) all there; of the writes from j to k, overwrites in place torn by block."""
    rng = random.Random(seed)
    disk = _Disk(rec)
    disk.roots = rec.roots
    for op in rec.ops[:j]:
        disk.apply(op)
    for op in rec.ops[j:k]:
        if op.kind == "w":
            buf = disk.data.get(op.ino)
            if buf is None:
                continue
            inside = max(0, min(len(op.data), len(buf) - op.offset))
            if inside:
                disk.apply(Op("w", ino=op.ino, offset=op.offset, data=op.data[:inside]), 0.5, rng)
    return disk.tree()


def last_barrier(rec: Recording, k: int) -> int:
    for i in range(k - 1, -1, -1):
        if rec.ops[i].kind == "sync":
            return i + 1
    return 0


def crash_states(rec: Recording, seed: int, per_cut: int = 5) -> Iterator[tuple[str, Tree]]:
    """Every cut of the workload, each with the states both models allow there: a label
    (``model@cut...``) and the tree. Deterministic for a fixed seed; the caller drops
    duplicates."""
    rng = random.Random(seed)
    n = len(rec.ops)
    for k in range(n + 1):
        yield f"weak@{k}:none", weak_state(rec, k, 0.0, 0, False)
        yield f"weak@{k}:all", weak_state(rec, k, 1.0, 0, False)
        for r in range(per_cut):
            s = rng.randrange(1 << 30)
            yield f"weak@{k}:half:{s}", weak_state(rec, k, 0.5, s, r % 2 == 1)
        if len(rec.roots) > 1:
            for n, root in enumerate(rec.roots):
                yield f"weak@{k}:flushed{n}", weak_state(rec, k, 1.0, 0, False, root)
        lo = last_barrier(rec, k)
        for j in sorted({lo, k, rng.randint(lo, k)}):
            s = rng.randrange(1 << 30)
            yield f"ext4@{k}:prefix{j}:{s}", ext4_state(rec, k, j, s)


def digest(tree: Tree) -> str:
    h = hashlib.sha256()
    for path in sorted(tree):
        data = tree[path]
        h.update(path.encode("utf-8", "surrogateescape") + b"\0")
        h.update(b"D" if data is None else hashlib.sha256(data).digest())
    return h.hexdigest()


def materialize(tree: Tree, roots: tuple[str, ...], current: Tree | None = None) -> None:
    """Put ``tree`` on disk in place of whatever is under ``roots``. ``current``: what is there
    now (a snapshot), so that only what differs is written."""
    if current is None:
        for root in roots:
            if os.path.lexists(root):
                shutil.rmtree(root)
        current = {}
    else:
        for root in roots:
            # Not in a snapshot: SQLite's shared memory, rebuilt from the -wal on open.
            for dirpath, _dirs, files in os.walk(root):
                for f in files:
                    if f.endswith("-shm"):
                        os.unlink(os.path.join(dirpath, f))
    for path in sorted(current, key=lambda p: -p.count("/")):
        if path not in tree or (tree[path] is None) != (current[path] is None):
            if current[path] is None:
                shutil.rmtree(path)
            else:
                os.unlink(path)
            current = {p: d for p, d in current.items() if p != path}
    for path in sorted(tree, key=lambda p: (p.count("/"), p)):
        data = tree[path]
        if data is None:
            os.makedirs(path, exist_ok=True)
        elif current.get(path) != data:
            with open(path, "wb") as fh:
                fh.write(data)


def run_traced(
    argv: list[str], trace: Path, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*strace_command(trace), *argv],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        cwd=cwd,
        env=env,
    )
