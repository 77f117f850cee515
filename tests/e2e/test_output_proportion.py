"""Output stays in proportion to input: state.json and .claude/settings.json, as an agent can
write them, are rewritten within a small multiple of their size, or refused with a clear message.

An agent can write both files like any other in the project. Three shapes are fed to every
path that rewrites them (``scan --apply``, ``process``, ``--dry-run``'s diff, ``verify
--repair``, the daemon's postflight and its healer, ``init``), through the real CLI and the
real daemon:

* a wide indent unit: 2,000 spaces on the first indented line, and a list 100 deep. The unit
  is written once per level on every new line, so re-indenting the list in that layout takes
  ~20 MB for a file of ~2.5 KB;
* a list 300 deep in the usual two-space layout: ~180 KB of indentation for ~900 bytes;
* a list 100,000 deep: past what a JSON reader reads at all (RecursionError).

init reads no settings file nested deeper than ``MAX_SETTINGS_DEPTH``, so its wide-indent
case nests 60 deep, and its layout bound is met by 60 levels at 8 spaces each.

The bound asserted is the renderer's: the text it keeps, its layout limit
(``LAYOUT_FACTOR`` times the file's size plus ``LAYOUT_SLACK``), and at most twice the new
document's compact size (its separators with a space).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from helpers.daemon_process import daemons
from helpers.documents import final_text, task_entry
from helpers.hooks import MINUTE_AGO, Hook, by_name, written
from helpers.project import meta_path, project, task_status, write_artifact
from helpers.waiting import wait_until
from postflightd.cli import main
from postflightd.postflight.json_layout import LAYOUT_FACTOR, LAYOUT_SLACK
from postflightd.project.hook_files import MAX_SETTINGS_DEPTH

#: Real console-script runs and daemons, several per test: `pytest -m "not slow"` leaves them out.
pytestmark = pytest.mark.slow

#: name -> (the first indented line's indent, how deep task 1's "notes" list is nested)
HOSTILE = {"wide indent": (" " * 2000, 100), "300 deep": ("  ", 300)}


def cli(*args: object, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``postflightd ARGS`` as a user runs it, with no terminal on stdin."""
    return subprocess.run(
        [sys.executable, "-m", "postflightd", *map(str, args)],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
        check=False,
        cwd=cwd,
    )


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def hostile_state(root: Path, unit: str, depth: int, **task: Any) -> str:
    """Write state.json for task 1 as an agent can lay it out: ``unit`` before the first
    indented line, task 1's entry over several lines holding a list ``depth`` deep, and one
    key written twice (JSON allows it), so that the entry cannot be spliced member by member
    and is rewritten whole, in the file's layout."""
    entry = task_entry(1, "task1", **task)
    members = ",\n".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in entry.items())
    text = (
        "{\n"
        + unit
        + '"next_project_number": 1000,\n"active_projects": [{\n'
        + members
        + ',\n"language": "general",\n"notes": '
        + nested(depth)
        + "\n}]}\n"
    )
    (root / "specs" / "state.json").write_text(text, encoding="utf-8")
    return text


def limit(before: str, after_doc: Any) -> int:
    """The most a rendering of ``after_doc`` from the text ``before`` may hold."""
    compact = len(json.dumps(after_doc, separators=(",", ":")))
    return (1 + LAYOUT_FACTOR) * len(before) + LAYOUT_SLACK + 2 * compact + 2


def state_text(root: Path) -> str:
    return (root / "specs" / "state.json").read_text(encoding="utf-8")


def ready_project(root: Path, shape: str) -> tuple[Path, str]:
    """Task 1 researching in a hostile state.json, with a valid final metadata file."""
    project(root, 1)
    before = hostile_state(root, *HOSTILE[shape])
    meta_path(root, 1).write_text(final_text(1), encoding="utf-8")
    return root, before


def assert_applied_in_proportion(root: Path, before: str) -> None:
    after = state_text(root)
    assert task_status(root, 1) == "researched"
    assert not meta_path(root, 1).exists()
    assert len(after) <= limit(before, json.loads(after))


