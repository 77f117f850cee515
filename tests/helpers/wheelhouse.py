"""A directory of wheels made from the distributions installed in this environment, so that a
test can have pip install a project (its build backend and its dependencies) with no package
index: ``PIP_NO_INDEX=1 PIP_FIND_LINKS=<the directory>``.

Each wheel is the installed files of one distribution (its ``RECORD``) with its dist-info,
under the tags its ``WHEEL`` file names. Files installed outside site-packages (console
scripts, which pip makes again from the entry points) are left out.
"""

from __future__ import annotations

import base64
import hashlib
import tomllib
import zipfile
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

#: What pip writes into a dist-info as it installs: not part of a wheel.
_INSTALLER_FILES = frozenset({"INSTALLER", "REQUESTED", "direct_url.json", "RECORD"})


def project_requirements(project: Path) -> list[str]:
    """What installing ``project`` needs: its build system's requirements and its dependencies."""
    pyproject = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))
    return [*pyproject["build-system"]["requires"], *pyproject["project"]["dependencies"]]


def closure(requirements: Iterable[str]) -> list[metadata.Distribution]:
    """The installed distributions the requirements name, with theirs, recursively.

    A requirement nothing here satisfies raises ``LookupError`` naming it.
    """
    found: dict[str, metadata.Distribution] = {}
    pending = [Requirement(r) for r in requirements]
    while pending:
        requirement = pending.pop()
        name = canonicalize_name(requirement.name)
        if name in found:
            continue
        try:
            dist = metadata.distribution(requirement.name)
        except metadata.PackageNotFoundError:
            raise LookupError(f"{requirement} is not installed in this environment") from None
        if not requirement.specifier.contains(dist.version, prereleases=True):
            raise LookupError(f"{requirement}: {dist.version} is installed in this environment")
        found[name] = dist
        for text in dist.requires or ():
            inner = Requirement(text)
            if inner.marker is None or inner.marker.evaluate({"extra": ""}):
                pending.append(inner)
    return list(found.values())


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def repack(dist: metadata.Distribution, directory: Path) -> Path:
    """One installed distribution as a wheel in ``directory``."""
    files = [f for f in dist.files or () if ".." not in f.parts and "__pycache__" not in f.parts]
    info = next(f.parts[0] for f in files if f.parts[0].endswith(".dist-info"))
    wheel_meta = (dist.read_text("WHEEL") or "").splitlines()
    tags = [line.split(":", 1)[1].strip() for line in wheel_meta if line.startswith("Tag:")]
    pythons, abis, platforms = (
        ".".join(sorted({tag.split("-")[i] for tag in tags})) for i in range(3)
    )
    name = canonicalize_name(dist.metadata["Name"]).replace("-", "_")
    path = directory / f"{name}-{dist.version}-{pythons}-{abis}-{platforms}.whl"
    record = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for file in files:
            arcname = file.as_posix()
            if file.parts[0] == info and file.name in _INSTALLER_FILES:
                continue
            data = Path(str(file.locate())).read_bytes()
            archive.writestr(arcname, data)
            record.append(_record_line(arcname, data))
        record.append(f"{info}/RECORD,,")
        archive.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return path


def wheelhouse(requirements: Iterable[str], directory: Path) -> Path:
    """``directory``, holding a wheel of each installed distribution the requirements need."""
    directory.mkdir(parents=True, exist_ok=True)
    for dist in closure(requirements):
        repack(dist, directory)
    return directory
