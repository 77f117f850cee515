"""The systemd user units that ship in the package, where the user manager looks for them, and
what their sandbox hides.

The units are package data (``postflightd/data/systemd/``), so every install has them: a
wheel installed by pip or pipx as much as a clone.
"""

from __future__ import annotations

import os
from importlib.resources import files
from pathlib import Path, PurePosixPath
from typing import Final

#: One daemon per project root; its instance name is the root, ``systemd_escape_path``'d.
TEMPLATE_UNIT: Final = "postflightd@.service"
#: The daemon for the roots of ``[watch] roots`` in the user's configuration.
ROOTS_UNIT: Final = "postflightd.service"
UNIT_NAMES: Final = (ROOTS_UNIT, TEMPLATE_UNIT)
#: What ``PrivateTmp=yes`` replaces with an empty directory inside the service's sandbox.
PRIVATE_TMP_DIRS: Final = (PurePosixPath("/tmp"), PurePosixPath("/var/tmp"))  # noqa: S108


def packaged_unit(name: str) -> str:
    """The text of a unit shipped in the package (``name`` one of ``UNIT_NAMES``)."""
    if name not in UNIT_NAMES:
        raise ValueError(f"no such unit in the package: {name!r}")
    resource = files("postflightd").joinpath("data", "systemd", name)
    return resource.read_text(encoding="utf-8")


def user_unit_dir() -> Path:
    """Where the systemd user manager reads the user's own units:
    ``$XDG_CONFIG_HOME/systemd/user``, ``~/.config/systemd/user`` when that is unset (or not
    absolute, which the XDG rules say to ignore)."""
    config_home = Path(os.environ.get("XDG_CONFIG_HOME", ""))
    base = config_home if config_home.is_absolute() else Path.home() / ".config"
    return base / "systemd" / "user"


def private_tmp(unit_text: str) -> bool:
    """Whether a unit's ``[Service]`` section sets ``PrivateTmp=`` to true (the last one wins)."""
    section = ""
    value = False
    for raw in unit_text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
        elif section == "Service" and "=" in line:
            key, _, setting = line.partition("=")
            if key.strip() == "PrivateTmp":
                value = setting.strip().lower() in ("yes", "true", "on", "1", "disconnected")
    return value


def hidden_by_private_tmp(root: Path) -> PurePosixPath | None:
    """The directory ``PrivateTmp=yes`` replaces that ``root`` (an absolute, resolved path) is
    in, or None when the sandbox leaves it visible."""
    path = PurePosixPath(root.as_posix())
    for tmp in PRIVATE_TMP_DIRS:
        if path == tmp or tmp in path.parents:
            return tmp
    return None