# --- state.json: every path that rewrites it ------------------------------------------------


@pytest.mark.parametrize("shape", HOSTILE)
def test_scan_apply(tmp_path: Path, shape: str) -> None:
    root, before = ready_project(tmp_path / "p", shape)
    run = cli("scan", "--apply", root)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 file applied" in run.stdout
    assert_applied_in_proportion(root, before)


@pytest.mark.parametrize("shape", HOSTILE)
def test_process(tmp_path: Path, shape: str) -> None:
    root, before = ready_project(tmp_path / "p", shape)
    run = cli("process", meta_path(root, 1))
    assert run.returncode == 0, run.stdout + run.stderr
    assert_applied_in_proportion(root, before)


@pytest.mark.parametrize("shape", HOSTILE)
@pytest.mark.parametrize("command", ["scan", "process"])
def test_dry_run_diff(tmp_path: Path, shape: str, command: str) -> None:
    """The diff holds the old and the new text once each, at most: nothing is written."""
    root, before = ready_project(tmp_path / "p", shape)
    args = ("scan", "--apply", root) if command == "scan" else ("process", meta_path(root, 1))
    run = cli(*args, "--dry-run")
    assert run.returncode == 0, run.stdout + run.stderr
    added = [line for line in run.stdout.splitlines() if line.startswith("+")]
    assert any('"researched"' in line for line in added)
    assert state_text(root) == before
    assert meta_path(root, 1).exists()
    # Each line of either text at most once, with a one-character prefix, plus the headers.
    new_doc_bound = limit(before, json.loads(before)) + 4096
    assert len(run.stdout) <= 2 * (len(before) + new_doc_bound)


@pytest.mark.parametrize("shape", HOSTILE)
def test_verify_repair(tmp_path: Path, shape: str) -> None:
    """An outcome applied to the hostile file, then the file put back as it was (a writer
    that ignored the lock): the repair re-applies the outcome within the bound."""
    root, before = ready_project(tmp_path / "p", shape)
    assert cli("scan", "--apply", root).returncode == 0
    (root / "specs" / "state.json").write_text(before, encoding="utf-8")
    run = cli("verify", "--repair", root)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "re-applied" in run.stdout
    assert_applied_in_proportion(root, before)


def test_daemon_postflight_and_healer(tmp_path: Path) -> None:
    """The daemon applies an outcome to the wide-indent file, then heals it when a writer
    that ignored the lock puts the old file back: both writes within the bound."""
    root, before = ready_project(tmp_path / "p", "wide indent")
    with daemons(tmp_path) as start:
        daemon = start(root)
        wait_until("task 1 applied", lambda: not meta_path(root, 1).exists())
        assert_applied_in_proportion(root, before)
        # The copy read before the postflight, renamed back over it.
        staged = tmp_path / "staged.json"
        staged.write_text(before, encoding="utf-8")
        os.replace(staged, root / "specs" / "state.json")
        daemon.wait_event("reapplied")
        wait_until("task 1 healed", lambda: task_status(root, 1) == "researched")
        assert len(state_text(root)) <= limit(before, json.loads(state_text(root)))
        assert daemon.proc.poll() is None
        assert daemon.stop() == 0


# --- nested past what a reader reads ----------------------------------------------------------


def too_deep_project(root: Path) -> tuple[Path, str]:
    project(root, 1)
    text = '{"next_project_number": 2, "active_projects": [], "x": ' + nested(100_000) + "}\n"
    (root / "specs" / "state.json").write_text(text, encoding="utf-8")
    meta_path(root, 1).write_text(final_text(1), encoding="utf-8")
    return root, text


