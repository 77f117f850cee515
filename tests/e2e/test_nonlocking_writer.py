"""A writer that ignores the lock, in a tight loop, against the daemon applying thousands of
files: neither loses anything.

The writer is `jq '.writer_count += 1' state.json > tmp && mv tmp state.json` in a loop with no
pause, counting its increments. Our writes never overwrite one of its updates
(state.json is swapped in only over the version read); its writes on top of ours, from a copy
read before them, revert outcomes, which the daemon's healer re-applies.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from helpers.daemon_process import daemons
from helpers.documents import researched_doc
from helpers.needs import require_tool
from helpers.project import meta_path, project
from helpers.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

#: read, increment, write a temporary file, rename: no lock, no pause. Prints its count.
WRITER = (
    'cd "$1" && n=0 && while [ ! -e "$2" ]; do '
    "jq '.writer_count = ((.writer_count // 0) + 1)' state.json > .jq.tmp || exit 1; "
    "mv .jq.tmp state.json || exit 1; n=$((n + 1)); done; echo $n"
)

TASKS = 600
ROUNDS = 4


def _state(root: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((root / "specs" / "state.json").read_bytes())
    return data


def _write_final(root: Path, n: int, round_: int) -> None:
    """Task n's outcome of this round: its report's summary names the round."""
    doc = researched_doc(f"{n}_task{n}")
    doc["artifacts"][0]["summary"] = f"round {round_}"
    path = meta_path(root, n)
    tmp = path.with_name(".meta.tmp")
    tmp.write_text(json.dumps(doc), encoding="utf-8")
    tmp.replace(path)


def _left(root: Path) -> list[int]:
    """The tasks whose metadata file is still there."""
    return [n for n in range(1, TASKS + 1) if os.path.lexists(meta_path(root, n))]


def _round_present(root: Path, round_: int) -> bool:
    entries = _state(root)["active_projects"]
    return all(
        e["status"] == "researched" and e["artifacts"][0]["summary"] == f"round {round_}"
        for e in entries
    )


def test_a_tight_non_locking_writer_and_thousands_of_postflights_lose_nothing(
    tmp_path: Path,
) -> None:
    require_tool("jq", "it is the writer that ignores the lock")
    root = project(tmp_path / "p", TASKS, todo=False)
    specs = root / "specs"
    stop = tmp_path / "stop-writer"
    with daemons(tmp_path) as start:
        daemon = start(root)
        writer = subprocess.Popen(
            ["bash", "-c", WRITER, "writer", str(specs), str(stop)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            wait_until("the writer to start", lambda: _state(root).get("writer_count", 0) > 0)
            for round_ in range(ROUNDS):
                # Agents finishing all along, a few at a time: many commits, each racing the
                # writer.
                for n in range(1, TASKS + 1):
                    _write_final(root, n, round_)
                    if n % 4 == 0:
                        time.sleep(0.002)
                try:
                    wait_until(
                        f"round {round_}: every metadata file applied and deleted",
                        lambda: not _left(root),
                        timeout=120,
                    )
                except pytest.fail.Exception:
                    # What the daemon was doing meanwhile: shown with the failure.
                    print(f"left: tasks {_left(root)[:20]} ({len(_left(root))} in all)")
                    for event in daemon.events()[-40:]:
                        print(event)
                    raise
                # Outcomes the writer reverted (its copy read before our write) are healed.
                wait_until(
                    f"round {round_}: every outcome present",
                    partial(_round_present, root, round_),
                    120,
                )
        finally:
            stop.touch()
            out, err = writer.communicate(timeout=60)
        assert writer.returncode == 0, err
        increments = int(out)
        print(f"{increments} increments by the writer")
        assert increments > 20, "the writer hardly ran against the daemon"
        wait_until(
            "the last round's outcomes present", partial(_round_present, root, ROUNDS - 1), 60
        )
        assert _state(root)["writer_count"] == increments  # not one increment lost
        # Losing the race to the writer many times in a row only delays a file (it is kept and
        # applied at a later try): the one error allowed says so.
        errors = [e for e in daemon.events() if e.get("level") == "error"]
        assert all("keeps changing" in str(e.get("problem")) for e in errors), errors
        print(f"{len(errors)} postflight(s) delayed: the writer won the race at every try")
        assert daemon.stop() == 0
    # Only once the daemon has stopped: a running one may be writing state.json (healing
    # what the writer reverted) through a temporary file at any moment.
    assert not list(specs.glob(".*.tmp")), "a temporary file was left behind"
