"""Counts in words: the noun agrees with its count, and lists read as a sentence."""

from __future__ import annotations

import pytest

from postflightd.words import counted, joined, plural


@pytest.mark.parametrize(
    ("count", "word", "expected"),
    [
        (0, "file", "0 files"),
        (1, "file", "1 file"),
        (2, "file", "2 files"),
        (1, "entry", "1 entry"),
        (3, "entry", "3 entries"),
        (2, "task entry", "2 task entries"),
        (2, "timed run", "2 timed runs"),
        (1, "invalid metadata file", "1 invalid metadata file"),
    ],
)
def test_the_noun_agrees_with_its_count(count: int, word: str, expected: str) -> None:
    assert counted(count, word) == expected


def test_a_verb_and_an_explicit_plural_agree_too() -> None:
    assert f"1 run {plural(1, 'has')}" == "1 run has"
    assert f"2 runs {plural(2, 'has')}" == "2 runs have"
    assert counted(2, "child", "children") == "2 children"


def test_a_list_reads_as_a_sentence() -> None:
    assert joined([]) == ""
    assert joined(["state.json"]) == "state.json"
    assert joined(["state.json", "TODO.md"]) == "state.json and TODO.md"
    assert joined(["a", "b", "c"]) == "a, b and c"
