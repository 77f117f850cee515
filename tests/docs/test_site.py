"""The documentation site builds in strict mode: a broken link, a missing anchor or a page
left out of the nav fails the build, so the docs cannot rot unnoticed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from helpers.paths import REPO


def _build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *(sys.executable, "-m", "mkdocs", "build", "--strict"),
            *("--config-file", str(config), "--site-dir", str(site)),
        ],
        capture_output=True,
        text=True,
        check=False,
        # Material's banner about MkDocs 2 says nothing about this site.
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )


def test_the_site_builds_in_strict_mode_without_a_warning(tmp_path: Path) -> None:
    built = _build(REPO / "mkdocs.yml", tmp_path / "site")
    assert built.returncode == 0, built.stderr
    assert "WARNING" not in built.stderr, built.stderr
    assert (tmp_path / "site" / "rules" / "index.html").is_file()
    assert (tmp_path / "site" / "commands" / "index.html").is_file()


def test_a_broken_link_a_missing_anchor_and_a_page_outside_the_nav_fail_the_build(
    tmp_path: Path,
) -> None:
    """The configuration's validation settings make each of these an error, not a note."""
    shutil.copy(REPO / "mkdocs.yml", tmp_path / "mkdocs.yml")
    shutil.copytree(REPO / "docs", tmp_path / "docs")
    (tmp_path / "docs" / "stray.md").write_text("# Not in the nav\n", encoding="utf-8")
    with (tmp_path / "docs" / "safety.md").open("a", encoding="utf-8") as page:
        page.write("\nSee [the gone page](gone.md) and [no such rule](rules.md#pf999).\n")
    built = _build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert built.returncode != 0
    assert "'gone.md'" in built.stderr, built.stderr
    assert "#pf999" in built.stderr, built.stderr
    assert "stray.md" in built.stderr, built.stderr
