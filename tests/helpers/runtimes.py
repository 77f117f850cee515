"""Real agent runtimes for tests/runtimes/: each pinned release (tests/runtimes/pinned.txt),
installed from the npm registry once into a cache outside the repository, and the stop hook's
calls recorded as the runtime made them.

The cache is ``$PF_RUNTIMES_DIR``, else ``~/.cache/postflightd-tests/runtimes`` of the user
running the tests (their real home: the tests' own HOME is a temporary directory), one
directory ``<name>-<version>`` per release; .ci/run fills the same one. Without npm the tests
skip, except under CI (``CI`` set), where a runtime that cannot be installed fails them.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from helpers import needs
from helpers.update_mode import rewritten, updating

PINNED = Path(__file__).resolve().parents[1] / "runtimes" / "pinned.txt"
#: The hook recorder put first on the runtime's PATH as ``postflightd``: it runs the real CLI
#: (``python -m postflightd``) on the same stdin and arguments, and keeps the call. Any other
#: command (``postflightd mcp``, the MCP server the runtime starts from the same PATH) is the
#: real CLI in its place: the server answers each message as it comes, while stdin is still
#: open, so it cannot wait for stdin's end as a hook call is read.
RECORDER = """#!{python}
import json, os, subprocess, sys, time
if sys.argv[1:2] != ["hook"]:
    os.execv(sys.executable, [sys.executable, "-m", "postflightd", *sys.argv[1:]])
started = time.time_ns()
data = sys.stdin.buffer.read()
out = subprocess.run([sys.executable, "-m", "postflightd", *sys.argv[1:]], input=data,
                     capture_output=True, check=False)
call = {{"argv": sys.argv[1:], "stdin": data.decode("utf-8", "replace"),
        "stdout": out.stdout.decode("utf-8", "replace"),
        "stderr": out.stderr.decode("utf-8", "replace"), "code": out.returncode,
        "started": started, "ended": time.time_ns(), "cwd": os.getcwd()}}
name = os.path.join(os.environ["PF_HOOK_CALLS"], "%020d.json" % time.time_ns())
with open(name, "w", encoding="utf-8") as fh:
    json.dump(call, fh)
sys.stdout.buffer.write(out.stdout)
sys.stderr.buffer.write(out.stderr)
sys.exit(out.returncode)
"""


@dataclass(frozen=True)
class Pinned:
    name: str
    package: str
    version: str


def pinned(name: str) -> Pinned:
    """The release of runtime ``name`` that the tests drive."""
    for line in PINNED.read_text(encoding="utf-8").splitlines():
        fields = line.split()
        if fields and not fields[0].startswith("#") and fields[0] == name:
            return Pinned(*fields)
    raise LookupError(f"{name} is not in {PINNED}")


def runtimes_dir() -> Path:
    given = os.environ.get("PF_RUNTIMES_DIR")
    if given:
        return Path(given)
    return Path(pwd.getpwuid(os.getuid()).pw_dir) / ".cache" / "postflightd-tests" / "runtimes"


def unavailable(reason: str) -> NoReturn:
    """Skip, or under CI (where .ci/run installs every runtime) fail."""
    __tracebackhide__ = True
    needs.unavailable(f"{reason} (.ci/run installs the pinned runtimes)")


def installed(name: str) -> Path:
    """The executable of runtime ``name``'s pinned release (named as the runtime), installed
    first if it is not yet in the cache."""
    pin = pinned(name)
    target = runtimes_dir() / f"{pin.name}-{pin.version}"
    exe = target / "node_modules" / ".bin" / name
    if not exe.exists():
        _install(pin, target)
    if not exe.exists():
        unavailable(f"{pin.package}@{pin.version} installed without {exe}")
    return exe


def _install(pin: Pinned, target: Path) -> None:
    """``npm install`` into a new directory renamed to ``target`` when complete: a run that
    dies half-way, or two at once, never leave a half-installed release at ``target``."""
    npm = shutil.which("npm")
    if npm is None:
        unavailable(f"npm is needed to install {pin.package}@{pin.version}")
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    # npm's own configuration (registry, cache) is in the real home, not in the tests' one.
    env = {**os.environ, "HOME": pwd.getpwuid(os.getuid()).pw_dir}
    argv = [npm, "install", "--prefix", str(partial), "--no-audit", "--no-fund"]
    out = subprocess.run(
        [*argv, f"{pin.package}@{pin.version}"],
        capture_output=True,
        env=env,
        check=False,
        timeout=900,
    )
    if out.returncode != 0:
        shutil.rmtree(partial, ignore_errors=True)
        tail = out.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
        unavailable(f"npm install {pin.package}@{pin.version} failed: {' | '.join(tail)}")
    try:
        partial.rename(target)
    except OSError:
        shutil.rmtree(partial, ignore_errors=True)  # another run installed it meanwhile


@dataclass(frozen=True)
class HookCall:
    """One call of the stop hook as the runtime made it: its stdin, its whole answer."""

    stdin: dict[str, Any]
    answer: dict[str, Any]
    stderr: str
    code: int
    #: the arguments of ``postflightd`` (``hook copilot``)
    argv: tuple[str, ...] = ()
    #: when the call started and ended (``time.time_ns()``)
    started: int = 0
    ended: int = 0
    #: the working directory the runtime (or its plugin) started it in
    cwd: str = ""

    @property
    def event(self) -> str:
        return str(self.stdin.get("hook_event_name"))


def recorder(bin_dir: Path) -> Path:
    """A directory holding the hook recorder as ``postflightd``, to put first on PATH."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / "postflightd"
    path.write_text(RECORDER.format(python=sys.executable), encoding="utf-8")
    path.chmod(0o755)
    return bin_dir


