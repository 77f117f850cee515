"""Where the repository and the shared test fixtures are, for tests at any depth of tests/."""

from __future__ import annotations

from pathlib import Path

#: The repository's root (README.md, action.yml, src/, examples/ live there).
REPO = Path(__file__).resolve().parents[2]
#: tests/fixtures/: metadata examples, console returns, transcripts, an old journal.
FIXTURES = REPO / "tests" / "fixtures"
