"""Fixtures of the real-runtime tests: each runtime's pinned release, installed once."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.runtimes import installed


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
