"""Property tests (hypothesis's ``@given``) write nothing where pytest runs: each keeps no
example database (hypothesis would otherwise write one under ``.hypothesis/`` in the working
directory, and replay its old examples in later runs), and conftest gives hypothesis's cache a
temp dir."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent


def _name(node: ast.expr) -> str | None:
    target = node.func if isinstance(node, ast.Call) else node
    if isinstance(target, ast.Name):
        return target.id
    if isinstance(target, ast.Attribute):
        return target.attr
    return None


def _without_database(node: ast.expr) -> bool:
    """A ``settings(..., database=None)`` call."""
    return (
        isinstance(node, ast.Call)
        and _name(node) == "settings"
        and any(
            k.arg == "database" and isinstance(k.value, ast.Constant) and k.value.value is None
            for k in node.keywords
        )
    )


def offenders(path: Path) -> list[str]:
    """The property tests of ``path`` whose settings keep an example database."""
    tree = ast.parse(path.read_bytes(), str(path))
    # Module-level settings shared by several tests: PROPERTY_SETTINGS = settings(...).
    shared = {
        target.id
        for node in tree.body
        if isinstance(node, ast.Assign) and _without_database(node.value)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        decorators = node.decorator_list
        if not any(_name(d) == "given" for d in decorators):
            continue
        if not any(
            _without_database(d) or (isinstance(d, ast.Name) and d.id in shared) for d in decorators
        ):
            found.append(f"{path.relative_to(TESTS)}:{node.lineno} {node.name}")
    return found


def test_every_property_test_keeps_no_example_database() -> None:
    files = sorted(TESTS.rglob("test_*.py"))
    assert any("@given" in p.read_text(encoding="utf-8") for p in files)
    assert [o for p in files for o in offenders(p)] == [], "add database=None to their @settings"


@pytest.mark.slow
def test_a_property_test_run_from_a_directory_writes_nothing_there(tmp_path: Path) -> None:
    test = TESTS / "rules" / "test_fixes.py"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            str(test),
            "-k",
            "guess_status_never_raises",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout, done.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == []
