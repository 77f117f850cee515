"""One project root, opened once: its specs directory, its state.json and its artifacts.

Every read, write and delete of a project goes through ``Project.specs`` (a
``fs.directory.Directory``), the specs directory opened without following links. A ``Project``
holds that descriptor open: every caller opens it in a ``with`` block, which closes it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from postflightd.config import ROOT_CONFIG_NAME, Config
from postflightd.errors import StateUnusableError, UsageError
from postflightd.fs.directory import Directory, DirIdentity, RefusedError, StoreError, open_specs
from postflightd.fs.locks import LOCK_NAME
from postflightd.project.artifacts import DiskProbe, artifact_probe
from postflightd.project.state import StateView, load_state


@dataclass(frozen=True, slots=True)
class Project:
    """One project root, with what the pipeline needs to read it.

    ``specs`` is the specs directory opened once, without following links
    (``fs.directory``): every read, write and delete of the project goes through it. None when
    there is no specs directory, or when it was refused (``specs_problem`` says why). Use it as
    ``with Project.open(...) as project:``; leaving the block closes ``specs``.
    """

    root: Path
    specs_dir: Path
    state: StateView
    probe: DiskProbe
    specs: Directory | None = None
    specs_problem: str | None = None
    #: opened for a scan, which writes nothing (and never comes back to a task directory).
    read_only: bool = False

    @classmethod
    def open(cls, root: Path, config: Config, *, read_only: bool = False) -> Project:
        """``read_only``: a scan, which reads of state.json only what the rules need."""
        path = root / config.specs_dir
        problem = None
        try:
            specs: Directory | None = open_specs(root, config.specs_dir)
        except FileNotFoundError:
            specs = None
        except RefusedError as exc:
            # Here, not at the top: the rules' registry, which an opened project seldom needs.
            from postflightd.rules.findings import state_unusable_text

            specs = None
            problem = (
                state_unusable_text(f"{path}: the specs directory {exc.strerror}")
                + ": nothing is read or written through it; make it a plain directory inside "
                "the root"
            )
        except OSError as exc:
            raise UsageError(
                f"{path}: cannot list the specs directory: {exc.strerror}; check its permissions"
            ) from None
        pf = config.postflight
        if specs is None:
            missing = f"{config.specs_dir}/ does not exist"
            state = StateView(path / pf.state_file, exists=False, problem=problem or missing)
            return cls(root, path, state, artifact_probe(root), None, problem)
        try:
            if read_only:
                from postflightd.project.scan_state import load_state_for_scan

                # Streamed by name (O_NOFOLLOW | O_NONBLOCK) in the specs directory just
                # opened without links; a scan writes nothing.
                state = load_state_for_scan(specs.child(pf.state_file))
            else:
                others = (pf.todo_file, pf.errors_file, LOCK_NAME)
                state = load_state(specs, pf.state_file, others)
            # Anchored: the probe asks the disk relative to the root; closed with the project.
            probe = artifact_probe(root, anchored=True)
            return cls(root, path, state, probe, specs, problem, read_only)
        except BaseException:
            # The caller gets no Project to close: the specs directory is closed here.
            specs.close()
            raise

    def require_specs(self) -> Directory:
        """The open specs directory; a refused one is PF604 (exit 4), a missing one exit 2."""
        if self.specs is not None:
            return self.specs
        if self.specs_problem is not None:
            raise StateUnusableError(self.specs_problem)
        raise UsageError(f"{self.specs_dir}: no such directory")

    def task_dir(self, path: Path, expect: DirIdentity | None) -> Directory:
        """The task directory the metadata file ``path`` was read from (its identity then was
        ``expect``), opened again: the very same directory.

        One put in its place since (a link: refused; another directory: gone) is never
        entered, so nothing is applied from, or deleted in, a directory other than the one read.
        """
        return self.require_specs().subdir(path.parent.name, expect=expect)

    def close(self) -> None:
        self.probe.close()
        if self.specs is not None:
            self.specs.close()

    def __enter__(self) -> Project:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def why_not_a_directory(path: Path) -> str:
    """What is at ``path`` instead of a directory, as a message says it: nothing, a file, a
    link to nothing, or something else."""
    if path.is_symlink() and not path.exists():
        return "is a symbolic link to nothing"
    if not path.exists():
        return "does not exist"
    if path.is_file():
        return "is a file, not a directory"
    return "is not a directory"


def resolve_root(raw: str | Path) -> Path:
    root = Path(raw).expanduser()
    if not root.is_dir():
        raise UsageError(
            f"{raw}: {why_not_a_directory(root)}; give the project root (the directory holding "
            f"the specs directory or {ROOT_CONFIG_NAME})"
        )
    if not os.access(root, os.R_OK | os.X_OK):
        raise UsageError(f"{raw}: permission denied: cannot read this directory")
    return root.resolve()


def project_marker(root: Path, load: Callable[[list[Path]], Config]) -> str | None:
    """What makes ``root`` a project root (its ``.postflightd.toml``, else its configured specs
    directory), or None when it holds neither."""
    if (root / ROOT_CONFIG_NAME).is_file():
        return ROOT_CONFIG_NAME
    specs_dir = load([root]).specs_dir
    return f"{specs_dir}/" if (root / specs_dir).is_dir() else None


def require_project(raw: str | Path, load: Callable[[list[Path]], Config]) -> Path:
    """An explicit ROOT, resolved; one that is not a project root is a usage error (exit 2):
    scanning nothing there would turn a mistyped path into a green run."""
    root = resolve_root(raw)
    if project_marker(root, load) is None:
        raise UsageError(
            f"{raw}: not a project root: it holds neither {load([root]).specs_dir}/ nor "
            f"{ROOT_CONFIG_NAME}; give the directory that holds them"
        )
    return root


def find_project(load: Callable[[list[Path]], Config], start: Path | None = None) -> Path:
    """The root of the project the current directory (``start``) is in, found as git finds a
    repository: the nearest of it and its ancestors holding ``.postflightd.toml`` or the
    configured specs directory. None found is a usage error (exit 2) naming what was sought."""
    here = (start or Path.cwd()).resolve()
    # Without a .postflightd.toml of its own, a directory's configuration is the user's (or
    # --config's, or $POSTFLIGHTD_CONFIG's): read once, not once per ancestor.
    specs_dir = load([]).specs_dir
    for candidate in (here, *here.parents):
        try:
            if (candidate / ROOT_CONFIG_NAME).is_file() or (candidate / specs_dir).is_dir():
                return candidate
        except OSError:
            continue  # an ancestor that cannot be looked into holds nothing we can use
    raise UsageError(
        f"not inside a project: neither {here} nor any directory above it holds {specs_dir}/ "
        f"or {ROOT_CONFIG_NAME}; cd into the project, or give its ROOT"
    )


def root_of(path: Path, load: Callable[[list[Path]], Config]) -> tuple[Path, Config]:
    """The project root and configuration of ``ROOT/<specs_dir>/<task>/<file>``: the nearest
    directory above the file whose configured specs directory is the one holding its task."""
    specs = path.parent.parent.resolve()
    for candidate in path.parent.parents:
        config = load([candidate])
        if (candidate / config.specs_dir).resolve() == specs:
            return candidate.resolve(), config
    raise UsageError(
        f"{path}: not inside a project (expected ROOT/<specs_dir>/<N>_<slug>/{path.name})"
    )


def foreign_owner(root: Path, config: Config) -> str | None:
    """Why this process leaves the project at ``root`` alone: the root or its specs directory
    belongs to another user than the effective one; None when both are its own, or when the
    user's configuration trusts the root (``[postflight] trusted_roots``, which a project's
    own file cannot set).

    As git refuses a repository of another user (unless ``safe.directory`` names it):
    whatever postflightd wrote there (the lock file, a temporary file, a journal row for it)
    would be this user's, in a tree the owner may then be unable to write to.
    """
    euid = os.geteuid()
    if _trusted(root, config.postflight.trusted_roots):
        return None
    for path in (root, root / config.specs_dir):
        try:
            owner = os.lstat(path).st_uid
        except OSError:
            continue  # nothing there to write to (a missing specs directory is said elsewhere)
        if owner != euid:
            return (
                f"{path}: owned by {_user_name(owner)}, not by {_user_name(euid)} who runs "
                "postflightd: a project of another user is left alone; run postflightd as "
                "its owner (or trust it: [postflight] trusted_roots in your configuration)"
            )
    return None


def _trusted(root: Path, trusted_roots: tuple[str, ...]) -> bool:
    if not trusted_roots:
        return False
    try:
        here = root.resolve()
        return any(Path(entry).resolve() == here for entry in trusted_roots)
    except (OSError, RuntimeError):
        return False


def require_own_project(root: Path, config: Config) -> None:
    """``foreign_owner``'s refusal as a usage error (exit 2): for a command that writes."""
    problem = foreign_owner(root, config)
    if problem is not None:
        raise UsageError(problem)


def _user_name(uid: int) -> str:
    # Here, not at the top: only to word a refusal, and a system without pwd has none to word.
    import pwd

    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


#: How long a CLI run waits for another writer's lock before saying who to look for.
LOCK_TIMEOUT_S = 30.0


def os_problem(exc: OSError | StoreError, what: str) -> str:
    if isinstance(exc, OSError):
        return f"{what}: {exc.strerror or exc}"
    return f"{what}: {exc}"
