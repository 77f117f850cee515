"""``postflightd init`` looks before it writes: what a project's workflow already does.

An agent system adopted by postflightd often post-flights its metadata files by hand: a skill,
a command file or a hook script reads ``.return-meta.json`` with jq and deletes it. A stop hook
that applies and deletes the file first leaves that step without its file, and the step then
reports a successful run as failed; so init finds such steps and chooses validator mode.

``survey`` reads the runtimes' directories (``WORKFLOW_DIRS``), errors.json and the metadata
files left in the specs directory. A project's files are untrusted input: everything is read
through the file layer (no link followed, a FIFO never opened for reading), and the number of
entries listed, files read and bytes read each has a cap; reaching one ends the look early
and says so (``Survey.cut_short``), it never fails init.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Final

from postflightd.errors import UsageError
from postflightd.fs.directory import Directory, open_specs
from postflightd.models.files import META_NAME, parse_json
from postflightd.models.terms import Status
from postflightd.project.metafiles import find_metadata_files, task_order

#: Where an agent runtime keeps the prompts and scripts that make up a workflow: Claude Code's
#: skills, agents, commands and hook scripts; OpenCode's, Codex's, Gemini's and Cursor's whole
#: directories; GitHub Copilot's hooks, agents and prompts (not all of ``.github/``).
WORKFLOW_DIRS: Final = (
    ".claude/skills",
    ".claude/agents",
    ".claude/commands",
    ".claude/hooks",
    ".opencode",
    ".codex",
    ".gemini",
    ".github/hooks",
    ".github/agents",
    ".github/prompts",
    ".cursor",
)
#: Directories no workflow's own text is in, however large they grow (OpenCode installs its
#: plugins' packages under ``.opencode/node_modules``).
SKIPPED_DIRS: Final = frozenset({"node_modules", ".git"})

#: The caps on the look: a workflow is tens of files of a few kilobytes; a tree larger than
#: this is looked at up to the cap, and the summary says the rest was not.
MAX_ENTRIES: Final = 20_000
MAX_FILES: Final = 2_000
MAX_FILE_BYTES: Final = 256 * 1024
MAX_TOTAL_BYTES: Final = 16 * 1024 * 1024
MAX_DEPTH: Final = 8
#: Metadata files read to find those left with a final status, and the bytes of each.
MAX_LEFTOVERS_READ: Final = 500
MAX_META_BYTES: Final = 1024 * 1024
#: errors.json is read whole to tell its form, up to this size.
MAX_ERRORS_BYTES: Final = 8 * 1024 * 1024

_META: Final = re.compile(rb"\.return-meta\.json")
#: A read of the file: jq, cat, or the Read tool a prompt tells the agent to use.
_READ: Final = re.compile(rb"\b(?:jq|cat)\b|\bRead\b")
#: A delete of the file: rm, unlink, delete (a script's or a prompt's word).
_DELETE: Final = re.compile(rb"\brm\b|\bunlink|\bdelete", re.IGNORECASE)
#: A name given the file's path (``meta="specs/${t}_${s}/.return-meta.json"``,
#: ``const meta = join(dir, ".return-meta.json")``, ``for meta in specs/*/.return-meta.json``):
#: its later uses are uses of the file.
_ASSIGNED: Final = re.compile(
    rb"\b([A-Za-z_][A-Za-z0-9_]*)\s*=[^=\n][^\n]*\.return-meta\.json"
    rb"|\bfor\s+([A-Za-z_][A-Za-z0-9_]*)\s+in\b[^\n]*\.return-meta\.json"
)
#: Lines before a mention that may hold its verb ("Delete the file:" above the path).
_LOOKBACK: Final = 2


@dataclass(frozen=True, slots=True)
class HandPostflight:
    """A file of the workflow that reads or deletes metadata files itself."""

    path: str  # relative to the project root, with ``/``
    line: int  # the first line that does
    reads: bool
    deletes: bool

    @property
    def does(self) -> str:
        return " and ".join(w for w, on in (("reads", self.reads), ("deletes", self.deletes)) if on)


@dataclass(frozen=True, slots=True)
class Survey:
    """What init found in the project before writing anything."""

    hand_postflights: tuple[HandPostflight, ...] = ()
    #: "array", "envelope", "other" (neither: what it is), or None when there is none.
    errors_form: str | None = None
    errors_note: str = ""
    errors_path: str = ""
    #: metadata files with a final status left in the specs directory (of the first
    #: ``MAX_LEFTOVERS_READ`` read, in task order).
    leftovers: tuple[str, ...] = ()
    #: why the look at the workflow stopped before its end ("" when it did not).
    cut_short: str = ""


def hand_postflight_in(data: bytes) -> tuple[int, bool, bool] | None:
    """(first line, reads, deletes) where ``data`` reads or deletes ``.return-meta.json``: a
    line naming the file (or a name given its path, ``"$meta"``) with jq, cat, Read, rm, unlink
    or delete on it, or on a line up to two above that ends with a colon ("Delete the
    file:" over the path); None when it does neither."""
    if not _META.search(data):
        return None
    uses = [_META]
    for name in sorted({m.group(1) or m.group(2) for m in _ASSIGNED.finditer(data)}):
        quoted = re.escape(name)
        # Shell's $meta and ${meta}; elsewhere the bare name of a const or a local.
        uses.append(re.compile(rb"\$\{?" + quoted + rb"\b|\b" + quoted + rb"\b"))
    lines = data.split(b"\n")
    first = 0
    reads = deletes = False
    for i, line in enumerate(lines):
        if not any(u.search(line) for u in uses):
            continue
        said = [line]
        said += [
            above
            for above in lines[max(0, i - _LOOKBACK) : i]
            if above.strip().rstrip(b"`*").endswith(b":")
        ]
        here_read = any(_READ.search(s) for s in said)
        here_delete = any(_DELETE.search(s) for s in said)
        if (here_read or here_delete) and not first:
            first = i + 1
        reads |= here_read
        deletes |= here_delete
    return (first, reads, deletes) if first else None


class _Budget:
    """What the look may still read; ``cut`` says which cap ended it."""

    def __init__(self) -> None:
        self.entries = MAX_ENTRIES
        self.files = MAX_FILES
        self.bytes = MAX_TOTAL_BYTES
        self.cut = ""
        self.too_large = 0


def survey(root: Directory, specs_dir: str, errors_file: str) -> Survey:
    """Look at the project under ``root`` (the one directory the user named): its workflow's
    hand postflights, errors.json's form, the final metadata files left behind."""
    budget = _Budget()
    found: list[HandPostflight] = []
    for top in WORKFLOW_DIRS:
        for rel, data in _workflow_files(root, top, budget):
            hit = hand_postflight_in(data)
            if hit is not None:
                found.append(HandPostflight(rel, *hit))
    cut = budget.cut
    if budget.too_large:
        skipped = f"{budget.too_large} larger than {MAX_FILE_BYTES // 1024} KiB not read"
        cut = f"{cut}; {skipped}" if cut else skipped
    form, note, errors_path = _errors_form(root, specs_dir, errors_file)
    leftovers = _leftovers(root, specs_dir)
    return Survey(
        hand_postflights=tuple(sorted(found, key=lambda h: h.path)),
        errors_form=form,
        errors_note=note,
        errors_path=errors_path,
        leftovers=leftovers,
        cut_short=cut,
    )


def _open_dir(root: Directory, rel: str) -> Directory | None:
    """``rel`` under ``root``, each component opened without following a link; None when it
    is absent, a link or not a directory (a link is not followed out of the project)."""
    current: Directory | None = None
    try:
        for part in PurePosixPath(rel).parts:
            nxt = (current or root).subdir(part, listable=True)
            if current is not None:
                current.close()
            current = nxt
    except OSError:
        if current is not None:
            current.close()
        return None
    return current


def _workflow_files(root: Directory, top: str, budget: _Budget) -> Iterator[tuple[str, bytes]]:
    """(path relative to the root, first bytes) of each regular file under ``top``, depth
    first by name, within the budget."""
    start = _open_dir(root, top)
    if start is None:
        return
    stack: list[tuple[Directory, str, int]] = [(start, top, 0)]
    try:
        while stack and not budget.cut:
            directory, rel, depth = stack.pop()
            try:
                yield from _files_of(directory, rel, depth, budget, stack)
            finally:
                directory.close()
    finally:
        for directory, _, _ in stack:
            directory.close()


def _files_of(
    directory: Directory,
    rel: str,
    depth: int,
    budget: _Budget,
    stack: list[tuple[Directory, str, int]],
) -> Iterator[tuple[str, bytes]]:
    try:
        entries = directory.names(limit=budget.entries + 1)
    except OSError:
        return
    if len(entries) > budget.entries:
        budget.cut = f"stopped after {MAX_ENTRIES:,} entries"
        entries = entries[: budget.entries]
    budget.entries -= len(entries)
    subdirs: list[str] = []
    for entry in sorted(entries, key=lambda e: e.name):
        try:
            # d_type, never following a link: a link, a FIFO or a device is neither.
            is_dir = entry.is_dir(follow_symlinks=False)
            is_file = not is_dir and entry.is_file(follow_symlinks=False)
        except OSError:
            continue
        if is_dir:
            if depth + 1 < MAX_DEPTH and entry.name not in SKIPPED_DIRS:
                subdirs.append(entry.name)
            continue
        if not is_file:
            continue
        if budget.files <= 0 or budget.bytes <= 0:
            budget.cut = (
                f"stopped after {MAX_FILES:,} files"
                if budget.files <= 0
                else f"stopped after {MAX_TOTAL_BYTES // 1024 // 1024} MiB"
            )
            return
        budget.files -= 1
        try:
            # Opened without following a link and without blocking, and only if regular: a
            # FIFO put in the file's place since the listing is refused, not waited on.
            data, st = directory.read(entry.name, min(MAX_FILE_BYTES, budget.bytes))
        except OSError:
            continue
        if st.st_size > MAX_FILE_BYTES or len(data) > MAX_FILE_BYTES:
            budget.too_large += 1
            continue
        budget.bytes -= len(data)
        yield f"{rel}/{entry.name}", data
    # Pushed in reverse, so that the stack pops them in order of name.
    for name in reversed(subdirs):
        try:
            stack.append((directory.subdir(name, listable=True), f"{rel}/{name}", depth + 1))
        except OSError:
            continue


def _errors_form(root: Directory, specs_dir: str, name: str) -> tuple[str | None, str, str]:
    """errors.json's form (as ``Survey.errors_form``), what else to say of it, its path."""
    path = f"{PurePosixPath(specs_dir.replace(chr(92), '/'))}/{name}"
    try:
        with _open_specs(root, specs_dir) as specs:
            raw, st = specs.read(name, MAX_ERRORS_BYTES)
    except FileNotFoundError:
        return None, "", path
    except OSError as exc:
        return "other", f"not read: {exc.strerror or exc}", path
    if st.st_size > MAX_ERRORS_BYTES or len(raw) > MAX_ERRORS_BYTES:
        return "other", f"larger than {MAX_ERRORS_BYTES // 1024 // 1024} MiB: not read", path
    value, problem = parse_json(raw)
    if problem is not None:
        return "other", f"not JSON: {problem}", path
    if isinstance(value, list):
        return "array", "", path
    if isinstance(value, dict) and isinstance(value.get("errors"), list):
        return "envelope", "", path
    return "other", "neither an array nor an object with an `errors` array", path


def _open_specs(root: Directory, specs_dir: str) -> Directory:
    return open_specs(root.path, specs_dir)


def _leftovers(root: Directory, specs_dir: str) -> tuple[str, ...]:
    """The metadata files whose status is final: a run that ended, its file never applied."""
    try:
        specs = _open_specs(root, specs_dir)
    except OSError:
        return ()
    found: list[str] = []
    prefix = str(PurePosixPath(specs_dir.replace("\\", "/")))
    with specs:
        try:
            refs = [r for r in find_metadata_files(specs) if r.refused is None]
        except UsageError:
            # An unlistable specs directory: scan says so; init has nothing to add.
            return ()
        refs.sort(key=lambda r: task_order(r.task_dir))
        for ref in refs[:MAX_LEFTOVERS_READ]:
            try:
                with specs.subdir(ref.task_dir) as task:
                    raw, st = task.read(META_NAME, MAX_META_BYTES)
            except OSError:
                continue
            if st.st_size > MAX_META_BYTES:
                continue
            value, _ = parse_json(raw)
            status = value.get("status") if isinstance(value, dict) else None
            if status in _FINAL:
                found.append(f"{prefix}/{ref.task_dir}/{META_NAME}")
    return tuple(found)


_FINAL: Final = frozenset(s.value for s in Status if s.is_final)
