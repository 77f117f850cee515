"""The switches that rewrite files kept in the repository (``helpers.update_mode``): a file is
written only when its switch is 1, never under CI, and a run that rewrote one is not green.

Each is driven through the real test that compares with its file, in a pytest run of its own
on a copy of the repository's sources and tests, so that nothing here writes into the real one.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.paths import REPO

pytestmark = pytest.mark.slow

#: a file kept in the repository -> (its switch, the test that compares with it)
KEPT = {
    "tests/e2e/messages/hook.txt": (
        "POSTFLIGHTD_UPDATE_MESSAGES",
        "tests/e2e/test_messages.py::test_hook_claude",
    ),
    "tests/commands/golden/scan.text": (
        "POSTFLIGHTD_UPDATE_GOLDEN",
        "tests/commands/test_scan_golden.py::test_scan_output_is_golden[text]",
    ),
    "src/postflightd/models/metadata_core.py": (
        "POSTFLIGHTD_UPDATE_CORE_SCHEMA",
        "tests/models/test_metadata_core.py::test_the_stored_schema_is_what_the_models_give",
    ),
}
SWITCHES = sorted({switch for switch, _ in KEPT.values()})
COPIED = (
    "pyproject.toml",
    "src",
    "examples",
    "tests/conftest.py",
    "tests/helpers",
    "tests/e2e/test_messages.py",
    "tests/e2e/messages",
    "tests/commands/test_scan_golden.py",
    "tests/commands/golden",
    "tests/models/test_metadata_core.py",
)


def _copy(root: Path) -> Path:
    for rel in COPIED:
        source, target = REPO / rel, root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(source, target)
    return root


def _stale(root: Path) -> None:
    """Every kept file of the copy made different from what its test expects."""
    for rel in KEPT:
        path = root / rel
        text = path.read_text(encoding="utf-8")
        if rel.endswith("metadata_core.py"):
            mark = "#: Generated from ``models.metadata``"
            text = text[: text.index(mark)] + f"{mark}.\nSCHEMA: Final[dict[str, Any]] = {{}}\n"
        else:
            text += "a line the output does not have\n"
        path.write_text(text, encoding="utf-8")


def _kept(root: Path) -> dict[str, str]:
    return {rel: (root / rel).read_text(encoding="utf-8") for rel in KEPT}


def _pytest(root: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return _inner_pytest(root, [test for _, test in KEPT.values()], {"CI", *SWITCHES}, env)


def _inner_pytest(
    root: Path, tests: list[str], cleared: set[str], env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """pytest on ``tests`` in the copy at ``root``, without the variables ``cleared``."""
    base = {k: v for k, v in os.environ.items() if k not in cleared}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider", *tests],
        cwd=root,
        # The copy's sources, not the ones the virtualenv's editable install points at.
        env={**base, "PYTHONPATH": str(root / "src"), **env},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    return _copy(tmp_path / "repo")


def test_a_switch_that_is_not_1_rewrites_nothing_and_the_comparison_fails(copy: Path) -> None:
    _stale(copy)
    stale = _kept(copy)
    done = _pytest(copy, **dict.fromkeys(SWITCHES, "0"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "3 failed" in done.stdout, done.stdout
    assert _kept(copy) == stale
    typo = _pytest(copy, **dict.fromkeys(SWITCHES, "yes"))
    assert "3 failed" in typo.stdout, typo.stdout
    assert "set it to 1 to rewrite the files, or leave it unset" in typo.stdout
    assert _kept(copy) == stale


def test_under_ci_a_switch_set_to_1_fails_before_it_writes(copy: Path) -> None:
    _stale(copy)
    stale = _kept(copy)
    done = _pytest(copy, CI="true", **dict.fromkeys(SWITCHES, "1"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "3 failed" in done.stdout, done.stdout
    for switch in SWITCHES:
        assert f"{switch} is set under CI" in done.stdout, done.stdout
    assert _kept(copy) == stale


def test_a_switch_set_to_1_rewrites_each_file_and_the_run_that_did_fails(copy: Path) -> None:
    """What it writes is the committed file again, byte for byte; the next run passes."""
    committed = _kept(copy)
    _stale(copy)
    done = _pytest(copy, **dict.fromkeys(SWITCHES, "1"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "3 failed" in done.stdout, done.stdout
    for rel, (switch, _) in KEPT.items():
        assert f"rewrote {rel}: check the change, then run again without {switch}" in done.stdout
    assert _kept(copy) == committed
    again = _pytest(copy, **dict.fromkeys(SWITCHES, "1"))
    assert again.returncode == 0, again.stdout + again.stderr
    assert _kept(copy) == committed


# --- the real runtimes' captures (PF_RECORD_FIXTURES) --------------------------------------

RECORD = "PF_RECORD_FIXTURES"
#: A real runtime's test that records two fixtures (its hook input and its transcript).
RECORDING_TEST = (
    "tests/runtimes/test_gemini.py::test_a_valid_file_of_its_own_is_applied_and_the_agent_stops"
)
CAPTURED = (
    "tests/hooks/fixtures/gemini/after_agent.json",
    "tests/hooks/fixtures/gemini/write_file.jsonl",
)
RUNTIME_COPIED = ("tests/runtimes", "tests/hooks/fixtures/gemini")


def _captures(root: Path) -> dict[str, str]:
    return {rel: (root / rel).read_text(encoding="utf-8") for rel in CAPTURED}


def _record(root: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return _inner_pytest(root, [RECORDING_TEST], {"CI", RECORD, *SWITCHES}, env)


def test_the_runtimes_captures_are_rewritten_only_by_1_and_the_run_that_did_fails(
    copy: Path,
) -> None:
    """The real Gemini CLI's run: 0 (or unset) records nothing and passes; a typo fails; under
    CI 1 fails before it writes; 1 rewrites the captures and that run is not green."""
    for rel in RUNTIME_COPIED:
        shutil.copytree(REPO / rel, copy / rel, ignore=shutil.ignore_patterns("__pycache__"))
    committed = _captures(copy)
    off = _record(copy, **{RECORD: "0"})
    assert off.returncode == 0, off.stdout + off.stderr
    assert _captures(copy) == committed
    typo = _record(copy, **{RECORD: "yes"})
    assert "set it to 1 to rewrite the files, or leave it unset" in typo.stdout, typo.stdout
    under_ci = _record(copy, CI="true", **{RECORD: "1"})
    assert f"{RECORD} is set under CI" in under_ci.stdout, under_ci.stdout
    assert _captures(copy) == committed
    on = _record(copy, **{RECORD: "1"})
    assert on.returncode == 1, on.stdout + on.stderr
    rewrote = [rel for rel in CAPTURED if _captures(copy)[rel] != committed[rel]]
    assert rewrote, "a new run of the runtime captures new ids and times"
    for rel in rewrote:
        assert rel in on.stdout, on.stdout
    assert f"then run again without {RECORD}" in on.stdout, on.stdout


def test_the_runtimes_tests_write_their_captures_only_through_the_switch() -> None:
    """Every write under tests/runtimes/ to a fixtures path is helpers.runtimes.capture's."""
    offenders = []
    for path in sorted((REPO / "tests" / "runtimes").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("write_text", "write_bytes", "open")
                and "FIXTURES" in ast.unparse(node.func.value)
            ):
                offenders.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    assert offenders == [], "write captures with helpers.runtimes.capture"
