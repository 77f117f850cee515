"""The project tree is not trusted. Links, FIFOs and a project's own configuration
planted by an agent, through the real CLI and the real daemon, in subprocesses.

Every test keeps an "outside" directory next to the project, with files whose content would
be applied (or that must not be written, truncated or created), and checks that nothing in it
was read into the project, changed, deleted or created. Every subprocess has a timeout, so a
command that hangs on a FIFO fails its test instead of the suite.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from helpers.documents import researched_doc
from helpers.project import project, user_config, write_artifact
from helpers.waiting import wait_until

#: Real daemons and console-script runs in bulk: `pytest -m "not slow"` leaves them out.
pytestmark = pytest.mark.slow

META = ".return-meta.json"
#: A word only the outside files hold: it must never reach the project or the journal.
MARK = "outside-marker"
TIMEOUT_S = 60.0


# --- helpers ----------------------------------------------------------------------------------


def cli(*args: object, stdin: str | None = None, cwd: Path | None = None) -> Any:
    """Run ``postflightd ARGS`` as a user would; a hang past TIMEOUT_S fails the test."""
    return subprocess.run(
        [sys.executable, "-m", "postflightd", *map(str, args)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
        cwd=cwd,
    )


def hook(root: Path) -> Any:
    return cli(
        "hook",
        "claude",
        stdin=json.dumps({"cwd": str(root), "hook_event_name": "Stop", "stop_hook_active": False}),
    )


def make_root(root: Path, tasks: int = 2) -> Path:
    """Tasks 1..tasks (``{n}_task{n}``), TODO.md, the first three's reports, and the marker's
    artifact."""
    project(root, tasks, artifacts=range(1, 4))
    # An artifact inside the root that only an outside file lists: an outside file read by
    # mistake validates, and is applied, so the test can see it.
    write_artifact(root, f"specs/evidence/{MARK}.md", "x\n")
    return root


def final_text(n: int, *, outside: bool = False) -> str:
    doc = researched_doc(f"{n}_task{n}")
    if outside:
        doc["artifacts"] = [
            {"type": "report", "path": f"specs/evidence/{MARK}.md", "summary": MARK}
        ]
        doc["next_steps"] = MARK
    return json.dumps(doc)


def failed_text(n: int) -> str:
    doc = researched_doc(f"{n}_task{n}")
    doc["status"] = "failed"
    doc["artifacts"] = []
    doc["errors"] = [
        {"type": "execution", "message": "it broke", "recoverable": True, "recommendation": "x"}
    ]
    return json.dumps(doc)


def write_meta(root: Path, n: int, text: str) -> Path:
    path = root / "specs" / f"{n}_task{n}" / META
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def outside_task(outside: Path, n: int = 1) -> Path:
    """``outside/{n}_task{n}/.return-meta.json``, valid for task n of the project."""
    task = outside / f"{n}_task{n}"
    task.mkdir(parents=True)
    (task / META).write_text(final_text(n, outside=True), encoding="utf-8")
    return task


def tree_of(directory: Path) -> dict[str, tuple[bytes | str, int]]:
    """Every name under ``directory`` with its content (or link target) and mtime."""
    out: dict[str, tuple[bytes | str, int]] = {}
    for dirpath, dirnames, filenames in os.walk(directory):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = path.lstat()
            if path.is_symlink():
                out[str(path)] = (os.readlink(path), st.st_mtime_ns)
            elif path.is_file():
                out[str(path)] = (path.read_bytes(), st.st_mtime_ns)
            else:
                out[str(path)] = ("", 0)
    return out


def project_text(root: Path) -> str:
    specs = root / "specs"
    return "".join(
        p.read_text("utf-8", errors="replace")
        for p in (specs / "state.json", specs / "TODO.md", specs / "errors.json")
        if p.is_file() and not p.is_symlink()
    )


def journal_mentions(word: str) -> bool:
    path = Path(os.environ["XDG_STATE_HOME"]) / "postflightd" / "journal.sqlite3"
    if not path.exists():
        return False
    with closing(sqlite3.connect(path)) as db:
        rows = db.execute("SELECT * FROM observations").fetchall()
    return any(word in str(row) for row in rows)


def task_status(root: Path, n: int) -> str | None:
    state = json.loads((root / "specs" / "state.json").read_text("utf-8"))
    return next((t["status"] for t in state["active_projects"] if t["project_number"] == n), None)


class Daemon:
    def __init__(self, proc: subprocess.Popen[bytes], log: Path) -> None:
        self.proc, self.log = proc, log

    def text(self) -> str:
        return self.log.read_text("utf-8", errors="replace")

    def events(self, name: str) -> list[dict[str, Any]]:
        out = []
        for line in self.text().splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and event.get("event") == name:
                out.append(event)
        return out

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(30)


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Callable[..., Daemon]]:
    """Start ``postflightd watch``; every daemon is killed at the end whatever happens."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(root: Path, *, ready: bool = True) -> Daemon:
        log = tmp_path / f"daemon-{len(procs)}.log"
        with log.open("wb") as fh:
            proc = subprocess.Popen(
                [sys.executable, "-m", "postflightd", "watch", str(root), "--log-format", "json"],
                stdout=subprocess.DEVNULL,
                stderr=fh,
            )
        procs.append(proc)
        d = Daemon(proc, log)
        if ready:
            wait_until("the daemon to start", lambda: d.events("daemon_started") or proc.poll())
            assert proc.poll() is None, d.text()
        return d

    try:
        yield start
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)


