"""``postflightd init``: what setting a project up writes, as pure text transformations.

Each function takes a file's current text (None: the file does not exist) and returns the
text it should have; ``plan_init`` gathers the changes, and the command shows them as a
unified diff before anything is written. Running it again on the result changes nothing.
What goes into each agent runtime's own files is ``hook_files``'.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Final

from postflightd.errors import UsageError
from postflightd.fs.atomic import atomic_write
from postflightd.fs.directory import Directory, RefusedError, StoreError
from postflightd.fs.litter import remove_stale_temps
from postflightd.inert import inert_diff
from postflightd.project.hook_files import (
    CLAUDE,
    PROGRAM,
    Runtime,
    SettingsShapeError,
    hook_config_with,
    packaged_plugin,
)
from postflightd.words import joined

GITIGNORE_NAME: Final = ".gitignore"
CONFIG_NAME: Final = ".postflightd.toml"
#: The most init reads of each file it edits: a .gitignore, settings or configuration is a
#: few kilobytes, and one larger is refused whole rather than read, shown and rewritten.
MAX_INIT_FILE_BYTES: Final = 1024 * 1024


@dataclass(frozen=True, slots=True)
class FileChange:
    """One file ``init`` creates or changes, relative to the project root; ``what`` names
    the change in each hunk of its diff, and a runtime's hook file names its events there."""

    path: str
    old: str | None
    new: str
    what: str = ""
    runtime: Runtime | None = None

    def diff(self) -> str:
        """The change as a unified diff, every line inert (the texts are the project's), each
        hunk's header naming what it adds."""
        before = "/dev/null" if self.old is None else f"a/{self.path}"
        text = inert_diff(self.old or "", self.new, before, f"b/{self.path}")
        return labelled_hunks(text, self._label)

    def _label(self, added: Sequence[int]) -> str:
        if self.runtime is None or not self.runtime.events:
            return self.what
        events = events_at(self.new, self.runtime.events, added)
        on = f" on {joined(list(events))}" if events else ""
        return f"{self.runtime.title}'s stop hook{on}"


_HUNK: Final = re.compile(r"@@ -\d+(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def labelled_hunks(diff: str, label: Callable[[Sequence[int]], str]) -> str:
    """``diff`` with each hunk header followed by ``label(lines it adds)``, the added lines
    numbered from 0 in the new text, as git names a hunk's function after its ``@@``."""
    lines = diff.splitlines(keepends=True)
    out: list[str] = []
    i = 0
    while i < len(lines):
        match = _HUNK.match(lines[i])
        if match is None:
            out.append(lines[i])
            i += 1
            continue
        old_left = int(match.group(1) or 1)
        new_left = int(match.group(3) or 1)
        number = int(match.group(2)) - (1 if new_left else 0)
        added: list[int] = []
        j = i + 1
        # The header's counts say where the hunk ends: a removed line reading "-- x" is a
        # line of the hunk, not the next file's header.
        while j < len(lines) and (old_left or new_left or lines[j].startswith("\\")):
            line = lines[j]
            if line.startswith("+"):
                added.append(number)
            if line.startswith(("+", " ")):
                number += 1
                new_left -= 1
            if line.startswith(("-", " ")):
                old_left -= 1
            j += 1
        name = label(added)
        out.append(f"{lines[i].rstrip(chr(10))} {name}\n" if name else lines[i])
        out.extend(lines[i + 1 : j])
        i = j
    return "".join(out)


def events_at(text: str, events: Sequence[str], lines: Sequence[int]) -> list[str]:
    """Which of ``events`` the given lines of a hook file (as ``dump_json`` lays it out) are
    in: the event whose key line is the nearest above, the lines between indented deeper."""
    rows = text.split("\n")
    keys = tuple((f'"{e}":', e) for e in events)
    found: set[str] = set()
    for n in lines:
        for k in range(min(n, len(rows) - 1), -1, -1):
            stripped = rows[k].lstrip()
            event = next((e for key, e in keys if stripped.startswith(key)), None)
            if event is None:
                continue
            depth = len(rows[k]) - len(stripped)
            between = rows[k + 1 : n]
            if k == n or (
                all(_indent(r) > depth for r in between if r.strip()) and _indent(rows[n]) >= depth
            ):
                found.add(event)
            break
    return [e for e in events if e in found]


def _indent(row: str) -> int:
    return len(row) - len(row.lstrip())


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
#: The last lines of the configuration init writes where the workflow post-flights its
#: metadata files itself: the hook only validates until those steps are gone.
VALIDATOR_HOOK: Final = """\
[hook]
apply = false                    # set by init: a skill, command or hook script here reads or
                                 # deletes metadata files itself; remove those steps
                                 # (docs/adopting.md), then set true to let the hook apply
"""


def config_template(*, apply: bool = True) -> str:
    """The commented ``.postflightd.toml``; ``apply=False``: validator mode set."""
    if apply:
        return CONFIG_TEMPLATE
    head, _, _ = CONFIG_TEMPLATE.rpartition("[hook]\n")
    return head + VALIDATOR_HOOK


def plan_init(
    current: Mapping[str, str | None],
    specs_dir: str,
    runtimes: Sequence[Runtime] = (CLAUDE,),
    *,
    apply: bool = True,
    program: str = PROGRAM,
) -> list[FileChange]:
    """The changes ``init`` makes, given each file's current text (None: absent), with the
    stop hook set up for ``runtimes`` (its command running ``program``) and, in a new
    configuration, ``[hook] apply`` as given. A hook file init cannot rewrite is a
    SettingsShapeError naming the file."""
    wanted: dict[str, tuple[str, str, Runtime | None]] = {
        GITIGNORE_NAME: (
            gitignore_with(current.get(GITIGNORE_NAME), ignored_paths(specs_dir)),
            "the .gitignore lines: postflightd's lock and pid files",
            None,
        ),
    }
    for runtime in runtimes:
        old = current.get(runtime.path)
        if not runtime.events:
            # A plugin file: written when absent; one that differs is the user's, left alone.
            if old is None:
                what = f"the {runtime.title} plugin: the stop hook"
                wanted[runtime.path] = (packaged_plugin(), what, runtime)
            continue
        try:
            wanted[runtime.path] = (hook_config_with(old, runtime, program), "", runtime)
        except SettingsShapeError as exc:
            raise SettingsShapeError(str(exc), runtime.path) from None
    # An existing configuration is the user's: init never rewrites it.
    if current.get(CONFIG_NAME) is None:
        what = (
            "the configuration, every key commented out"
            if apply
            else "the configuration: [hook] apply = false, every other key commented out"
        )
        wanted[CONFIG_NAME] = (config_template(apply=apply), what, None)
    changes: list[FileChange] = []
    for path, (new, what, owner) in wanted.items():
        old = current.get(path)
        if new != old:
            changes.append(FileChange(path, old, new, what, owner))
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
    name = PurePosixPath(rel).name
    with _parent(root, rel, create=True) as directory:
        try:
            # What an init killed mid-write left (its writer is dead): this run finishes it.
            remove_stale_temps(directory, frozenset({name}))
            atomic_write(directory, name, text.encode("utf-8"), crash_label=f"init:{rel}")
        except StoreError as exc:
            raise OSError(str(exc)) from None
