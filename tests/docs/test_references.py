"""Nothing in the repository points outside it: no comment, docstring, test, benchmark or doc
cites a specification, a source document or a tracker number that a reader of the repository
cannot open. Each says the reason itself, or links a page of docs/."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.paths import REPO

#: What points outside, as words: identifiers that merely contain the letters (SPECS,
#: ``spec_from_file_location``, a random number generator's ``seed=``) do not match.
OUTSIDE = re.compile(
    "|".join(
        (
            r"\bSPEC(?:\.md)?\b",
            r"(?i:\bthe spec(?:'s)?\b)",
            r"(?i:\bseeds?[\s_-]*\d{3})",
            r"(?i:(?<![(\w])(?<!random )(?<!fixed )seeds?(?:'s|')?\b(?!\s*[:=)]))",
            r"\bSTYLE\.md\b",
            r"(?i:\bissues?[\s-]*#?\d+)",
            r"(?i:\bsection\s+\d+(?:\.\d+)*\b)",
            r"(?i:\bshared/(?:seeds|examples|hooks)\b)",
        )
    )
)

#: Where to look; a directory is read whole.
PLACES = {
    "src": ["src"],
    "tests": ["tests"],
    "bench": ["bench"],
    "examples": ["examples"],
    "top-level files": [
        "tasks.py",
        "pyproject.toml",
        "mkdocs.yml",
        "action.yml",
        "config.example.toml",
        ".pre-commit-hooks.yaml",
        ".ci",
    ],
    "docs": ["docs"],
    "README.md": ["README.md"],
}
SKIPPED_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis"}


def _files(place: str) -> Iterator[Path]:
    for name in PLACES[place]:
        path = REPO / name
        if path.is_file():
            yield path
        elif path.is_dir():
            for found in sorted(path.rglob("*")):
                if found.is_file() and not SKIPPED_DIRS & set(found.relative_to(REPO).parts):
                    yield found


def _hits(path: Path) -> Iterator[str]:
    relative = path.relative_to(REPO).as_posix()
    if OUTSIDE.search(relative):
        yield f"{relative}: the name itself"
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return  # binary (a journal fixture): no prose to cite anything
    for number, line in enumerate(text.splitlines(), 1):
        for match in OUTSIDE.finditer(line):
            yield f"{relative}:{number}: {match.group(0)!r} in {line.strip()[:120]!r}"


@pytest.mark.parametrize("place", list(PLACES))
def test_nothing_cites_a_document_outside_the_repository(place: str) -> None:
    this_file = Path(__file__).resolve()
    hits = [hit for path in _files(place) if path.resolve() != this_file for hit in _hits(path)]
    assert not hits, "say the reason itself, or link a page of docs/:\n" + "\n".join(hits)


@pytest.mark.parametrize(
    "line",
    [
        "the exit codes (SPEC 4)",
        "see SPEC.md",
        "seed 004's examples",
        "tests/fixtures/seed004/a.json",
        "as the seeds' form writes it",
        "the healer (issue 10)",
        "main vs. issue-1415",
        "rules of section 2.1",
        "read STYLE.md",
        "the spec's own numbers",
        "../shared/examples/todo-forms.md",
    ],
)
def test_each_kind_of_outside_reference_is_caught(line: str) -> None:
    assert OUTSIDE.search(line)


@pytest.mark.parametrize(
    "line",
    [
        'SPECS = "/p/specs"',
        "loader = importlib.util.spec_from_file_location(name, path)",
        "def generate(state: Path, runs: int, seed: int = 14) -> int:",
        "rng = random.Random(seed)",
        "a fixed seed makes the run repeatable",
        "JWT tokens are issued by the server",
        "_MAYBE_SPECIAL = ('#',)",
        "each section of TODO.md",
    ],
)
def test_identifiers_and_ordinary_words_are_not_references(line: str) -> None:
    assert not OUTSIDE.search(line)


def test_the_readme_quotes_the_dashboard_s_content_security_policy_as_sent() -> None:
    from postflightd.serve.security import PAGE_CSP

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    assert f"`Content-Security-Policy: {PAGE_CSP}`" in readme