# --- a symlinked task directory ---------------------------------------------------------------


@pytest.mark.parametrize("entry", ["process", "scan --apply", "hook", "watch"])
def test_a_symlinked_task_directory_is_never_followed(
    tmp_path: Path, entry: str, daemon: Callable[..., Daemon]
) -> None:
    """An outside .return-meta.json behind a task-directory link: not read, applied, deleted."""
    root = make_root(tmp_path / "proj")
    outside = tmp_path / "outside"
    (root / "specs" / "1_task1").rename(tmp_path / "aside")
    (root / "specs" / "1_task1").symlink_to(outside_task(outside), target_is_directory=True)
    write_meta(root, 2, final_text(2))  # a good file beside it is still applied
    before = tree_of(outside)
    if entry == "process":
        out = cli("process", root / "specs" / "1_task1" / META)
        assert out.returncode == 1, out.stdout + out.stderr
        assert "symbolic link" in out.stdout
        cli("process", root / "specs" / "2_task2" / META)
    elif entry == "scan --apply":
        out = cli("scan", "--apply", root)
        assert out.returncode == 1, out.stdout + out.stderr
    elif entry == "hook":
        out = hook(root)
        assert out.returncode != 70, out.stderr
    else:
        d = daemon(root)
        wait_until("task 2 applied", lambda: task_status(root, 2) == "researched")
        assert d.stop() == 0
    assert tree_of(outside) == before
    assert task_status(root, 1) == "researching"
    assert task_status(root, 2) == "researched"
    assert MARK not in project_text(root)
    assert not journal_mentions(MARK)


