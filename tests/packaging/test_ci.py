""".ci/run's closing lines (.ci/summary.py): every skipped test with its reason, then a line of
counts, read from the JUnit report of a real pytest run."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SUMMARY = REPO / ".ci" / "summary.py"

TESTS = textwrap.dedent(
    """
    import pytest

    from helpers import needs

    needs.ALLOWED_UNDER_CI["no-such-machine"] = "no CI machine has one"


    def test_passes() -> None:
        pass


    def test_fails() -> None:
        assert False


    def test_needs_a_tool() -> None:
        needs.require_tool("postflightd-no-such-tool", "the test drives it")


    def test_allowed() -> None:
        needs.unavailable("no such machine", allowance="no-such-machine")


    def test_skipped_by_pytest() -> None:
        pytest.skip("skipped past the helper")
    """
)


def _run(tmp_path: Path, ci: str | None) -> str:
    """pytest on TESTS as .ci/run runs the suite (its report as JUnit XML), then the summary."""
    (tmp_path / "test_inner.py").write_text(TESTS, encoding="utf-8")
    report = tmp_path / "report.xml"
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_ADDOPTS")}
    env["PYTHONPATH"] = str(REPO / "tests")
    if ci is not None:
        env["CI"] = ci
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "helpers.needs"]
    tests = subprocess.run(
        [*argv, "-rs", f"--junitxml={report}", "test_inner.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert tests.returncode == 1, tests.stdout + tests.stderr
    summary = subprocess.run(
        [sys.executable, str(SUMMARY), str(report)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return summary.stdout


def test_away_from_ci_each_skip_is_listed_with_its_reason_and_counted(tmp_path: Path) -> None:
    out = _run(tmp_path, None)
    assert "skipped tests: 3\n" in out, out
    assert (
        "test_inner::test_needs_a_tool: postflightd-no-such-tool is not installed: "
        "the test drives it  [not through helpers.needs]" in out
    ), out
    assert "test_inner::test_allowed: no such machine (allowed under CI: no CI machine" in out
    assert "test_inner::test_skipped_by_pytest: skipped past the helper  [not through" in out
    assert out.rstrip().endswith("ci: 1 passed, 1 failed, 3 skipped"), out


def test_under_ci_only_the_allowed_skip_is_left_and_the_others_are_failures(
    tmp_path: Path,
) -> None:
    out = _run(tmp_path, "true")
    assert "skipped tests: 1\n" in out, out
    assert "test_inner::test_allowed: no such machine (allowed under CI" in out, out
    assert out.rstrip().endswith("ci: 1 passed, 3 failed, 1 skipped"), out


def test_ci_run_writes_the_report_the_summary_reads() -> None:
    """.ci/run asks pytest for the JUnit report and ends with the summary of it."""
    script = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert "--junitxml=$report" in script
    assert 'python3 .ci/summary.py "$report"' in script
