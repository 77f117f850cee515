"""`scan` and `check-return` import no POSIX-only module: run them with `fcntl` unavailable."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from helpers.documents import researched_doc, task_entry
from helpers.project import project, write_artifact, write_meta

# A finder first on sys.meta_path refuses the POSIX-only modules, as on Windows, and notes
# every attempt to import one (a guarded import that falls back still counts).
PRELUDE = """
import sys
BLOCKED = ("fcntl", "termios", "pwd", "grp", "resource")
tried = []
class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name in BLOCKED:
            tried.append(name)
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Refuse())
for name in BLOCKED:
    sys.modules.pop(name, None)
from postflightd.cli import main
"""


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PRELUDE + code],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_scan_runs_without_fcntl(tmp_path: Path) -> None:
    root = project(tmp_path / "p", [task_entry(259, "prove_completeness")])
    write_artifact(root, "specs/259_prove_completeness/reports/research-001.md")
    write_meta(root, "259_prove_completeness", researched_doc())
    write_meta(root, "260_x", {"status": "completed"})
    out = _run(
        f"code = main(['scan', {str(root)!r}, '--format', 'json'])\n"
        "print('exit', code, 'tried', sorted(set(tried)), file=sys.stderr)\n"
    )
    assert "exit 1 tried []" in out.stderr, out.stderr
    report = json.loads(out.stdout)
    assert report["summary"]["files"] == 2
    assert report["summary"]["valid"] == 1


def test_check_return_runs_without_fcntl(tmp_path: Path) -> None:
    ret = tmp_path / "return.json"
    ret.write_text(json.dumps({"status": "completed"}), encoding="utf-8")
    out = _run(
        f"code = main(['check-return', {str(ret)!r}, '--format', 'json'])\n"
        "print('exit', code, 'tried', sorted(set(tried)), file=sys.stderr)\n"
    )
    assert "exit 1 tried []" in out.stderr, out.stderr
    assert json.loads(out.stdout)["valid"] is False


def test_the_stub_really_blocks_fcntl() -> None:
    """The prelude makes `import fcntl` fail and notes the attempt; the tests above would
    prove nothing otherwise."""
    out = _run("try:\n    import fcntl\nexcept ImportError:\n    print('tried', tried)\n")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "tried ['fcntl']\n"