@pytest.mark.timeout(300)  # a storm of swaps keeps the daemon busy: slow on a loaded machine
def test_the_race_a_task_directory_swapped_for_a_link_while_the_daemon_runs(
    tmp_path: Path, daemon: Callable[..., Daemon]
) -> None:
    """200 times: agents write final files into 20 real task directories, which are then
    swapped for links to outside ones (holding files that would be applied) and back, five
    times, while the daemon applies: no outside file is ever read (applied), changed or
    deleted.

    Twenty directories at once, with files of 30 kB: the daemon checks a batch, then reads its
    files one after the other, so the later ones are read milliseconds after their directory
    was checked (the window the fix must close).
    """
    racing = range(1, 21)
    root = make_root(tmp_path / "proj", tasks=400)  # a larger state.json: a wider window
    for n in racing:
        (root / "specs" / f"{n}_task{n}" / "reports").mkdir(parents=True, exist_ok=True)
        (root / "specs" / f"{n}_task{n}" / "reports" / "research-001.md").write_text("r\n")
    user_config("[watch]\nrescan_interval_s = 0.5\n")
    outside = tmp_path / "outside"
    targets = {n: outside_task(outside, n) for n in racing}
    before = tree_of(outside)
    specs = root / "specs"
    # 30 kB of next_steps: each file takes the daemon a fraction of a millisecond more to read.
    padded = {
        n: json.dumps({**json.loads(final_text(n)), "next_steps": "x" * 30_000}) for n in racing
    }
    d = daemon(root)
    rng = random.Random(9)
    for i in range(200):
        for n in racing:
            real = specs / f"{n}_task{n}"
            staged = real / f".meta.{i}.tmp"
            staged.write_text(padded[n], encoding="utf-8")
            staged.rename(real / META)
        # A few quick swaps while the daemon works through the batch it was woken for.
        for _ in range(5):
            time.sleep(rng.uniform(0, 0.004))
            for n in racing:
                real = specs / f"{n}_task{n}"
                real.rename(specs / f".aside{n}")
                real.symlink_to(targets[n], target_is_directory=True)
            time.sleep(rng.uniform(0, 0.004))
            for n in racing:
                real = specs / f"{n}_task{n}"
                real.unlink()
                (specs / f".aside{n}").rename(real)
    # The real directories' last files are applied once they stay put.
    wait_until(
        "the last real files to be applied",
        lambda: all(
            not (specs / f"{n}_task{n}" / META).exists() and task_status(root, n) == "researched"
            for n in racing
        ),
        timeout=90,
    )
    assert d.stop() == 0
    assert tree_of(outside) == before
    assert MARK not in project_text(root)
    assert not journal_mentions(MARK)
    assert d.events("applied"), d.text()[-2000:]


# --- a symlinked specs directory ----------------------------------------------------------


def _specs_link(tmp_path: Path) -> tuple[Path, Path]:
    """A root whose ``specs`` is a link to a complete outside specs directory."""
    outside_root = make_root(tmp_path / "outside")
    (outside_root / "specs" / "1_task1" / META).write_text(final_text(1, outside=True), "utf-8")
    root = tmp_path / "proj"
    root.mkdir()
    (root / "specs").symlink_to(outside_root / "specs", target_is_directory=True)
    return root, outside_root / "specs"


@pytest.mark.parametrize("entry", ["scan", "scan --apply", "process", "hook", "status", "watch"])
def test_a_symlinked_specs_directory_is_refused(
    tmp_path: Path, entry: str, daemon: Callable[..., Daemon]
) -> None:
    root, outside = _specs_link(tmp_path)
    before = tree_of(outside)
    if entry == "watch":
        d = daemon(root, ready=False)
        code = d.proc.wait(TIMEOUT_S)
        out_text, code_ok = d.text(), code == 4
    else:
        args: dict[str, list[object]] = {
            "scan": ["scan", root],
            "scan --apply": ["scan", "--apply", root],
            "process": ["process", root / "specs" / "1_task1" / META],
            "status": ["status", root],
        }
        out = hook(root) if entry == "hook" else cli(*args[entry])
        out_text = out.stdout + out.stderr
        # The hook's exit code belongs to the runtime's protocol (2 blocks the agent): never 70.
        code_ok = out.returncode != 70 if entry == "hook" else out.returncode == 4
    assert code_ok, out_text
    assert "Traceback" not in out_text
    if entry != "hook":
        assert "symbolic link" in out_text
    assert tree_of(outside) == before
    assert not journal_mentions(MARK)


def test_a_specs_directory_replaced_by_a_link_while_the_daemon_runs_is_not_followed(
    tmp_path: Path, daemon: Callable[..., Daemon]
) -> None:
    root = make_root(tmp_path / "proj")
    outside_root = make_root(tmp_path / "outside")
    (outside_root / "specs" / "1_task1" / META).write_text(final_text(1, outside=True), "utf-8")
    before = tree_of(outside_root)
    d = daemon(root)
    (root / "specs").rename(root / "specs.old")
    (root / "specs").symlink_to(outside_root / "specs", target_is_directory=True)
    wait_until(
        "the daemon to treat the link as a missing specs dir", lambda: d.events("specs_dir_missing")
    )
    (outside_root / "specs" / "2_task2" / META).write_text(final_text(2), "utf-8")
    # The real specs directory comes back with a file of its own: once that one is applied,
    # anything the daemon would have done through the link is done too.
    (root / "specs").unlink()
    (root / "specs.old").rename(root / "specs")
    write_meta(root, 2, final_text(2))
    wait_until("the real file applied", lambda: task_status(root, 2) == "researched")
    assert d.stop() == 0
    after = tree_of(outside_root)
    del after[str(outside_root / "specs" / "2_task2" / META)]
    assert after == before
    assert (outside_root / "specs" / "2_task2" / META).exists()
    assert not journal_mentions(MARK)


