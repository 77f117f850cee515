"""The documentation site builds in strict mode: a broken link, a missing anchor or a page
left out of the nav fails the build, so the docs cannot rot unnoticed."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.paths import REPO
from postflightd.rules.findings import RULES


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


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site as `python3 tasks.py docs` builds it, once for the tests that read it."""
    site = tmp_path_factory.mktemp("docs") / "site"
    built = _build(REPO / "mkdocs.yml", site)
    assert built.returncode == 0, built.stderr
    assert "WARNING" not in built.stderr, built.stderr
    return site


def test_the_site_builds_in_strict_mode_without_a_warning(site: Path) -> None:
    assert (site / "rules" / "index.html").is_file()
    assert (site / "commands" / "index.html").is_file()


#: Where a page would reach outside the site: a script, a stylesheet or a font by URL.
_FETCHED = re.compile(
    r"<script[^>]*\ssrc=\"(https?:)?//|<link[^>]*\shref=\"(https?:)?//|@import\s+(url\()?[\"']?(https?:)?//"
    r"|url\([\"']?(https?:)?//"
)


def test_the_site_loads_nothing_from_outside_itself(site: Path) -> None:
    """No Google Fonts, no api.github.com (Material's repository facts), no script, stylesheet
    or font from another origin: reading the docs of a tool that touches nothing outside the
    project sends nothing anywhere either."""
    pages = [p for p in site.rglob("*") if p.suffix in {".html", ".css"}]
    assert len(pages) > 20
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for origin in ("fonts.googleapis.com", "fonts.gstatic.com", "api.github.com"):
            assert origin not in text, (page, origin)
        assert not _FETCHED.search(text), (page, _FETCHED.search(text))
        # Material's script asks api.github.com for stars and forks when a page has this.
        assert 'data-md-component="source"' not in text, page


def test_the_rules_page_titles_each_code_and_shows_examples_whole(site: Path) -> None:
    page = (site / "rules" / "index.html").read_text(encoding="utf-8")
    for rule in RULES.values():
        # The anchor stays the code: scan's SARIF links to it.
        heading = re.search(rf'<h3 id="{rule.code.lower()}">([^<]*)', page)
        assert heading is not None, rule.code
        assert heading[1].startswith(f"{rule.code} — "), heading[1]
    # The table of contents lists titles, not bare codes.
    assert re.search(
        r'<a href="#pf405" class="md-nav__link">\s*<span class="md-ellipsis">\s*'
        r"PF405 — session_id differs from the expected session\s*<",
        page,
    )
    # A long line of an example wraps instead of hiding its end behind a scroll bar.
    css = "".join(p.read_text(encoding="utf-8") for p in (site / "stylesheets").glob("*.css"))
    assert "white-space: pre-wrap" in css
    assert re.search(r'<link[^>]*href="\.\./stylesheets/extra\.css"', page)


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
