"""The set-up the real-runtime tests (tests/runtimes/) share: the project of tasks 259 and 260
set up by `postflightd init` as a user would, the documents the agent writes, the throwaway
HOME and hook recorder a run gets, running the runtime's binary, and the check that the
scripted model's script was played to its end.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers.documents import SESSION, researched_doc, task_entry
from helpers.project import META, project, write_meta
from helpers.runtimes import HookCall, hook_calls, offline_env, recorder
from helpers.scripted_server import ScriptedServer

OWN, OTHER = "259_prove_completeness", "260_plan_it"
TASKS = [task_entry(259, "prove_completeness"), task_entry(260, "plan_it")]
#: Not JSON: PF102, whoever wrote it.
BROKEN = '{"status": "researched",\n'
VALID = json.dumps(researched_doc(OWN), indent=2)
IN_PROGRESS = json.dumps(
    {
        "status": "in_progress",
        "started_at": "2026-01-08T14:00:00Z",
        "artifacts": [],
        "metadata": {"session_id": SESSION},
    },
    indent=2,
)
HOUR_AGO = 3600.0
#: A shell command (run from the project root) that writes the agent's own valid file.
SHELL_WRITES_VALID = f"cat > specs/{OWN}/{META} <<'EOF'\n{VALID}\nEOF"
REPO = Path(__file__).resolve().parents[2]
#: The CLI of this environment, as a user runs it.
CLI = Path(sys.executable).parent / "postflightd"


def init(root: Path, runtime: str, *flags: str) -> None:
    """`postflightd init --yes [flags] --runtime runtime root`, which must succeed."""
    out = subprocess.run(
        [str(CLI), "init", "--yes", *flags, "--runtime", runtime, str(root)],
        capture_output=True,
        check=False,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr


def initialised_project(tmp_path: Path, runtime: str, written: str) -> Path:
    """Tasks 259 (ready for a research report) and 260, set up by `postflightd init` for
    ``runtime``, which must have written the file ``written`` (relative to the project)."""
    root = project(tmp_path / "proj", TASKS, todo=True, artifacts=[259])
    init(root, runtime)
    assert (root / written).is_file()
    return root


@dataclass(frozen=True)
class Sandbox:
    """Where a run of a runtime lives beside its project: a throwaway HOME, the directory
    the hook recorder writes each call to, and a PATH with the recorder first."""

    home: Path
    calls_dir: Path
    path: str

    def env(self, **extra: str) -> dict[str, str]:
        """The runtime's environment: offline, this sandbox's HOME and PATH, and ``extra``."""
        return offline_env(self.home, PATH=self.path, PF_HOOK_CALLS=str(self.calls_dir), **extra)

    def calls(self) -> list[HookCall]:
        return hook_calls(self.calls_dir)


def sandbox(root: Path, runtime: str) -> Sandbox:
    """A new sandbox beside the project ``root``: HOME is ``<runtime>-home``."""
    tmp = root.parent
    home = tmp / f"{runtime}-home"
    home.mkdir()
    calls = tmp / "hook-calls"
    calls.mkdir()
    path = os.pathsep.join(
        [str(recorder(tmp / "bin")), str(Path(sys.executable).parent), os.environ["PATH"]]
    )
    return Sandbox(home, calls, path)


def run_agent(
    argv: list[str], root: Path, env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess[bytes]:
    """The runtime's ``argv`` in ``root``, nothing on its stdin, its output kept."""
    return subprocess.run(
        argv,
        cwd=root,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        check=False,
        timeout=timeout,
    )


def script_played(server: ScriptedServer, calls: list[HookCall], complete: bool = True) -> None:
    """No turn asked for past the script's end (the hook sent the agent on when it should
    not), and, when ``complete``, every turn of it asked for."""
    answers = [(c.event, c.answer) for c in calls]
    assert server.errors == [], answers
    if complete:
        assert server.script == [], ("the agent stopped before the end of its script", answers)
        left = {name: turns for name, turns in server.agents.items() if turns}
        assert not left, ("a subagent stopped before the end of its script", left, answers)


def broken_file_of_another_run(root: Path, age_s: float = HOUR_AGO) -> Path:
    """An invalid metadata file in another task's directory (OTHER), last written ``age_s``
    seconds ago."""
    theirs = write_meta(root, OTHER, BROKEN)
    when = time.time() - age_s
    os.utime(theirs, (when, when))
    return theirs


def another_process_writing_a_broken_file(root: Path) -> Callable[[dict[str, Any]], None]:
    """A turn's ``before``: another process writes an invalid file in another task's directory
    (OTHER) while the agent runs, then a second passes (past the hook's settle window: the
    file is whole when the agent stops)."""

    def other_process(_: dict[str, Any]) -> None:
        write_meta(root, OTHER, BROKEN)
        time.sleep(1.0)

    return other_process