# --- project files that are links, dangling links, FIFOs ----------------------------------


@pytest.mark.parametrize("name", ["state.json", "TODO.md", "errors.json", ".state.lock"])
@pytest.mark.parametrize("dangling", [False, True], ids=["to-a-file", "dangling"])
@pytest.mark.parametrize("entry", ["process", "scan --apply", "hook"])
def test_a_project_file_that_is_a_link_is_refused_and_nothing_goes_through_it(
    tmp_path: Path, name: str, dangling: bool, entry: str
) -> None:
    """state.json, TODO.md, errors.json or .state.lock as a link: PF604, nothing written
    through it, no file created where a dangling one points, the metadata files kept."""
    root = make_root(tmp_path / "proj")
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / f"victim-{name}"
    if not dangling:
        existing = root / "specs" / name
        victim.write_bytes(existing.read_bytes() if existing.exists() else b"[]\n")
    link = root / "specs" / name
    link.unlink(missing_ok=True)
    link.symlink_to(victim)
    meta1 = write_meta(root, 1, final_text(1))  # writes state.json and TODO.md
    meta2 = write_meta(root, 2, failed_text(2))  # writes errors.json
    before = tree_of(outside)
    if entry == "process":
        out = cli("process", meta1)
        cli("process", meta2)
        assert out.returncode == 4, out.stdout + out.stderr
    elif entry == "scan --apply":
        out = cli("scan", "--apply", root)
        assert out.returncode == 4, out.stdout + out.stderr
    else:
        out = hook(root)
        assert out.returncode != 70, out.stderr
    assert "Traceback" not in out.stderr
    assert tree_of(outside) == before
    assert meta1.exists() and meta2.exists()
    assert link.is_symlink()


@pytest.mark.parametrize("name", ["state.json", "TODO.md", "errors.json", ".state.lock"])
def test_the_daemon_refuses_a_project_file_that_is_a_link(
    tmp_path: Path, name: str, daemon: Callable[..., Daemon]
) -> None:
    root = make_root(tmp_path / "proj")
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim"
    victim.write_bytes(b'{"active_projects": []}\n' if name == "state.json" else b"keep\n")
    link = root / "specs" / name
    link.unlink(missing_ok=True)
    link.symlink_to(victim)
    before = tree_of(outside)
    d = daemon(root)
    meta1 = write_meta(root, 1, final_text(1))
    write_meta(root, 2, failed_text(2))
    wait_until("the file to be held (PF604)", lambda: d.events("state_unusable"))
    assert d.stop() == 0
    assert tree_of(outside) == before
    assert meta1.exists()
    assert "symbolic link" in d.events("state_unusable")[0]["problem"]


def test_a_fifo_at_state_json_hangs_no_command_and_not_the_daemon(
    tmp_path: Path, daemon: Callable[..., Daemon]
) -> None:
    root = make_root(tmp_path / "proj")
    state = root / "specs" / "state.json"
    state.unlink()
    os.mkfifo(state)
    meta = write_meta(root, 1, final_text(1))
    for args in (["scan", root], ["scan", "--apply", root], ["process", meta], ["status", root]):
        out = cli(*args)  # a hang is a TimeoutExpired: the test fails, the suite goes on
        assert "Traceback" not in out.stderr, out.stderr
    assert cli("process", meta).returncode == 4
    assert cli("scan", "--apply", root).returncode == 4
    assert hook(root).returncode != 70
    d = daemon(root)
    wait_until("the daemon to hold the file", lambda: d.events("state_unusable"))
    # A daemon blocked opening the FIFO would never exit: stop()'s deadline is the check.
    assert d.stop() == 0
    assert meta.exists()


