#!/usr/bin/env python3
"""Set-up and everyday commands, needing nothing but Python 3.11+.

    python3 tasks.py demo    the main job on the bundled example project
    python3 tasks.py test    ruff, mypy --strict and the whole test suite
    python3 tasks.py bench   the benchmarks in bench/

Each creates .venv/ and installs the project into it (with its dev tools) when needed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
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
    if not PY.exists():
        run(sys.executable, "-m", "venv", VENV)
    run(PY, "-m", "pip", "install", "--quiet", "--upgrade", "pip")
    run(PY, "-m", "pip", "install", "--quiet", "-e", f"{HERE}[dev]")
    STAMP.write_text(digest)


def demo() -> int:
    """Scan a copy of the bundled example project and show what postflightd finds."""
    with tempfile.TemporaryDirectory(prefix="postflightd-demo-") as tmp:
        project = Path(tmp) / "project"
        shutil.copytree(HERE / "examples" / "project", project)
        print(f"\n== postflightd scan on a copy of examples/project ({project})\n", flush=True)
        code = run(BIN / "postflightd", "scan", project, check=False)
        print(
            f"\n== scan exited {code}: the example holds one valid file and four with problems"
            " (a forbidden status, a missing artifact, a stuck agent, a truncated file),"
            " so CI would fail here.",
            flush=True,
        )
        return 0 if code in (0, 1) else code


def test() -> int:
    run(BIN / "ruff", "check", "src", "tests", "bench")
    run(BIN / "ruff", "format", "--check", "src", "tests", "bench")
    run(BIN / "mypy", "--strict", "src")
    code = run(PY, "-m", "pytest", *sys.argv[2:], check=False)
    if code == 5:
        print("pytest collected no tests: that is a failure here", file=sys.stderr)
        return 1
    return code


def bench() -> int:
    for script in sorted((HERE / "bench").glob("*.py")):
        run(PY, script, *sys.argv[2:])
    return 0


COMMANDS = {"demo": demo, "test": test, "bench": bench}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        sys.exit(__doc__)
    ensure_venv()
    try:
        sys.exit(COMMANDS[sys.argv[1]]())
    except subprocess.CalledProcessError as exc:
        sys.exit(exc.returncode)
