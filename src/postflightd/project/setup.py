"""``postflightd init``: what setting a project up writes, as pure text transformations.

Each function takes a file's current text (None: the file does not exist) and returns the
text it should have; ``plan_init`` gathers the changes, and the command shows them as a
unified diff before anything is written. Running it again on the result changes nothing.
What goes into each agent runtime's own files is ``hook_files``'.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Final

from postflightd.inert import inert_diff
from postflightd.project.hook_files import (
    CLAUDE,
    Runtime,
    SettingsShapeError,
    hook_config_with,
    packaged_plugin,
)

if TYPE_CHECKING:
    from postflightd.fs.directory import Directory

GITIGNORE_NAME: Final = ".gitignore"
CONFIG_NAME: Final = ".postflightd.toml"
#: The most init reads of each file it edits: a .gitignore, settings or configuration is a
#: few kilobytes, and one larger is refused whole rather than read, shown and rewritten.
MAX_INIT_FILE_BYTES: Final = 1024 * 1024


@dataclass(frozen=True, slots=True)
class FileChange:
    """One file ``init`` creates or changes, relative to the project root."""

    path: str
    old: str | None
    new: str

    def diff(self) -> str:
        """The change as a unified diff, every line inert (the texts are the project's)."""
        before = "/dev/null" if self.old is None else f"a/{self.path}"
        return inert_diff(self.old or "", self.new, before, f"b/{self.path}")


def ignored_paths(specs_dir: str) -> tuple[str, ...]:
    """The files postflightd creates inside a project, which must not be committed."""
    specs = PurePosixPath(specs_dir.replace("\\", "/"))
    return (str(specs / ".state.lock"), str(specs / ".postflightd.pid"))


def gitignore_with(text: str | None, entries: tuple[str, ...]) -> str:
    """``text`` plus each entry not already listed (as ``x``, ``/x`` or ``x/``)."""
    current = text or ""
    listed = {line.strip().lstrip("/") for line in current.splitlines()}
    missing = [e for e in entries if e not in listed]
    if not missing:
        return current
    prefix = current if not current or current.endswith("\n") else current + "\n"
    block = "# postflightd: its lock and pid files\n" + "".join(f"{e}\n" for e in missing)
    return prefix + ("\n" if prefix.strip() else "") + block


CONFIG_TEMPLATE: Final = """\
# postflightd configuration for this project (written by `postflightd init`).
# Every key is optional; each line below shows the default, commented out: uncomment to change.
# `postflightd rules` lists the codes; `postflightd rules PF405` explains one.

# specs_dir = "specs"            # where the task directories live, relative to this root

[validation]
# select = []                    # only these codes count (empty: all); prefixes work: "PF3"
# ignore = []                    # codes never reported, e.g. ["PF205", "PF207"]
# strict = false                 # warnings fail too (files with warnings are not post-flighted)
# max_file_bytes = 1048576       # larger metadata files are refused (PF101)
# check_artifacts = true         # PF502/PF503 look at the disk

[validation.severity]            # per-code severity overrides ("error" or "warning")
# PF307 = "error"                # enforce errors on partial/failed/blocked
# PF400 = "error"                # enforce the session id format

[timeouts]                       # seconds an in_progress run may take before it is stuck (PF602)
# research = 3600
# planning = 1800
# implementation = 7200
# simple = 300
# default = 3600                 # any operation not recognised

[watch]
# settle_ms = 200                # a file that does not parse is retried until quiet this long
# heal_window_s = 600            # outcomes a writer that ignored the lock reverted this recently
                                 # are re-applied from the journal; 0 turns healing off
# Not here: [journal], [log], and [watch] roots, observer and rescan_interval_s act beyond this
# project; they are set in the user's ~/.config/postflightd/config.toml (an error in this file).

[postflight]
# sync_todo = true               # also update TODO.md
# state_file = "state.json"      # these three live inside specs_dir: plain file names
# todo_file = "TODO.md"
# errors_file = "errors.json"

[postflight.status_map]          # file status -> state.json status
# researched = "researched"
# planned = "planned"
# implemented = "completed"
# blocked = "blocked"

[hook]
# apply = true                   # false: `hook claude` only validates; your workflow applies
"""


def plan_init(
    current: Mapping[str, str | None], specs_dir: str, runtimes: Sequence[Runtime] = (CLAUDE,)
) -> list[FileChange]:
    """The changes ``init`` makes, given each file's current text (None: absent), with the
    stop hook set up for ``runtimes``. A hook file init cannot rewrite is a
    SettingsShapeError naming the file."""
    changes: list[FileChange] = []
    wanted = {
        GITIGNORE_NAME: gitignore_with(current.get(GITIGNORE_NAME), ignored_paths(specs_dir)),
    }
    for runtime in runtimes:
        old = current.get(runtime.path)
        if not runtime.events:
            # A plugin file: written when absent; one that differs is the user's, left alone.
            if old is None:
                wanted[runtime.path] = packaged_plugin()
            continue
        try:
            wanted[runtime.path] = hook_config_with(old, runtime)
        except SettingsShapeError as exc:
            raise SettingsShapeError(str(exc), runtime.path) from None
    # An existing configuration is the user's: init never rewrites it.
    if current.get(CONFIG_NAME) is None:
        wanted[CONFIG_NAME] = CONFIG_TEMPLATE
    for path, new in wanted.items():
        old = current.get(path)
        if new != old:
            changes.append(FileChange(path, old, new))
    return changes


def systemd_escape_path(path: str) -> str:
    """``systemd-escape --path PATH``: the instance name of ``postflightd@.service``."""
    parts = [p for p in path.split("/") if p]
    if not parts:
        return "-"
    out: list[str] = []
    for i, ch in enumerate("/".join(parts)):
        if ch == "/":
            out.append("-")
        elif ch.isascii() and (ch.isalnum() or ch in ":_.") and not (i == 0 and ch == "."):
            out.append(ch)
        else:
            # Only a leading dot is escaped (a unit name may not start with one).
            out.append("".join(f"\\x{b:02x}" for b in ch.encode("utf-8")))
    return "".join(out)


# --- I/O edge: read, show, ask, write ------------------------------------------------------


def _parent(root: Path, rel: str, *, create: bool) -> Directory:
    """The directory holding ``rel`` (``.claude`` for its settings), opened through the file
    layer: a directory on the way that is a link (out of the project) is refused, one that is
    missing is created, or with ``create=False`` is a FileNotFoundError."""
    import os

    from postflightd.fs.directory import Directory

    current = Directory.anchor(root)
    try:
        for part in PurePosixPath(rel).parts[:-1]:
            try:
                nxt = current.subdir(part, listable=True)
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(part, 0o777, dir_fd=current.fd)
                nxt = current.subdir(part, listable=True)
            current.close()
            current = nxt
    except BaseException:
        current.close()
        raise
    return current


def read_project_text(root: Path, rel: str) -> str | None:
    """The text of ``rel`` under ``root`` (None: absent), read through the file layer."""
    from postflightd.errors import UsageError
    from postflightd.fs.directory import RefusedError

    path = root / rel
    try:
        with _parent(root, rel, create=False) as directory:
            raw, st = directory.read(PurePosixPath(rel).name, MAX_INIT_FILE_BYTES)
    except FileNotFoundError:
        return None
    except RefusedError as exc:
        # Writing would replace the link with a file (a dotfile manager's link, say), or
        # write out of the project: the user edits the target by hand instead.
        why = "init does not write through links" if exc.kind == "a symbolic link" else ""
        raise UsageError(f"{exc}; {why or 'init leaves it alone'}") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if st.st_size > MAX_INIT_FILE_BYTES or len(raw) > MAX_INIT_FILE_BYTES:
        raise UsageError(
            f"{path}: larger than {MAX_INIT_FILE_BYTES // 1024 // 1024} MiB "
            f"({max(st.st_size, len(raw)):,} bytes); init leaves it alone and writes nothing"
        )
    if b"\0" in raw:
        raise UsageError(f"{path}: holds NUL bytes, not text; init leaves it alone")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not UTF-8 text; init leaves it alone") from None


def write_project_text(root: Path, rel: str, text: str) -> None:
    """Replace ``rel`` atomically (temporary file, fsync, rename), keeping its permissions."""
    from postflightd.fs.atomic import atomic_write
    from postflightd.fs.directory import StoreError
    from postflightd.fs.litter import remove_stale_temps

    name = PurePosixPath(rel).name
    with _parent(root, rel, create=True) as directory:
        try:
            # What an init killed mid-write left (its writer is dead): this run finishes it.
            remove_stale_temps(directory, frozenset({name}))
            atomic_write(directory, name, text.encode("utf-8"), crash_label=f"init:{rel}")
        except StoreError as exc:
            raise OSError(str(exc)) from None