def test_a_fifo_at_the_pid_file_hangs_neither_status_nor_watch(
    tmp_path: Path, daemon: Callable[..., Daemon]
) -> None:
    root = make_root(tmp_path / "proj")
    os.mkfifo(root / "specs" / ".postflightd.pid")
    out = cli("status", root)
    assert out.returncode == 0, out.stderr
    assert "no daemon" in out.stdout
    d = daemon(root, ready=False)
    assert d.proc.wait(TIMEOUT_S) == 2
    assert "FIFO" in d.text() and "Traceback" not in d.text()


@pytest.mark.parametrize("dangling", [False, True], ids=["to-a-file", "dangling"])
def test_a_pid_file_link_is_refused_never_truncated(
    tmp_path: Path, dangling: bool, daemon: Callable[..., Daemon]
) -> None:
    """The pid file as a link (to a file of someone else's, or nowhere): the daemon refuses
    to start, the file keeps its content, nothing is created; status does not follow it."""
    root = make_root(tmp_path / "proj")
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "precious"
    if not dangling:
        victim.write_bytes(b"do not truncate me\n")
    (root / "specs" / ".postflightd.pid").symlink_to(victim)
    before = tree_of(outside)
    d = daemon(root, ready=False)
    assert d.proc.wait(TIMEOUT_S) == 2
    assert "symbolic link" in d.text() and "Traceback" not in d.text()
    out = cli("status", root)
    assert out.returncode == 0 and "no daemon" in out.stdout, out.stdout + out.stderr
    assert tree_of(outside) == before


# --- a project's own configuration ----------------------------------------------------------


@pytest.mark.parametrize("key", ["state_file", "todo_file", "errors_file"])
@pytest.mark.parametrize("value", ["../../outside/x.json", "/tmp/x.json", "..", "sub/x.json"])
def test_project_config_cannot_send_project_files_out(tmp_path: Path, key: str, value: str) -> None:
    root = make_root(tmp_path / "proj")
    (tmp_path / "outside").mkdir()
    (root / ".postflightd.toml").write_text(f'[postflight]\n{key} = "{value}"\n', "utf-8")
    meta = write_meta(root, 2, failed_text(2))
    write_meta(root, 1, final_text(1))
    out = cli("scan", "--apply", root)
    assert out.returncode == 2, out.stdout + out.stderr
    assert f"postflight.{key}" in out.stderr
    assert "Traceback" not in out.stderr
    assert meta.exists()
    assert list((tmp_path / "outside").iterdir()) == []


def test_project_config_cannot_set_the_journal_path(tmp_path: Path) -> None:
    """[journal] path in ROOT/.postflightd.toml: exit 2 naming the key; nothing created."""
    root = make_root(tmp_path / "proj")
    elsewhere = tmp_path / "outside" / "journal.sqlite3"
    (root / ".postflightd.toml").write_text(f'[journal]\npath = "{elsewhere}"\n', "utf-8")
    meta = write_meta(root, 1, final_text(1))
    for out in (cli("scan", "--apply", root), cli("process", meta)):
        assert out.returncode == 2, out.stdout + out.stderr
        assert "journal.path" in out.stderr
    assert not elsewhere.parent.exists()
    assert meta.exists()


def test_the_journal_path_comes_from_the_user_configuration(tmp_path: Path) -> None:
    """--config and the user configuration may set it, even beside a project configuration."""
    root = make_root(tmp_path / "proj")
    (root / ".postflightd.toml").write_text("[validation]\nstrict = false\n", "utf-8")
    user = Path(os.environ["XDG_CONFIG_HOME"]) / "postflightd" / "config.toml"
    user.parent.mkdir(parents=True)
    mine = tmp_path / "mine" / "journal.sqlite3"
    user.write_text(f'[journal]\npath = "{mine}"\n', "utf-8")
    write_meta(root, 1, final_text(1))
    out = cli("scan", "--apply", root)
    assert out.returncode == 0, out.stdout + out.stderr
    assert mine.exists()
    explicit = tmp_path / "explicit.toml"
    chosen = tmp_path / "chosen" / "journal.sqlite3"
    explicit.write_text(f'[journal]\npath = "{chosen}"\n', "utf-8")
    write_meta(root, 2, final_text(2))
    out = cli("scan", "--apply", "--config", explicit, root)
    assert out.returncode == 0, out.stdout + out.stderr
    assert chosen.exists()


