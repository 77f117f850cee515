"""reporters/style.py: when output is coloured, and how a path is shown from where we run."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from postflightd.reporters.style import Options, display_path, paint, use_color


def test_color_always_and_never_win_over_the_terminal_and_no_color() -> None:
    """An explicit ``--color always`` overrides NO_COLOR, as no-color.org asks of flags."""
    plain = io.StringIO()
    assert use_color("always", plain, {"NO_COLOR": "1"})
    assert not use_color("never", plain, {})


def test_color_auto_is_a_terminal_without_no_color() -> None:
    main, secondary = os.openpty()
    try:
        with open(secondary, "w", encoding="utf-8", closefd=False) as terminal:
            assert use_color("auto", terminal, {})
            assert use_color("auto", terminal, {"NO_COLOR": ""}), "an empty NO_COLOR is unset"
            assert not use_color("auto", terminal, {"NO_COLOR": "1"})
        assert not use_color("auto", io.StringIO(), {})
    finally:
        os.close(main)
        os.close(secondary)


def test_color_auto_on_a_stream_without_isatty_is_plain() -> None:
    class Bare:
        def write(self, text: str) -> int:
            return len(text)

    assert not use_color("auto", Bare(), {})  # type: ignore[arg-type]


def test_paint_wraps_in_a_style_only_when_on() -> None:
    assert paint("PF101", "error", on=False) == "PF101"
    painted = paint("PF101", "error", on=True)
    assert painted.startswith("\033[") and painted.endswith("\033[0m")
    assert "PF101" in painted
    with pytest.raises(KeyError):
        paint("x", "no-such-style", on=True)


@pytest.mark.parametrize(
    ("file", "cwd", "shown"),
    [
        ("/work/p/specs/259_x/.return-meta.json", "/work/p", "specs/259_x/.return-meta.json"),
        ("/work/p/specs/a.json", "/work/p/", "specs/a.json"),
        # A sibling whose name starts like the directory is not inside it.
        ("/work/pp/specs/a.json", "/work/p", "/work/pp/specs/a.json"),
        ("/elsewhere/a.json", "/work/p", "/elsewhere/a.json"),
        # No current directory (it was removed): absolute.
        ("/work/p/a.json", "", "/work/p/a.json"),
        (Path("/work/p/a b/ü.json"), "/work/p", "a b/ü.json"),
    ],
)
def test_display_path_is_relative_inside_the_directory_and_absolute_outside(
    file: str | Path, cwd: str, shown: str
) -> None:
    assert display_path(file, cwd) == shown


def test_options_default_to_the_current_directory_and_notes_on_stderr(tmp_path: Path) -> None:
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        options = Options()
    finally:
        os.chdir(here)
    assert options.cwd == str(tmp_path)
    assert not options.color
    notes = io.StringIO()
    assert Options(notes=notes).note_stream is notes


def test_options_in_a_removed_directory_show_paths_absolute(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    here = os.getcwd()
    os.chdir(gone)
    try:
        gone.rmdir()
        options = Options()
    finally:
        os.chdir(here)
    assert options.cwd == ""
    assert display_path(tmp_path / "a.json", options.cwd) == str(tmp_path / "a.json")