def hook_calls(calls_dir: Path) -> list[HookCall]:
    """The recorded calls, in the order they were answered."""
    out = []
    for path in sorted(calls_dir.glob("*.json")):
        call = json.loads(path.read_text(encoding="utf-8"))
        out.append(
            HookCall(
                json.loads(call["stdin"]),
                json.loads(call["stdout"]),
                call["stderr"],
                call["code"],
                tuple(call["argv"]),
                call["started"],
                call["ended"],
                call["cwd"],
            )
        )
    return out


def offline_env(home: Path, **extra: str) -> dict[str, str]:
    """This process's environment without any agent runtime's own settings or keys, a
    throwaway HOME, and ``extra``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "CLAUDE_", "OPENAI_", "GEMINI_"))
    }
    env["HOME"] = str(home)
    env.update(extra)
    return env


# --- re-recording the fixtures -------------------------------------------------------------

#: The switch that makes the tests of tests/runtimes/ write what the runtimes produced over
#: the fixtures (tests/hooks/fixtures/README.md): the same as every switch that rewrites a file
#: kept in the repository (``helpers.update_mode``): only 1, never under CI, and a test that
#: rewrote a fixture fails.
RECORD = "PF_RECORD_FIXTURES"

#: The fixtures the running test rewrote (``capture``), for ``fail_if_recaptured``.
_recaptured: list[Path] = []


def recording() -> bool:
    """Whether this run re-records the fixtures (``$PF_RECORD_FIXTURES`` is 1, not under CI)."""
    return updating(RECORD)


def capture(path: Path, text: str) -> None:
    """Write ``text``, a run's capture, over the fixture ``path`` when it differs; the test
    then fails at its end, naming it (``fail_if_recaptured``)."""
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return
    path.write_text(text, encoding="utf-8")
    _recaptured.append(path)


def fail_if_recaptured() -> None:
    """Fail the test that rewrote fixtures: a run that rewrote the repository's files is never
    green (tests/runtimes/conftest.py calls it after each test)."""
    paths = list(_recaptured)
    _recaptured.clear()
    if paths:
        rewritten(paths[0], RECORD, *paths[1:])


def placeheld(text: str, places: dict[str, str]) -> str:
    """``text`` with each real path of ``places`` replaced by its placeholder, longest first."""
    for real, placeholder in sorted(places.items(), key=lambda item: -len(item[0])):
        text = text.replace(real, placeholder)
    return text


def lines_of(path: Path) -> Iterator[dict[str, Any]]:
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            yield json.loads(line)
