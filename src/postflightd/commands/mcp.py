"""``postflightd mcp``: a stdio MCP server an agent asks about its own metadata file before it
writes it, so that a wrong ``.return-meta.json`` is fixed before the stop hook sends it back.

The project is the one the server starts in, found as ``scan`` finds it. The tools are the
commands' own code: ``check_metadata`` is ``scan``'s ``check_file`` and text reporter,
``task_state`` is ``status``'s ``file_status``, ``explain_rule`` is ``rules CODE``,
``metadata_schema`` is ``schema``. Nothing is written: every read goes through the project's
file layer (the specs directory opened without links, bounded reads); a call it cannot answer
is a UsageError, which the server answers as an MCP error. The protocol is ``mcp_server``'s,
the ``[mcp]`` extra (docs/mcp.md).
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import os
import stat
from collections.abc import Mapping
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from postflightd.config import Config, load_config
from postflightd.errors import ExitCode, UsageError
from postflightd.fs.directory import Directory, RefusedError
from postflightd.inert import clip, inert
from postflightd.models.files import MARKER_NAME, META_NAME, parse_json
from postflightd.project.metafiles import MetaFileRef, parse_task_dir
from postflightd.project.root import Project, find_project

if TYPE_CHECKING:
    from postflightd.pipeline.results import FileReport

# The checks, the reporter and the status code are imported by the call that needs them, not
# here: a runtime waits for the server's answer to `initialize` before the agent starts, and
# none of that code is wanted before the first tools/call (docs/benchmarks.md).

INSTALL_HINT: Final = (
    "install postflightd again with it, from the directory holding your clone: "
    "pipx install --force './postflightd[mcp]', or pip install './postflightd[mcp]' "
    "into the environment postflightd runs in"
)
#: The longest path argument looked at: a path in a project is a few hundred characters.
MAX_PATH_CHARS: Final = 4096

INSTRUCTIONS: Final = (
    "postflightd checks the .return-meta.json an agent writes at the end of its run "
    "(specs/{N}_{SLUG}/.return-meta.json). Before writing your final metadata file, call "
    "check_metadata with your task number and the document you are about to write, and "
    "write it only once it has no error: each finding carries its fix. task_state says "
    "which session your file must report; explain_rule explains a PF code; metadata_schema "
    "is the file's JSON Schema. Nothing here writes anything."
)

_TASK: Final = {
    "type": ["integer", "string"],
    "description": "the task number (259), or a path in the project: its task directory "
    "(specs/259_prove_completeness) or its metadata file",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``mcp`` takes no options."""


def run(args: argparse.Namespace) -> int:
    return run_mcp()


def run_mcp() -> int:
    """Serve the project the current directory is in over stdin and stdout, until the client
    closes them (exit 0); 2 without the ``[mcp]`` extra or outside a project."""
    # The SDK's import builds some 550 pydantic models, nearly all of the time before the
    # answer to `initialize`; the collector's passes over the growing heap meanwhile find
    # next to nothing to free (3.6 % of the import's instructions, 0.6 MB more at its peak).
    gc.disable()
    try:
        from postflightd.mcp_server.server import Tool, serve_stdio
    except ImportError as exc:
        raise UsageError(
            f"mcp needs the mcp extra ({exc.name or 'mcp'} not installed): {INSTALL_HINT}"
        ) from None
    finally:
        gc.enable()
    served = Served.here()
    tools = [
        Tool(
            "check_metadata",
            "Check a task's metadata file (.return-meta.json) as `postflightd scan` does, or "
            "the document you are about to write there, against the project's state.json, the "
            "task's .postflight-pending marker and the artifacts on disk. Returns each finding "
            "with its fix and the text `postflightd scan` prints. Writes nothing.",
            {
                "type": "object",
                "properties": {
                    "task": _TASK,
                    "document": {
                        "type": ["string", "object"],
                        "description": "the metadata you are about to write (its JSON text, or "
                        "the object); left out: the file on disk is checked",
                    },
                },
                "required": ["task"],
                "additionalProperties": False,
            },
            served.check_metadata,
        ),
        Tool(
            "task_state",
            "A task's entry in state.json, the session a new run must report in "
            "metadata.session_id, its .postflight-pending marker, and its metadata file's "
            "current state as `postflightd status` shows it. Writes nothing.",
            {
                "type": "object",
                "properties": {"task": _TASK},
                "required": ["task"],
                "additionalProperties": False,
            },
            served.task_state,
        ),
        Tool(
            "explain_rule",
            "What a finding's code means and how to fix it: `postflightd rules CODE`.",
            {
                "type": "object",
                "properties": {"code": {"type": "string", "description": "PF405, or 405"}},
                "required": ["code"],
                "additionalProperties": False,
            },
            explain_rule,
        ),
        Tool(
            "metadata_schema",
            "The JSON Schema of the metadata file: `postflightd schema`.",
            {"type": "object", "properties": {}, "additionalProperties": False},
            metadata_schema,
        ),
    ]
    serve_stdio(tools, INSTRUCTIONS)
    return int(ExitCode.OK)


