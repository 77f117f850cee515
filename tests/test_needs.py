"""helpers.needs: something the machine lacks is a skip on a developer's machine and a failure
under CI, unless the skip names an allowance that says why CI cannot avoid it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from helpers import needs

INNER = textwrap.dedent(
    """
    import pytest

    from helpers import needs

    needs.ALLOWED_UNDER_CI["no-such-machine"] = "no CI machine has one"


    def test_a_missing_tool() -> None:
        needs.require_tool("postflightd-no-such-tool", "the test drives it")


    def test_a_missing_module() -> None:
        needs.require_module("postflightd_no_such_module", "the test imports it")


    def test_a_missing_feature() -> None:
        needs.require(False, "no such kernel feature")


    def test_a_present_tool() -> None:
        assert needs.require_tool("sh", "the test runs it").endswith("/sh")


    def test_an_allowed_skip() -> None:
        needs.unavailable("no such machine", allowance="no-such-machine")


    def test_an_allowance_nobody_granted() -> None:
        needs.unavailable("no such machine", allowance="granted-by-nobody")


    def test_a_skip_past_the_helper() -> None:
        pytest.skip("skipped by pytest itself")
    """
)


PLUGIN = ("-p", "helpers.needs")


def _pytest(
    tmp_path: Path, name: str, text: str, ci: str | None
) -> subprocess.CompletedProcess[str]:
    """pytest on the test module ``text`` written as ``name``, with ``CI`` as given."""
    (tmp_path / name).write_text(text, encoding="utf-8")
    # Without CI's own PYTEST_ADDOPTS (.ci/run's report file is the outer run's).
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_ADDOPTS")}
    if ci is not None:
        env["CI"] = ci
    env["PYTHONPATH"] = str(Path(__file__).parent)
    return subprocess.run(
        # helpers.needs is a plugin too, as tests/conftest.py makes it: it sees every skip.
        [sys.executable, "-m", "pytest", "-q", "-rfsE", "-p", "no:cacheprovider", *PLUGIN, name],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def _inner(tmp_path: Path, ci: str | None) -> str:
    result = _pytest(tmp_path, "test_inner.py", INNER, ci)
    assert result.returncode == 1, result.stdout + result.stderr
    return result.stdout


@pytest.mark.parametrize("ci", [None, ""])
def test_away_from_ci_a_missing_tool_is_a_skip(tmp_path: Path, ci: str | None) -> None:
    out = _inner(tmp_path, ci)
    assert "1 failed, 1 passed, 5 skipped" in out, out
    assert "postflightd-no-such-tool is not installed: the test drives it" in out, out
    assert "cannot import postflightd_no_such_module" in out, out
    assert "no such machine (allowed under CI: no CI machine has one)" in out, out
    # Each skip is reported at the line of the test that needed something, not in the helper.
    assert "test_inner.py:10: postflightd-no-such-tool is not installed" in out, out
    assert "FAILED test_inner.py::test_an_allowance_nobody_granted - KeyError" in out, out


@pytest.mark.parametrize("ci", ["true", "1"])
def test_under_ci_a_missing_tool_fails_and_only_a_named_allowance_skips(
    tmp_path: Path, ci: str
) -> None:
    out = _inner(tmp_path, ci)
    assert "5 failed, 1 passed, 1 skipped" in out, out
    assert "no such machine (allowed under CI: no CI machine has one)" in out, out
    failure = "under CI this is a failure (.ci/run must provide it)"
    assert f"postflightd-no-such-tool is not installed: the test drives it: {failure}" in out
    assert f"no such kernel feature: {failure}" in out, out
    # A skip that did not go through the helper (pytest.skip, skipif, importorskip) fails too.
    assert f"skipped by pytest itself: {failure}" in out, out


MODULE_LEVEL = textwrap.dedent(
    """
    from helpers import needs

    needs.EXTRAS["nothing-here"] = ("json", "postflightd_no_such_module")
    needs.require_extra("nothing-here", "these tests import it")

    import postflightd_no_such_module  # noqa: E402


    def test_never_collected() -> None:
        assert postflightd_no_such_module
    """
)


@pytest.mark.parametrize("ci", [None, "true"])
def test_a_missing_extra_skips_its_module_away_from_ci_and_fails_under_ci(
    tmp_path: Path, ci: str | None
) -> None:
    """At the top of a test module (before the imports that need it), a missing extra skips
    the whole module with its reason; under CI the module's collection fails."""
    result = _pytest(tmp_path, "test_extra.py", MODULE_LEVEL, ci)
    out = result.stdout + result.stderr
    reason = "cannot import postflightd_no_such_module"
    assert "these tests import it (the [nothing-here] extra)" in out, out
    if ci is None:
        # The only module skipped whole: no test was collected, none failed.
        assert result.returncode == pytest.ExitCode.NO_TESTS_COLLECTED, out
        assert "1 skipped" in out, out
        assert f"SKIPPED [1] test_extra.py:5: {reason}" in out, out
    else:
        assert result.returncode == pytest.ExitCode.INTERRUPTED, out
        assert "1 error" in out, out
        assert "under CI this is a failure" in out, out


def test_each_extra_named_is_one_of_the_projects() -> None:
    with (Path(__file__).parent.parent / "pyproject.toml").open("rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]
    assert set(needs.EXTRAS) <= set(extras)
