"""Where the repository and the shared test fixtures are, for tests at any depth of tests/."""

from __future__ import annotations

from pathlib import Path

#: The repository's root (README.md, action.yml, src/, examples/ live there).
REPO = Path(__file__).resolve().parents[2]
#: tests/fixtures/: metadata examples, console returns, transcripts, an old journal.
FIXTURES = REPO / "tests" / "fixtures"
#: The bundled example project.
EXAMPLE = REPO / "examples" / "project"


def copy_example(dest: Path, source: Path = EXAMPLE) -> Path:
    """A copy of the example project (or a part of it) at ``dest``, its files written now: a
    copy that kept the checkout's times would hold leftovers (PF607) once the checkout is
    older than an operation's timeout (5 minutes for a simple one)."""
    import shutil

    shutil.copytree(source, dest, copy_function=shutil.copy)
    return dest
