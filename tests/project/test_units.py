"""The packaged systemd units, the user unit directory, and what PrivateTmp hides."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.paths import REPO
from postflightd.project.units import (
    UNIT_NAMES,
    hidden_by_private_tmp,
    packaged_unit,
    private_tmp,
    user_unit_dir,
)


@pytest.mark.parametrize("name", UNIT_NAMES)
def test_packaged_units_are_the_files_in_the_source_tree(name: str) -> None:
    source = REPO / "src" / "postflightd" / "data" / "systemd" / name
    assert packaged_unit(name) == source.read_text(encoding="utf-8")
    assert private_tmp(packaged_unit(name))


def test_an_unknown_unit_name_is_refused() -> None:
    with pytest.raises(ValueError, match="no such unit"):
        packaged_unit("../../cli.py")


def test_user_unit_dir_follows_xdg_config_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    assert user_unit_dir() == tmp_path / "cfg" / "systemd" / "user"
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative/ignored")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert user_unit_dir() == tmp_path / "home" / ".config" / "systemd" / "user"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[Service]\nPrivateTmp=yes\n", True),
        ("[Service]\nPrivateTmp=yes\nPrivateTmp=no\n", False),
        ("[Service]\n# PrivateTmp=yes\n", False),
        ("[Unit]\nPrivateTmp=yes\n[Service]\nType=notify\n", False),
        ("[Service]\nPrivateTmp = true\n", True),
    ],
)
def test_private_tmp_reads_the_service_section(text: str, expected: bool) -> None:
    assert private_tmp(text) is expected


@pytest.mark.parametrize(
    ("root", "hidden"),
    [
        ("/tmp/demo", "/tmp"),
        ("/tmp", "/tmp"),
        ("/var/tmp/x/y", "/var/tmp"),
        ("/home/me/src/proj", None),
        ("/tmpfoo/proj", None),
    ],
)
def test_hidden_by_private_tmp(root: str, hidden: str | None) -> None:
    found = hidden_by_private_tmp(Path(root))
    assert (None if found is None else str(found)) == hidden