def test_a_specs_dir_through_a_link_in_the_root_is_refused(tmp_path: Path) -> None:
    """specs_dir = "alias/specs" where alias is a link out of the root: refused (exit 4)."""
    root = make_root(tmp_path / "proj")
    outside_root = make_root(tmp_path / "outside")
    (outside_root / "specs" / "1_task1" / META).write_text(final_text(1, outside=True), "utf-8")
    (root / "alias").symlink_to(outside_root, target_is_directory=True)
    (root / ".postflightd.toml").write_text('specs_dir = "alias/specs"\n', "utf-8")
    before = tree_of(outside_root)
    out = cli("scan", "--apply", root)
    assert out.returncode == 4, out.stdout + out.stderr
    assert "symbolic link" in out.stderr
    assert tree_of(outside_root) == before


def test_a_symlinked_project_config_is_refused(tmp_path: Path) -> None:
    """ROOT/.postflightd.toml read like any project file: a link is not followed."""
    root = make_root(tmp_path / "proj")
    secret = tmp_path / "outside" / "config.toml"
    secret.parent.mkdir()
    secret.write_text('specs_dir = "specs"\n', "utf-8")
    (root / ".postflightd.toml").symlink_to(secret)
    out = cli("scan", root)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "symbolic link" in out.stderr


# --- process FILE, task numbers -----------------------------------------------------------


@pytest.mark.parametrize("name", ["notes.json", "state.json", ".return-meta.json.bak"])
def test_process_refuses_a_file_not_named_return_meta(tmp_path: Path, name: str) -> None:
    root = make_root(tmp_path / "proj")
    other = root / "specs" / "1_task1" / name
    other.write_text(final_text(1), encoding="utf-8")
    out = cli("process", other)
    assert out.returncode == 2, out.stdout + out.stderr
    assert META in out.stderr
    assert other.exists()
    assert task_status(root, 1) == "researching"


def test_task_numbers_are_ascii_digits(tmp_path: Path) -> None:
    """``٢٦٤_x`` (Arabic-Indic digits) is PF104, not task 264; nothing is applied."""
    root = make_root(tmp_path / "proj", tasks=264)
    directory = root / "specs" / "\u0662\u0666\u0664_x"
    directory.mkdir()
    doc = researched_doc("1_task1")
    (directory / META).write_text(json.dumps(doc), encoding="utf-8")
    out = cli("scan", "--format", "json", root)
    (entry,) = json.loads(out.stdout)["files"]
    assert entry["task"] is None
    assert "PF104" in [f["code"] for f in entry["findings"]]
    out = cli("scan", "--apply", root)
    assert out.returncode == 1
    assert task_status(root, 264) == "researching"
    assert (directory / META).exists()


# --- init -----------------------------------------------------------------------------------


@pytest.mark.parametrize("plant", ["claude-dir-link", "gitignore-link", "gitignore-fifo"])
def test_init_writes_nothing_through_a_link_and_never_hangs(tmp_path: Path, plant: str) -> None:
    """``init`` reads and writes the project through the tree layer too."""
    root = make_root(tmp_path / "proj")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "settings.json").write_text("{}\n", encoding="utf-8")
    (outside / "authorized_keys").write_text("ssh-ed25519 AAAA me\n", encoding="utf-8")
    if plant == "claude-dir-link":
        (root / ".claude").symlink_to(outside, target_is_directory=True)
    elif plant == "gitignore-link":
        (root / ".gitignore").symlink_to(outside / "authorized_keys")
    else:
        os.mkfifo(root / ".gitignore")
    before = tree_of(outside)
    out = cli("init", root, "--yes")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Traceback" not in out.stderr
    assert ("FIFO" if plant == "gitignore-fifo" else "symbolic link") in out.stderr
    assert tree_of(outside) == before
