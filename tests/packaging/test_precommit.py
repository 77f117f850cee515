"""The pre-commit hook of .pre-commit-hooks.yaml, run by the real `pre-commit try-repo`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.documents import researched_doc
from helpers.needs import require, require_module, require_tool
from helpers.paths import REPO
from helpers.wheelhouse import project_requirements, wheelhouse

PRE_COMMIT = Path(sys.executable).with_name("pre-commit")


def test_hook_manifest_matches_metadata_files_and_passes_file_names() -> None:
    import re

    yaml = require_module("yaml", "PyYAML comes with pre-commit (dev extra)")
    (hook,) = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    assert hook["id"] == "postflightd"
    assert hook["pass_filenames"] is True
    assert hook["entry"].startswith("postflightd scan")
    files = re.compile(hook["files"])
    assert files.search("specs/259_x/.return-meta.json")
    assert files.search(".claude/specs/14_y/.return-meta.json")
    assert not files.search("specs/259_x/reports/research-001.md")
    assert not files.search("specs/259_x/sub/.return-meta.json")


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@pytest.mark.slow
def test_pre_commit_try_repo_fails_an_invalid_file_and_passes_a_stuck_one(tmp_path: Path) -> None:
    require(PRE_COMMIT.exists(), "pre-commit is not installed in this environment (dev extra)")
    require_tool("git", "try-repo reads a git repository")
    # try-repo reads committed files: a snapshot of this tree as its own repository.
    hook_repo = tmp_path / "hook-repo"
    hook_repo.mkdir()
    for name in ("src", "pyproject.toml", "README.md", ".pre-commit-hooks.yaml"):
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, hook_repo / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(source, hook_repo / name)
    # The hook's virtualenv gets postflightd, its build backend and its dependencies from
    # wheels of what this environment has installed, never from a package index: the test
    # needs no network, and whatever fails in pre-commit fails the test.
    try:
        wheels = wheelhouse(project_requirements(hook_repo), tmp_path / "wheels")
    except LookupError as exc:
        pytest.fail(f"{exc}: python3 tasks.py test installs the dev extra")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("PIP_")},
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(wheels),
        "PIP_CONFIG_FILE": os.devnull,  # nor an index, link or constraint of this machine's
        "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"),
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    for repo in (hook_repo, tmp_path / "project"):
        repo.mkdir(exist_ok=True)
        subprocess.run(["git", "init", "-q"], cwd=repo, check=True, env=env)
    _git(hook_repo, "add", ".")
    subprocess.run(["git", "commit", "-qm", "snapshot"], cwd=hook_repo, check=True, env=env)

    project = tmp_path / "project"
    good, stuck, bad = "259_good", "260_stuck", "261_bad"
    (project / "specs" / good / "reports").mkdir(parents=True)
    (project / "specs" / good / "reports" / "research-001.md").write_text("r\n", encoding="utf-8")
    doc = researched_doc(good)
    (project / "specs" / good / ".return-meta.json").write_text(json.dumps(doc), encoding="utf-8")
    in_progress = {
        "status": "in_progress",
        "started_at": "2020-01-01T00:00:00Z",  # long past every timeout: PF602 in a plain scan
        "artifacts": [],
        "partial_progress": {"stage": "initializing", "details": "started"},
        "metadata": researched_doc()["metadata"],
    }
    (project / "specs" / stuck).mkdir()
    (project / "specs" / stuck / ".return-meta.json").write_text(
        json.dumps(in_progress), encoding="utf-8"
    )

    def try_repo(*files: str) -> subprocess.CompletedProcess[str]:
        _git(project, "add", ".")
        return subprocess.run(
            [str(PRE_COMMIT), "try-repo", str(hook_repo), "postflightd", "--files", *files],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
        )

    files = [f"specs/{good}/.return-meta.json", f"specs/{stuck}/.return-meta.json"]
    passed = try_repo(*files)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "Passed" in passed.stdout

    (project / "specs" / bad).mkdir()
    (project / "specs" / bad / ".return-meta.json").write_text(
        '{"status": "completed"}', encoding="utf-8"
    )
    failed = try_repo(*files, f"specs/{bad}/.return-meta.json")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert f"specs/{bad}/.return-meta.json:1:2: PF203 error" in failed.stdout  # the key
    assert "PF602" not in failed.stdout


def test_the_hook_s_description_names_the_range_of_the_rule_codes() -> None:
    """The description's ``PFnnn-PFnnn`` is the registry's first and last code: a new code
    group cannot leave it behind."""
    import re

    from postflightd.rules.findings import RULES

    text = (REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8")
    (named,) = re.findall(r"PF\d{3}-PF\d{3}", text)
    assert named == f"{min(RULES)}-{max(RULES)}"