@pytest.mark.parametrize(
    "args",
    [("scan", "--apply"), ("process",), ("process", "--dry-run")],
    ids=["scan-apply", "process", "process-dry-run"],
)
def test_state_nested_100000_deep_is_unusable_not_a_crash(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    root, text = too_deep_project(tmp_path / "p")
    target = meta_path(root, 1) if args[0] == "process" else root
    run = cli(*args, target)
    assert run.returncode == 4, run.stdout + run.stderr  # state.json unusable
    assert "PF604" in run.stdout
    assert "nested too deeply" in run.stdout
    assert "Traceback" not in run.stderr
    assert state_text(root) == text
    assert meta_path(root, 1).exists()


def test_daemon_keeps_running_on_a_state_nested_100000_deep(tmp_path: Path) -> None:
    root, text = too_deep_project(tmp_path / "p")
    with daemons(tmp_path) as start:
        daemon = start(root)
        wait_until(
            "the daemon to report state.json unusable",
            lambda: any("nested too deeply" in json.dumps(e) for e in daemon.events()),
        )
        assert daemon.proc.poll() is None
        assert daemon.stop() == 0
    assert state_text(root) == text
    assert meta_path(root, 1).exists()


# --- init and .claude/settings.json ---------------------------------------------------------------


def settings_project(root: Path, text: str) -> Path:
    (root / ".claude").mkdir(parents=True)
    (root / ".claude" / "settings.json").write_text(text, encoding="utf-8")
    return root


def settings_of(root: Path) -> str:
    return (root / ".claude" / "settings.json").read_text(encoding="utf-8")


def test_init_rewrites_wide_indented_settings_in_proportion(tmp_path: Path) -> None:
    """2,000 spaces on the first indented line and a list 60 deep (~7 MB re-indented in that
    unit): the rewrite indents by two spaces, and both the diff shown and the file written
    stay within the bound."""
    before = "{\n" + " " * 2000 + '"permissions": {"allow": ' + nested(60) + "}}\n"
    root = settings_project(tmp_path / "p", before)
    shown = cli("init", root)
    assert shown.returncode == 1, shown.stdout + shown.stderr  # shown, not written
    assert settings_of(root) == before
    run = cli("init", "--yes", root)
    assert run.returncode == 0, run.stdout + run.stderr
    after = settings_of(root)
    assert "postflightd hook claude" in after
    assert len(after) <= limit(before, json.loads(after))
    assert len(shown.stdout) <= 2 * (len(before) + len(after)) + 4096


@pytest.mark.parametrize(
    ("unit", "depth", "message"),
    [
        (" " * 8, 60, "nested too deeply to rewrite"),
        ("  ", 300, f"nested deeper than {MAX_SETTINGS_DEPTH} levels"),
        ("  ", 100_000, f"nested deeper than {MAX_SETTINGS_DEPTH} levels"),
    ],
    ids=["60-deep-8-spaces", "300-deep", "100000-deep"],
)
def test_init_refuses_settings_nested_too_deeply(
    tmp_path: Path, unit: str, depth: int, message: str
) -> None:
    """60 levels at 8 spaces each would take ~30 KB of indentation for a file of ~150 bytes;
    300 levels are past what init reads, and 100,000 past what any JSON reader reads. Each:
    exit 2 (a file to fix), a message naming the file, the file kept."""
    before = "{\n" + unit + '"permissions": ' + nested(depth) + "\n}\n"
    root = settings_project(tmp_path / "p", before)
    for args in (("init",), ("init", "--yes")):
        run = cli(*args, root)
        assert run.returncode == 2, run.stdout + run.stderr
        assert "settings.json" in run.stderr
        assert message in run.stderr
        assert "Traceback" not in run.stderr
        assert settings_of(root) == before


# --- nested just short of what a reader reads --------------------------------------------------


def deep_entry_project(root: Path, depth: int) -> Path:
    """Task 1's entry holds a value ``depth`` deep; a valid final metadata file for it."""
    project(root, [task_entry(1, "task1", notes=[])], todo=True)
    state = root / "specs" / "state.json"
    state.write_text(
        state.read_text(encoding="utf-8").replace('"notes": []', '"notes": ' + nested(depth)),
        encoding="utf-8",
    )
    write_artifact(root, "specs/1_task1/reports/research-001.md")
    meta_path(root, 1).parent.mkdir(parents=True, exist_ok=True)
    meta_path(root, 1).write_text(final_text(1), encoding="utf-8")
    return root


def verdicts_down_from_what_cannot_be_read(
    tmp_path: Path, run: Callable[[Path], str]
) -> dict[int, str]:
    """``run``'s verdict on the project of each depth from 1,000 down, to ten depths past
    the deepest applied: the depths where reading starts to work, whatever this stack."""
    verdicts: dict[int, str] = {}
    for depth in range(1000, 0, -1):
        verdicts[depth] = run(deep_entry_project(tmp_path / str(depth), depth))
        applied = [d for d, v in verdicts.items() if v == "applied"]
        if applied and max(applied) - depth >= 10:
            return verdicts
    raise AssertionError(verdicts)


def verdict_of(root: Path, told: str) -> str:
    """PF106 (the metadata file blamed), PF604 (state.json's problem), or applied."""
    if "PF106" in told:
        return "PF106"
    if "PF604" in told or "state.json: JSON nested too deeply" in told:
        return "PF604"
    return "applied" if task_status(root, 1) == "researched" else told


def test_a_state_json_too_deep_to_write_back_is_pf604_for_process_never_pf106(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nested just short of what json reads: read, but it could not be written back. It is
    state.json's problem (PF604, the file kept), never the valid metadata file's (PF106)."""

    def process(root: Path) -> str:
        code = main(["process", str(meta_path(root, 1))])
        out = capsys.readouterr().out
        assert code in (0, 4), out
        return verdict_of(root, out)

    verdicts = verdicts_down_from_what_cannot_be_read(tmp_path, process)
    assert set(verdicts.values()) == {"PF604", "applied"}, verdicts


def test_a_state_json_too_deep_to_write_back_is_pf604_for_the_hook_never_pf106(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hook = Hook(capsys, tmp_path)
    runtime = by_name("claude", "stop.json")

    def stop(root: Path) -> str:
        written(meta_path(root, 1), MINUTE_AGO)  # settled: the hook does not wait for it
        answer = hook(runtime, {"cwd": str(root), "stop_hook_active": False})
        assert answer.code == 0, answer
        return verdict_of(root, json.dumps(answer.doc) + answer.stderr)

    verdicts = verdicts_down_from_what_cannot_be_read(tmp_path, stop)
    assert set(verdicts.values()) == {"PF604", "applied"}, verdicts


#: What the daemon's log says of a file: its verdict, by event.
DAEMON_VERDICTS = {
    "applied": "applied",
    "state_unusable": "PF604",
    "invalid": "invalid",
    "postflight_failed": "failed",
}


def test_a_state_json_too_deep_to_write_back_is_pf604_for_the_daemon_never_pf106(
    tmp_path: Path,
) -> None:
    """The daemon reads state.json in a root's worker thread, at its own depth of the stack:
    one daemon watches a project of each depth from 1,000 down to 900, both sides of where
    reading starts to work there, and blames no metadata file."""
    roots = {str(deep_entry_project(tmp_path / str(d), d)): d for d in range(1000, 899, -1)}
    with daemons(tmp_path) as start:
        daemon = start(*map(Path, roots))

        def verdicts() -> dict[int, str]:
            out: dict[int, str] = {}
            for event in daemon.events():
                verdict = DAEMON_VERDICTS.get(event.get("event", ""))
                if verdict is not None and event.get("root") in roots:
                    if verdict == "invalid" and "PF106" in json.dumps(event):
                        verdict = "PF106"
                    out.setdefault(roots[event["root"]], verdict)
            return out

        found = wait_until("a verdict for every root", lambda: len(v := verdicts()) == 101 and v)
        assert daemon.stop() == 0
    assert set(found.values()) == {"PF604", "applied"}, found
