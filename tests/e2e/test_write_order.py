"""The order of durable writes, read from the system calls themselves (strace), not believed.

`process`, `scan --apply` and the daemon's postflight are recorded with strace, and the
trace of the thread that writes is checked:

* every file put in place (state.json, TODO.md) was fsynced under its temporary name before
  the rename (or exchange) that put it there, and its directory fsynced after;
* the journal's rows were made durable (an fsync or fdatasync of the journal after its last
  write) before state.json was put in place: the journal always holds what state.json shows;
* state.json and TODO.md were in place, their directory fsynced, before the metadata file was
  renamed aside for deletion.

Skipped where strace is not installed or cannot trace (a container without ptrace);
``.ci/run`` installs it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers.documents import researched_doc
from helpers.needs import require_strace
from helpers.project import meta_path, project, write_meta
from helpers.waiting import wait_until
from postflightd.journal.database import default_journal_path

pytestmark = pytest.mark.slow

CALLS = "openat,write,pwrite64,fsync,fdatasync,rename,renameat,renameat2,unlink,unlinkat"
#: ``name(args) = result``; with -y a descriptor reads ``5</path>``.
LINE = re.compile(r"^(?P<call>\w+)\((?P<args>.*)\)\s+=\s+(?P<result>-?\d+)")
FD = re.compile(r"^\d+<(?P<path>[^>]*)>")
RENAME_AT = re.compile(
    r'^\d+<(?P<old_dir>[^>]*)>, "(?P<old>[^"]*)", \d+<(?P<new_dir>[^>]*)>, "(?P<new>[^"]*)"'
)
RENAME = re.compile(r'^"(?P<old>[^"]*)", "(?P<new>[^"]*)"')


@pytest.fixture
def strace(tmp_path: Path) -> list[str]:
    require_strace(tmp_path)
    return ["strace", "-ff", "-y", "-s", "0", "-e", f"trace={CALLS}", "-o", str(tmp_path / "tr")]


@dataclass(frozen=True, slots=True)
class Call:
    index: int
    name: str
    #: the file a descriptor call acts on (fsync, write), or a rename's target
    path: str
    #: a rename's source
    source: str = ""


def parse(text: str) -> list[Call]:
    """The successful calls of one thread's trace, in order, with the paths they act on."""
    calls: list[Call] = []
    for line in text.splitlines():
        m = LINE.match(line)
        if m is None or int(m["result"]) < 0:
            continue
        name, args = m["call"], m["args"]
        if name in ("renameat", "renameat2"):
            r = RENAME_AT.match(args)
            if r is None:
                continue
            source = os.path.join(r["old_dir"], r["old"])
            calls.append(Call(len(calls), name, os.path.join(r["new_dir"], r["new"]), source))
        elif name == "rename":
            r = RENAME.match(args)
            if r is not None:
                calls.append(Call(len(calls), name, r["new"], r["old"]))
        elif (d := FD.match(args)) is not None:
            calls.append(Call(len(calls), name, d["path"]))
    return calls


def writer_trace(tmp_path: Path, state: Path) -> list[Call]:
    """The trace of the one thread that put state.json in place."""
    for file in sorted(tmp_path.glob("tr.*")):
        calls = parse(file.read_text(encoding="utf-8", errors="replace"))
        if any(c.name.startswith("rename") and c.path == str(state) for c in calls):
            return calls
    pytest.fail("no traced thread put state.json in place")


def check_order(calls: list[Call], specs: Path, meta: Path) -> None:
    syncs = ("fsync", "fdatasync")
    journal = str(default_journal_path())

    def placed(name: str) -> Call:
        found = [c for c in calls if c.name.startswith("rename") and c.path == str(specs / name)]
        assert len(found) == 1, f"{name} put in place {len(found)} times"
        return found[0]

    state, todo = placed("state.json"), placed("TODO.md")
    for put in (state, todo):
        # The temporary file fsynced before it was put in place...
        assert any(c.name in syncs and c.path == put.source for c in calls[: put.index]), (
            f"{put.source} was not fsynced before {put.name}"
        )
        # ...and the directory after.
        assert any(c.name in syncs and c.path == str(specs) for c in calls[put.index :]), (
            f"{specs} was not fsynced after {put.path} was put in place"
        )
    # The journal's rows durable before state.json shows them.
    before = calls[: state.index]
    writes = [c for c in before if c.name in ("write", "pwrite64") and c.path.startswith(journal)]
    assert writes, "no journal row was written before state.json"
    assert any(
        c.name in syncs and c.path.startswith(journal) for c in before[writes[-1].index :]
    ), "the journal was not synced between its last write and state.json's rename"
    # state.json and TODO.md in place, and their directory synced, before the deletion.
    (aside,) = [c for c in calls if c.name.startswith("rename") and c.source == str(meta)]
    assert state.index < todo.index < aside.index
    assert any(c.name in syncs and c.path == str(specs) for c in calls[todo.index : aside.index]), (
        "the specs directory was not synced before the metadata file was deleted"
    )


def _project(tmp_path: Path, count: int) -> tuple[Path, list[Path]]:
    root = project(tmp_path / "p", count)
    metas = [
        write_meta(root, f"{n}_task{n}", researched_doc(f"{n}_task{n}"))
        for n in range(1, count + 1)
    ]
    return root, metas


def test_process_writes_in_a_durable_order(tmp_path: Path, strace: list[str]) -> None:
    root, (meta,) = _project(tmp_path, 1)
    done = subprocess.run(
        [*strace, sys.executable, "-m", "postflightd", "process", str(meta)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    specs = root / "specs"
    check_order(writer_trace(tmp_path, specs / "state.json"), specs, meta)


def test_scan_apply_writes_in_a_durable_order(tmp_path: Path, strace: list[str]) -> None:
    root, metas = _project(tmp_path, 3)
    done = subprocess.run(
        [*strace, sys.executable, "-m", "postflightd", "scan", "--apply", str(root)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    specs = root / "specs"
    calls = writer_trace(tmp_path, specs / "state.json")
    # One group commit for the three: each file's deletion comes after both writes.
    for meta in metas:
        check_order(calls, specs, meta)


def test_the_daemon_writes_in_a_durable_order(tmp_path: Path, strace: list[str]) -> None:
    root = project(tmp_path / "p", 1)
    log = tmp_path / "daemon.log"
    with log.open("wb") as err:
        tracer = subprocess.Popen(
            [
                *strace,
                sys.executable,
                "-m",
                "postflightd",
                "watch",
                str(root),
                "--log-format",
                "json",
            ],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:

        def started() -> dict[str, object] | None:
            for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
                if line.startswith("{") and '"daemon_started"' in line:
                    event: dict[str, object] = json.loads(line)
                    return event
            assert tracer.poll() is None, log.read_text(encoding="utf-8", errors="replace")
            return None

        pid = int(str(wait_until("the daemon to start", started, 60)["pid"]))
        meta = write_meta(root, "1_task1", researched_doc("1_task1"))
        wait_until("the file applied and deleted", lambda: not meta.exists(), 60)
        os.kill(pid, signal.SIGTERM)
        assert tracer.wait(timeout=60) == 0
    finally:
        if tracer.poll() is None:
            tracer.kill()
            tracer.wait()
    specs = root / "specs"
    check_order(writer_trace(tmp_path, specs / "state.json"), specs, meta_path(root, 1))
