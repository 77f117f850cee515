"""One project URL: pyproject.toml's ``[project.urls] Homepage``, read from the installed
package's metadata, and every place that names the project's home agrees with it."""

from __future__ import annotations

import json
import re
import tomllib
from importlib.metadata import metadata
from pathlib import Path

import pytest

import postflightd
from helpers.paths import REPO, copy_example
from postflightd.cli import main

#: Where a URL of the project's own could appear.
PLACES = ("README.md", "action.yml", "pyproject.toml", "mkdocs.yml", "docs", "src")


def _homepage() -> str:
    with (REPO / "pyproject.toml").open("rb") as f:
        url: str = tomllib.load(f)["project"]["urls"]["Homepage"]
    return url


def test_the_installed_metadata_carries_pyprojects_url() -> None:
    url = _homepage()
    assert f"Homepage, {url}" in (metadata("postflightd").get_all("Project-URL") or [])
    assert postflightd.project_url() == url
    assert url == postflightd.PROJECT_URL  # the fallback for a source tree never installed


def test_sarif_output_and_the_schema_use_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _homepage()
    root = tmp_path / "project"
    copy_example(root)
    main(["scan", str(root), "--format", "sarif"])
    sarif = json.loads(capsys.readouterr().out)
    driver = sarif["runs"][0]["tool"]["driver"]
    assert driver["informationUri"] == url
    assert driver["rules"], "the example project has findings, so rules with a helpUri"
    rules_page = (REPO / "docs" / "rules.md").read_text(encoding="utf-8")
    for rule in driver["rules"]:
        code = rule["id"]
        assert rule["helpUri"] == f"{url}/blob/main/docs/rules.md#{code.lower()}"
        # the anchor is the rule's heading in the generated page
        assert f"\n### {code}\n" in rules_page
    assert main(["schema"]) == 0
    assert json.loads(capsys.readouterr().out)["$id"].startswith(url + "/")


def test_every_file_names_the_same_project_url() -> None:
    url = _homepage()
    owner_repo = url.removeprefix("https://github.com/")
    files = [
        path
        for place in PLACES
        for path in ([REPO / place] if (REPO / place).is_file() else (REPO / place).rglob("*"))
        if path.is_file() and path.suffix in {".md", ".yml", ".toml", ".py", ".service"}
    ]
    seen: set[str] = set()
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert "postflightd.dev" not in text, path
        assert "<owner>" not in text, path
        seen.update(re.findall(r"https://github\.com/[\w.-]+/postflightd\b", text))
        for uses in re.findall(r"uses: ([\w.-]+/postflightd)@", text):
            assert uses == owner_repo, path
    assert seen == {url}
    assert f"uses: {owner_repo}@" in (REPO / "action.yml").read_text(encoding="utf-8")
    assert f"link: {url}\n" in (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    for unit in (REPO / "src" / "postflightd" / "data" / "systemd").glob("*.service"):
        assert f"Documentation={url}#" in unit.read_text(encoding="utf-8")
