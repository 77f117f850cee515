"""``postflightd init``: what setting a project up writes, as pure text transformations.

Each function takes a file's current text (None: the file does not exist) and returns the
text it should have; ``plan_init`` gathers the changes, and the command shows them as a
unified diff before anything is written. Running it again on the result changes nothing.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Final

from postflightd.inert import clip, inert_diff
from postflightd.postflight.json_layout import (
    PLAIN_INDENT,
    LayoutBudget,
    LayoutTooLargeError,
    bounded_indent,
    dump_json,
    layout_limit,
)

if TYPE_CHECKING:
    from postflightd.fs.directory import Directory

HOOK_COMMAND: Final = "postflightd hook claude"
HOOK_EVENTS: Final = ("Stop", "SubagentStop")
GITIGNORE_NAME: Final = ".gitignore"
SETTINGS_PATH: Final = ".claude/settings.json"
CONFIG_NAME: Final = ".postflightd.toml"
#: The most init reads of each file it edits: a .gitignore, settings or configuration is a
#: few kilobytes, and one larger is refused whole rather than read, shown and rewritten.
MAX_INIT_FILE_BYTES: Final = 1024 * 1024


class SettingsShapeError(ValueError):
    """``.claude/settings.json`` is not JSON of the shape the runtime reads: never rewritten."""


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


def _has_our_hook(groups: list[Any]) -> bool:
    for group in groups:
        hooks = group.get("hooks") if isinstance(group, dict) else None
        for hook in hooks if isinstance(hooks, list) else []:
            command = hook.get("command") if isinstance(hook, dict) else None
            # Exactly the command init writes: one that merely contains it (`curl ... | sh;
            # postflightd hook claude`) runs something else too, and is not ours.
            if isinstance(command, str) and command.strip() == HOOK_COMMAND:
                return True
    return False


def _indent_of(text: str) -> str:
    # Keep the file's own indentation: a rewrite that reindents every line hides the change.
    # Up to a sane width: the unit is written once per level on every line, so 2,000 spaces
    # on the first indented line would grow the file with the unit times the depth squared.
    match = re.search(r"\n( +)\S", text)
    return bounded_indent(match.group(1)) if match else PLAIN_INDENT


#: Deeper settings are refused: the runtime's own are a few levels deep, and a rewrite of a
#: deeper document would exhaust the interpreter's stack.
MAX_SETTINGS_DEPTH: Final = 64


def _not_a_number(word: str) -> Any:
    raise ValueError(f"{word} is not a JSON number")


#: Longer integers are refused: the interpreter converts at most a few thousand digits, and
#: no setting the runtime reads is a number that long.
MAX_NUMBER_DIGITS: Final = 100


def _bounded_int(text: str) -> int:
    if len(text) > MAX_NUMBER_DIGITS:
        raise ValueError(f"a number of {len(text):,} digits")
    return int(text)


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"the number {clip(text, 20)} is too large to write back")
    return value


def _load_settings(text: str) -> Any:
    """The parsed settings, or a SettingsShapeError saying what keeps init from rewriting them."""
    try:
        parsed = json.loads(
            text, parse_constant=_not_a_number, parse_float=_finite, parse_int=_bounded_int
        )
    except json.JSONDecodeError as exc:
        raise SettingsShapeError(
            f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
            "fix it, then run init again"
        ) from None
    except RecursionError:
        raise SettingsShapeError(_TOO_DEEP) from None
    except ValueError as exc:
        # A number past what can be converted and written back, NaN, Infinity.
        raise SettingsShapeError(
            f"not JSON init can write back: {clip(str(exc), 120)}; fix it, then run init again"
        ) from None
    _check_writable(parsed)
    return parsed


_TOO_DEEP: Final = f"nested deeper than {MAX_SETTINGS_DEPTH} levels; fix it, then run init again"


def _check_writable(doc: Any) -> None:
    """Refuse what could not be written back as it was read: too deep a document, or a string
    holding a lone surrogate (a ``\\ud800`` escape, which UTF-8 cannot encode)."""
    stack: list[tuple[Any, int]] = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, str):
            if _SURROGATE.search(value):
                raise SettingsShapeError(
                    "a string holds a \\uXXXX escape of a lone surrogate, which is no "
                    "character and cannot be written as UTF-8; fix it, then run init again"
                )
            continue
        if not isinstance(value, dict | list):
            continue
        if depth > MAX_SETTINGS_DEPTH:
            raise SettingsShapeError(_TOO_DEEP)
        items = [*value.keys(), *value.values()] if isinstance(value, dict) else value
        stack.extend((item, depth + 1) for item in items)


_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def settings_with_hook(text: str | None) -> str:
    """The settings with ``postflightd hook claude`` on Stop and SubagentStop, others kept."""
    if text is None or not text.strip():
        doc: dict[str, Any] = {}
        indent = PLAIN_INDENT
    else:
        parsed = _load_settings(text)
        if not isinstance(parsed, dict):
            raise SettingsShapeError("the top-level value is not an object")
        doc = parsed
        indent = _indent_of(text)
    hooks = doc.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise SettingsShapeError('"hooks" is not an object')
    changed = False
    for event in HOOK_EVENTS:
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise SettingsShapeError(f'"hooks.{event}" is not a list')
        if not _has_our_hook(groups):
            groups.append({"hooks": [{"type": "command", "command": HOOK_COMMAND}]})
            changed = True
    if not changed and text is not None:
        return text
    # Written in proportion to what was read: a document nested so deeply that its
    # indentation alone would pass the limit is refused, not written.
    limit = layout_limit(len(text or ""))
    try:
        return dump_json(doc, indent, ensure_ascii=False, budget=LayoutBudget(limit)) + "\n"
    except LayoutTooLargeError:
        raise SettingsShapeError(
            f"nested too deeply to rewrite: its indentation alone would pass {limit:,} "
            "characters; flatten it, or add the hook by hand"
        ) from None


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
# Not here: [journal], [log], and [watch] roots, observer and rescan_interval_s act beyond this
# project; they are set in the user's ~/.config/postflightd/config.toml (an error in this file).

[postflight]
# sync_todo = true               # also update TODO.md

[postflight.status_map]          # file status -> state.json status
# implemented = "completed"

[hook]
# apply = true                   # false: `hook claude` only validates; your workflow applies
"""


def plan_init(current: Mapping[str, str | None], specs_dir: str) -> list[FileChange]:
    """The changes ``init`` makes, given each file's current text (None: absent)."""
    changes: list[FileChange] = []
    wanted = {
        GITIGNORE_NAME: gitignore_with(current.get(GITIGNORE_NAME), ignored_paths(specs_dir)),
        SETTINGS_PATH: settings_with_hook(current.get(SETTINGS_PATH)),
    }
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

    with _parent(root, rel, create=True) as directory:
        try:
            atomic_write(directory, PurePosixPath(rel).name, text.encode("utf-8"))
        except StoreError as exc:
            raise OSError(str(exc)) from None
