#!/usr/bin/env python3
"""Set-up and everyday commands, needing nothing but Python 3.11+.

    python3 tasks.py demo    the daemon on the bundled example project, following an agent run
    python3 tasks.py test    ruff, mypy --strict and the whole test suite
    python3 tasks.py bench   the benchmarks in bench/
    python3 tasks.py docs    the documentation site, built into site/ in strict mode
                             (--serve: serve it with live reload; --generate: rewrite
                             docs/rules.md and docs/commands.md from the code)

Each creates .venv/ and installs the project into it (with its dev tools) when needed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
VENV = HERE / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PY = BIN / "python"
STAMP = VENV / ".installed"


def run(*argv: str | Path, check: bool = True) -> int:
    print("+", " ".join(str(a) for a in argv), flush=True)
    return subprocess.run([str(a) for a in argv], cwd=HERE, check=check).returncode


def ensure_venv() -> None:
    """Create .venv and install the project with its dev extras, once per pyproject change."""
    if sys.version_info < (3, 11):
        sys.exit(f"postflightd needs Python 3.11 or newer; this is {sys.version.split()[0]}")
    digest = hashlib.sha256((HERE / "pyproject.toml").read_bytes()).hexdigest()
    if STAMP.is_file() and STAMP.read_text() == digest and PY.exists():
        return
    # Said first: the set-up is about a minute of pip's quiet work, which looked like a hang.
    if not PY.exists():
        say("setting up .venv (first run only, about a minute)...")
        run(sys.executable, "-m", "venv", VENV)
    else:
        say("updating .venv (pyproject.toml changed, about a minute)...")
    run(PY, "-m", "pip", "install", "--quiet", "--upgrade", "pip")
    run(PY, "-m", "pip", "install", "--quiet", "-e", f"{HERE}[dev]")
    STAMP.write_text(digest)


def demo() -> int:
    """The daemon on a copy of the example project, following a simulated agent run."""
    with tempfile.TemporaryDirectory(prefix="postflightd-demo-") as tmp:
        project = Path(tmp) / "project"
        # Copied as new files (not their checkout time): the demo is a project being worked on now.
        shutil.copytree(HERE / "examples" / "project", project, copy_function=shutil.copy)
        specs = project / "specs"
        env = {**os.environ, "XDG_STATE_HOME": str(Path(tmp) / "state")}
        say(f"postflightd watch on a copy of examples/project ({project})")
        say("On start it reconciles what is already there: task 259's valid file is applied;"
            " 260-263 are reported (a forbidden status, a missing artifact, a stuck agent, a"
            " truncated file) and kept.")
        daemon = subprocess.Popen(
            [BIN / "postflightd", "watch", project, "--log-format", "console"], env=env
        )
        try:
            wait_for(lambda: not (specs / "259_prove_completeness" / META).exists(), 20)
            say("A simulated agent now runs task 264: in_progress, two progress updates, then"
                " `researched` with its report, written the way agents write.")
            run(PY, HERE / "examples" / "agent_sim.py", project, "264_demo_run",
                "--steps", "2", "--interval", "0.7")
            wait_for(lambda: not (specs / "264_demo_run" / META).exists(), 20)
            time.sleep(0.3)  # let the daemon's log lines for the run reach the terminal
            entry = next(
                t for t in json.loads((specs / "state.json").read_text("utf-8"))["active_projects"]
                if t["project_number"] == 264
            )
            say("state.json, task 264, after postflight:")
            print(json.dumps(entry, indent=2), flush=True)
            todo = (specs / "TODO.md").read_text("utf-8")
            say("TODO.md, task 264's section:")
            print(todo[todo.index("### 264."):], flush=True)
            say("What is still in flight or stuck (postflightd status):")
            subprocess.run([BIN / "postflightd", "status", project], env=env, check=False)
        finally:
            daemon.send_signal(signal.SIGTERM)
            code = daemon.wait(timeout=10)
        say(f"daemon stopped on SIGTERM (exit {code}); the demo project was a temporary copy.")
        return 0 if code == 0 else 1


META = ".return-meta.json"


def say(text: str) -> None:
    print(f"\n== {text}\n", flush=True)


def wait_for(condition: Callable[[], bool], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit("the daemon did not get there in time; see its log above")
        time.sleep(0.05)


def test() -> int:
    run(BIN / "ruff", "check", "src", "tests", "bench", "docs/gen.py")
    run(BIN / "ruff", "format", "--check", "src", "tests", "bench", "docs/gen.py")
    run(BIN / "mypy", "--strict", "src", "docs/gen.py")
    code = run(PY, "-m", "pytest", *sys.argv[2:], check=False)
    if code == 5:
        print("pytest collected no tests: that is a failure here", file=sys.stderr)
        return 1
    return code


def bench() -> int:
    for script in sorted((HERE / "bench").glob("*.py")):
        if script.name == "machine.py":  # the shared machine description, not a benchmark
            continue
        run(PY, script, *sys.argv[2:])
    return 0


def docs() -> int:
    if "--generate" in sys.argv[2:]:
        return run(PY, HERE / "docs" / "gen.py", check=False)
    # Material's banner about MkDocs 2 is not about this site.
    os.environ["NO_MKDOCS_2_WARNING"] = "1"
    if "--serve" in sys.argv[2:]:
        return run(BIN / "mkdocs", "serve", "--strict", check=False)
    return run(BIN / "mkdocs", "build", "--strict", "--site-dir", HERE / "site", check=False)


COMMANDS = {"demo": demo, "test": test, "bench": bench, "docs": docs}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        sys.exit(__doc__)
    ensure_venv()
    try:
        sys.exit(COMMANDS[sys.argv[1]]())
    except subprocess.CalledProcessError as exc:
        sys.exit(exc.returncode)