def _only(arguments: Mapping[str, Any], *names: str) -> None:
    extra = sorted(set(arguments) - set(names))
    if extra:
        raise UsageError(f"unknown argument {inert(clip(extra[0]))}: this tool takes {names}")


def _text_argument(arguments: Mapping[str, Any], name: str) -> str:
    value = arguments.get(name)
    if not isinstance(value, str):
        raise UsageError(f"{name}: a string is wanted, not {_kind(value)}")
    return value


def _kind(value: Any) -> str:
    return "nothing" if value is None else f"a JSON {type(value).__name__}"


def explain_rule(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """``postflightd rules CODE``'s text for the code named."""
    from postflightd.commands.rules import rule_code
    from postflightd.rules.explanations import explain
    from postflightd.rules.findings import RULES

    _only(arguments, "code")
    code = rule_code(clip(_text_argument(arguments, "code"), 40))
    rule = RULES[code]
    return {
        "code": code,
        "severity": rule.severity.value,
        "summary": rule.summary,
        "text": explain(code),
    }


def metadata_schema(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """``postflightd schema``'s JSON Schema."""
    from postflightd.models.metadata import json_schema

    _only(arguments)
    return json_schema()


class Served:
    """The project this server answers for: its root and configuration."""

    def __init__(self, root: Path, config: Config) -> None:
        self.root, self.config = root, config

    @classmethod
    def here(cls) -> Served:
        """The project the current directory is in, found as ``scan`` finds it."""
        root = find_project(lambda paths: load_config(None, paths))
        return cls(root, load_config(None, [root]))

    # --- the task a call names ------------------------------------------------------------

    def _task_dir(self, project: Project, task: Any) -> str:
        """The name of the task directory ``task`` names (a number, or a path inside the
        project's specs directory); a UsageError for anything else."""
        specs = project.require_specs()
        if isinstance(task, str) and task.strip().isdigit() and task.strip().isascii():
            task = int(task.strip())
        if isinstance(task, bool) or not isinstance(task, int | str):
            raise UsageError(f"task: a task number or a path is wanted, not {_kind(task)}")
        if isinstance(task, int):
            names = sorted(
                e.name for e in specs.names() if (p := parse_task_dir(e.name)) and p[0] == task
            )
            if not names:
                raise UsageError(
                    f"task {task}: no task directory {self.config.specs_dir}/{task}_*/ in "
                    f"{inert(str(self.root))}"
                )
            return names[0]
        return self._task_dir_of_path(task)

    def _task_dir_of_path(self, text: str) -> str:
        if not text or len(text) > MAX_PATH_CHARS or "\0" in text:
            raise UsageError("task: not a path in this project")
        given = Path(text).expanduser()
        absolute = given if given.is_absolute() else self.root / given
        # Judged by its words: nothing is looked up until the specs directory is opened
        # without links, so a link on the way is refused there, never followed.
        specs = os.path.normpath(self.root / self.config.specs_dir)
        path = os.path.normpath(absolute)
        inside = list(Path(path[len(specs) + 1 :]).parts) if path.startswith(specs + os.sep) else []
        if inside and inside[-1] == META_NAME:
            inside.pop()
        if len(inside) != 1 or inside[0] in (".", ".."):
            raise UsageError(
                f"{inert(clip(text))}: not a task directory of this project, nor its "
                f"{META_NAME}: give {self.config.specs_dir}/{{N}}_{{SLUG}} under "
                f"{inert(str(self.root))}, or the task number"
            )
        return inside[0]

    def _open_task(self, project: Project, name: str) -> Directory:
        try:
            return project.require_specs().subdir(name, listable=False)
        except FileNotFoundError:
            raise UsageError(
                f"{self.config.specs_dir}/{inert(clip(name))}: no such task directory"
            ) from None
        except RefusedError as exc:
            raise UsageError(f"{inert(str(exc))}: refused, never followed") from None

    def _ref(self, project: Project, name: str) -> MetaFileRef:
        return MetaFileRef(str(project.specs_dir / name / META_NAME), name)

    # --- the tools --------------------------------------------------------------------------

    def check_metadata(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The findings of a task's metadata file, or of the document given in its place."""
        from postflightd.commands.arguments import policy
        from postflightd.pipeline.check import check_file
        from postflightd.reporters.scan import positioned

        _only(arguments, "task", "document")
        raw = self._document(arguments.get("document"))
        config = self.config
        with Project.open(self.root, config) as project:
            name = self._task_dir(project, arguments.get("task"))
            with self._open_task(project, name) as task:
                on_disk = task.lstat(META_NAME)
            if raw is None:
                if on_disk is None:
                    raise UsageError(
                        f"{config.specs_dir}/{inert(name)}/{META_NAME} does not exist yet: "
                        "give the document you are about to write"
                    )
                if stat.S_ISLNK(on_disk.st_mode):
                    raise UsageError(
                        f"{config.specs_dir}/{inert(name)}/{META_NAME} is a symbolic link: "
                        "refused, never followed; write a regular file"
                    )
            chosen = policy(config, (), ())
            now = datetime.now(UTC)
            report = check_file(
                project, self._ref(project, name), config, chosen, now, document=raw
            )
        return {
            "task": report.task,
            "file": report.rel_path,
            "checked": "the document given" if raw is not None else "the file on disk",
            "valid": report.valid,
            "findings": [_finding(f) for f in positioned(report)],
            "text": self._scan_text(report),
            "written": False,
        }

    def _document(self, document: Any) -> bytes | None:
        """The document's bytes as a file would hold them; a UsageError for one too large
        for the project's ``validation.max_file_bytes`` or not JSON."""
        if document is None:
            return None
        limit = self.config.validation.max_file_bytes
        if isinstance(document, str):
            if len(document) > limit:
                raise UsageError(f"document: over the limit of {limit:,} bytes")
            raw = document.encode("utf-8", "surrogatepass")
        elif isinstance(document, dict):
            try:
                raw = json.dumps(document, indent=2, ensure_ascii=False).encode(
                    "utf-8", "surrogatepass"
                )
            except (ValueError, RecursionError):
                raise UsageError("document: an object that cannot be written as JSON") from None
        else:
            raise UsageError(f"document: JSON text or an object is wanted, not {_kind(document)}")
        if len(raw) > limit:
            raise UsageError(
                f"document: {len(raw):,} bytes, over the limit of {limit:,} "
                "(validation.max_file_bytes): a metadata file that large is refused (PF101)"
            )
        _, problem = parse_json(raw, "the document")
        if problem is not None:
            raise UsageError(f"document: not JSON: {problem}")
        return raw

    def _scan_text(self, report: FileReport) -> str:
        """What ``postflightd scan`` prints for this file, from the project's root."""
        from postflightd.pipeline.summaries import Tally
        from postflightd.reporters.scan import Scanned, write_text
        from postflightd.reporters.style import Options

        out = io.StringIO()
        tally = Tally()
        options = Options(color=False, cwd=str(self.root), notes=io.StringIO())
        write_text(Scanned([self.root], map(tally.add, [report]), tally), out, options)
        return out.getvalue()

    def task_state(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """A task's state.json entry, the session a new run reports, its marker, and its
        metadata file as ``status`` shows it."""
        from postflightd.commands.arguments import policy
        from postflightd.commands.status import Facts, file_status
        from postflightd.fs.locks import lock_holder
        from postflightd.pipeline.check import check_file
        from postflightd.project.meta_file import read_marker, task_context

        _only(arguments, "task")
        config = self.config
        with Project.open(self.root, config) as project:
            name = self._task_dir(project, arguments.get("task"))
            with self._open_task(project, name) as task:
                marker = read_marker(task)
                on_disk = task.lstat(META_NAME)
            ctx = task_context(name, project.state, marker, config.specs_dir)
            expected = ctx.expected_session
            run = None
            if on_disk is not None and not stat.S_ISLNK(on_disk.st_mode):
                now = datetime.now(UTC)
                ref = self._ref(project, name)
                report = check_file(project, ref, config, policy(config, (), ()), now)
                facts = Facts(project, config, lock_holder(project.specs))
                run = asdict(file_status(report, name, config, now, facts))
            elif on_disk is not None:
                run = {"state": "invalid", "problem": "a symbolic link: refused, never followed"}
            state_problem = None if project.state.usable else project.state.problem
        return {
            "task": ctx.number,
            "task_dir": f"{config.specs_dir}/{name}",
            "state_entry": dict(ctx.task) if ctx.task is not None else None,
            "state_problem": state_problem,
            "session": (
                {"session_id": expected[0], "from": expected[1]} if expected is not None else None
            ),
            "marker": (
                None
                if marker is None
                else {
                    "file": f"{config.specs_dir}/{name}/{MARKER_NAME}",
                    "session_id": marker.session_id,
                    "operation": marker.operation,
                    "problem": marker.problem,
                }
            ),
            "metadata_file": run,
        }


def _finding(f: Any) -> dict[str, Any]:
    return {
        "code": f.code,
        "severity": f.severity.value,
        "location": f.location,
        "message": f.message,
        "fix": f.fix,
        "line": f.line,
        "col": f.col,
    }
