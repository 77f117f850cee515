"""Fixtures of the real-runtime tests: each runtime's pinned release, installed once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.runtimes import fail_if_recaptured, installed


@pytest.fixture(autouse=True)
def _no_fixture_rewritten() -> Iterator[None]:
    """A test that re-recorded a fixture (PF_RECORD_FIXTURES=1) fails after it, naming it."""
    yield
    fail_if_recaptured()


@pytest.fixture(scope="session")
def claude_code() -> Path:
    """Claude Code's ``claude``, the release pinned in tests/runtimes/pinned.txt."""
    return installed("claude")


@pytest.fixture(scope="session")
def copilot_cli() -> Path:
    """GitHub Copilot CLI's ``copilot``, the release pinned in tests/runtimes/pinned.txt."""
    return installed("copilot")


@pytest.fixture(scope="session")
def codex_cli() -> Path:
    """Codex CLI's ``codex``, the release pinned in tests/runtimes/pinned.txt."""
    return installed("codex")


@pytest.fixture(scope="session")
def gemini_cli() -> Path:
    """Gemini CLI's ``gemini``, the release pinned in tests/runtimes/pinned.txt."""
    return installed("gemini")


@pytest.fixture(scope="session")
def opencode() -> Path:
    """OpenCode's ``opencode``, the release pinned in tests/runtimes/pinned.txt."""
    return installed("opencode")
