"""``postflightd hook`` started by a person at a terminal says what it waits for."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path


def test_hook_on_a_terminal_says_it_reads_json_on_stdin(tmp_path: Path) -> None:
    main, side = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "postflightd", "hook", "claude"],
            stdin=side,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=tmp_path,
            text=True,
        )
        os.close(side)
        side = -1
        os.write(main, b"\x04")  # Ctrl-D: end of input, nothing given
        out, err = proc.communicate(timeout=60)
    finally:
        if side != -1:
            os.close(side)
        os.close(main)
    assert "postflightd hook claude: reading the runtime's JSON on stdin (Ctrl-D ends)" in err
    assert out.strip().startswith("{")  # then read as before: one JSON answer


def test_hook_fed_by_a_pipe_says_nothing_of_the_kind(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "postflightd", "hook", "claude"],
        input="{}",
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert "reading the runtime's JSON" not in done.stderr
