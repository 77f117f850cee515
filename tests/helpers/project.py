"""Sample project trees on disk, and the writers of the files an agent leaves in them."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from helpers.documents import task_entry
from postflightd.journal.database import Journal, default_journal_path

#: The name of the file an agent leaves in its task directory.
META = ".return-meta.json"


def project(
    root: Path,
    tasks: int | list[dict[str, Any]] | None = None,
    *,
    todo: bool | str | None = None,
    artifacts: bool | Iterable[int] | None = None,
    config: str | None = None,
) -> Path:
    """A sample project at ``root``: specs/, state.json, TODO.md, task directories.

    ``tasks``: None, specs/ alone (no state.json); a list, those state.json entries; a count
    n, tasks 1..n named ``task{n}`` (directories ``{n}_task{n}``, see ``task_entry``), ready
    for a ``researched`` file: with TODO.md and every report unless ``todo`` or ``artifacts``
    say otherwise. ``todo``: True, a TODO.md with one ``[RESEARCHING]`` section per task; a
    string, TODO.md as written; False, none. ``artifacts``: True for every task, or the task
    numbers whose research report (``specs/{N}_{NAME}/reports/research-001.md``) exists.
    ``config``: the text of the project's ``.postflightd.toml``.
    """
    ready = isinstance(tasks, int)
    todo = ready if todo is None else todo
    artifacts = ready if artifacts is None else artifacts
    specs = root / "specs"
    specs.mkdir(parents=True, exist_ok=True)
    if isinstance(tasks, int):
        tasks = [task_entry(n, f"task{n}") for n in range(1, tasks + 1)]
    entries = tasks or []
    if tasks is not None:
        state = {"next_project_number": 1000, "active_projects": tasks}
        (specs / "state.json").write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
    if todo is True:
        numbers = [t["project_number"] for t in entries]
        sections = "".join(f"### {n}. Task {n}\n- **Status**: [RESEARCHING]\n\n" for n in numbers)
        (specs / "TODO.md").write_text("# TODO\n\n" + sections, encoding="utf-8")
    elif isinstance(todo, str):
        (specs / "TODO.md").write_text(todo, encoding="utf-8")
    wanted = {t["project_number"] for t in entries} if artifacts is True else set(artifacts or ())
    for t in entries:
        if t["project_number"] in wanted:
            write_artifact(
                root, f"specs/{t['project_number']}_{t['project_name']}/reports/research-001.md"
            )
    if config is not None:
        (root / ".postflightd.toml").write_text(config, encoding="utf-8")
    return root


def user_config(text: str) -> Path:
    """Write the user's own configuration file (in the test's isolated config directory)."""
    from postflightd.config import user_config_path

    path = user_config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def write_meta(root: Path, task_dir: str, doc: Any) -> Path:
    """Write ``specs/<task_dir>/.return-meta.json`` (a str is written verbatim)."""
    directory = root / "specs" / task_dir
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / ".return-meta.json"
    text = doc if isinstance(doc, str) else json.dumps(doc, indent=2)
    path.write_text(text, encoding="utf-8")
    return path


def write_artifact(root: Path, rel: str, text: str = "content\n") -> Path:
    """Write the file ``rel`` (a path from the project root), its directories first."""
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# --- reading a project back ----------------------------------------------------------------


def meta_path(root: Path, n: int) -> Path:
    """Task n's metadata file, in the directory ``{n}_task{n}`` of a counted project."""
    return root / "specs" / f"{n}_task{n}" / META


def task_status(root: Path, n: int) -> str | None:
    """Task n's status in state.json (None: no such task)."""
    state = json.loads((root / "specs" / "state.json").read_text(encoding="utf-8"))
    for task in state["active_projects"]:
        if task["project_number"] == n:
            return str(task["status"])
    return None


def error_records(root: Path, kind: str | None = None) -> list[dict[str, Any]]:
    """The records of errors.json (of type ``kind`` if given); none while it does not exist.
    A bare array or an envelope's ``errors``."""
    path = root / "specs" / "errors.json"
    if not path.exists():
        return []
    records = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(records, dict):
        records = records["errors"]
    return [r for r in records if kind is None or r["type"] == kind]


def state_entry(root: Path, n: int) -> dict[str, Any]:
    """Task n's entry of state.json."""
    state = json.loads((root / "specs" / "state.json").read_text(encoding="utf-8"))
    return next(t for t in state["active_projects"] if t["project_number"] == n)


def journal_rows(kind: str) -> list[tuple[str, str | None]]:
    """(file, content) of the journal's rows of one kind (the default journal, as the tests'
    environment places it), read through the Journal itself."""
    with Journal.open(default_journal_path()) as journal:
        return [(r.file, r.content) for r in journal.history(limit=10_000) if r.kind == kind]
