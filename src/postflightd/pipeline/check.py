"""Read and validate: one metadata file (``check_file``; every file of a scan as a stream is
``pipeline.stream``'s).

Reads through the project's specs directory (``project.meta_file``), validates
(``rules.metadata``), and keeps
what the command's policy selects. Nothing is written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from datetime import datetime
from pathlib import Path

from postflightd.config import Config
from postflightd.errors import ConfigError
from postflightd.pipeline.results import FileReport
from postflightd.project.meta_file import Loaded, parsed_task_context, read_task
from postflightd.project.metafiles import MetaFileRef, MetaFiles, parse_task_dir
from postflightd.project.root import Project, why_not_a_directory
from postflightd.project.state import problem_position
from postflightd.rules.findings import (
    Finding,
    Policy,
    cap_findings,
    finding,
    state_unusable,
)
from postflightd.rules.metadata import RuleOptions, Validation, validate
from postflightd.rules.toolkit import get_object, get_str
from postflightd.rules.toolkit import location as json_location


def check_file(
    project: Project,
    ref: MetaFileRef,
    config: Config,
    policy: Policy,
    now: datetime,
    options: RuleOptions | None = None,
    *,
    first_seen: datetime | None = None,
    document: bytes | None = None,
) -> FileReport:
    """Read and validate one metadata file of ``project``; ``options``: ``rule_options(config)``
    made once for many files; ``first_seen``: when postflightd first saw the file (the
    daemon's run table knows; None: now, as for a command), which PF607 compares with the
    file's modification time; ``document``: these bytes judged in the file's place (the file
    is not read: what an agent is about to write)."""
    parsed = parse_task_dir(ref.task_dir)
    number = parsed[0] if parsed else None
    marker = None
    if ref.refused is not None or project.specs is None:
        loaded = Loaded(failure=ref.refused or _no_specs(project))
    else:
        loaded, marker = read_task(
            project.specs,
            ref,
            config.validation.max_file_bytes,
            identify=not project.read_only,
            document=document,
        )
        if loaded.raw is not None:
            # Read through the directory opened without following links: the artifact probe
            # need not lstat it again.
            project.probe.known_directory(config.specs_dir, ref.task_dir)
    findings: list[Finding] = []
    validation: Validation | None = None
    if parsed is None:
        findings.append(
            finding(
                "PF104",
                "",
                f"task directory {ref.task_dir!r} is not {{number}}_{{slug}} "
                "(e.g. 259_prove_completeness)",
            )
        )
    if loaded.failure is not None:
        findings.append(loaded.failure)
    else:
        ctx = parsed_task_context(
            ref.task_dir,
            parsed,
            project.state,
            marker,
            config.specs_dir,
            written=loaded.written,
            first_seen=first_seen,
        )
        options = options or rule_options(config)
        # An array of more than MAX_LIST_ITEMS entries holds that many commas: a file with
        # fewer has none to cut, and the walk is skipped.
        if loaded.raw is None or loaded.raw.count(b",") >= MAX_LIST_ITEMS:
            findings.extend(trim_long_lists(loaded.doc))
        validation = validate(loaded.doc, ctx, now, options, project.probe)
        findings.extend(validation.findings)
    if project.state.exists and not project.state.usable:
        findings.append(
            state_unusable(
                str(project.state.problem),
                ": postflight is impossible until it is fixed (every metadata file is kept)",
            )
        )
    kept = policy.apply(findings) if findings else findings
    doc = loaded.doc if isinstance(loaded.doc, dict) else {}
    return FileReport(
        root=project.root,
        path_text=ref.path_text,
        task=number,
        findings=cap_findings(kept),
        # Judged by what is shown: a file is invalid exactly when a kept finding fails it, so
        # the summary, the exit code and each file's findings agree under --select/--ignore.
        valid=not (kept and policy.fails(kept)),
        loaded=loaded,
        validation=validation,
        raw_status=get_str(doc, "status"),
        session=get_str(get_object(doc, "metadata"), "session_id"),
        # Stuck is PF602 shown: counted (and failing the run) only when PF602 is kept, so
        # `--select PF5` or the pre-commit hook's `--ignore PF602` do not judge by the clock.
        stuck=bool(validation and validation.stuck) and policy.shows("PF602"),
    )


def state_report(root: Path, config: Config, seen: Finding) -> FileReport:
    """The report of ``root``'s unusable state.json: ``seen`` (the PF604 its metadata files
    carry) pointed at state.json, at the place of the problem when its bytes show one."""
    path = root / config.specs_dir / config.postflight.state_file
    at = problem_position(path)
    shown = replace(seen, line=at[0], col=at[1]) if at is not None else seen
    return FileReport(
        root=root,
        path_text=str(path),
        task=None,
        findings=[shown],
        valid=False,
        loaded=Loaded(),
        project_file=True,
    )


def rule_options(config: Config, *, model: bool = True) -> RuleOptions:
    """What the rules are told of ``config``; ``model``: whether a valid file's typed model is
    wanted (to apply it), which a plain scan, reporting only, does without."""
    return RuleOptions(
        timeouts=asdict(config.timeouts),
        check_artifacts=config.validation.check_artifacts,
        model=model,
    )


#: Longer arrays are cut before validation: the cost of a check stays in proportion to the
#: file.
MAX_LIST_ITEMS = 1000


def trim_long_lists(doc: object, limit: int = MAX_LIST_ITEMS) -> list[Finding]:
    """Cut every array of ``doc`` longer than ``limit`` in place; a PF201 finding for each.

    A 1 MiB file can hold 350,000 empty ``errors`` entries: validating each one (pydantic,
    then a finding per missing field) cost seconds and a gigabyte. No agent's metadata needs
    a thousand entries in one array, so such a file is invalid for that alone, and the rest
    of it is checked as far as the cut, at a cost bounded by ``limit``. The walk is iterative:
    a deeply nested document must not overflow the stack here.
    """
    if not isinstance(doc, dict | list):
        return []
    found: list[Finding] = []
    stack: list[tuple[object, tuple[str | int, ...]]] = [(doc, ())]
    while stack:
        value, loc = stack.pop()
        if isinstance(value, dict):
            stack.extend((v, (*loc, k)) for k, v in value.items() if isinstance(v, dict | list))
        elif isinstance(value, list):
            if len(value) > limit:
                where = json_location(loc) or "the document"
                found.append(
                    finding(
                        "PF201",
                        json_location(loc),
                        f"{where} holds {len(value):,} entries, more than the {limit:,} "
                        "postflightd checks; only the first ones were validated: shorten it",
                    )
                )
                del value[limit:]
            stack.extend((v, (*loc, i)) for i, v in enumerate(value) if isinstance(v, dict | list))
    return found


def _no_specs(project: Project) -> Finding:
    return finding("PF100", "", project.specs_problem or f"{project.specs_dir} does not exist")


#: ``scan FILE ...``: per root, the only metadata files to look at (a root not listed: all)
Only = Mapping[Path, frozenset[str]] | None


def check_specs_dir(root: Path, config: Config) -> None:
    """A ``specs_dir`` a configuration file sets that does not exist is a configuration error:
    "nothing to scan" would turn a typo into a green CI run."""
    specs = root / config.specs_dir
    if "specs_dir" in config.file_keys and not specs.is_dir():
        raise ConfigError(
            f"{config.source or 'configuration'}: specs_dir = {config.specs_dir!r}, "
            f"but {specs} {why_not_a_directory(specs)}"
        )


def metadata_refs(
    project: Project, only: Only = None, *, look: bool = True
) -> Sequence[MetaFileRef]:
    """The metadata files of ``project`` (those of ``only``, when it names its root);
    ``look=False``: its task directories, not yet looked into (``MetaFiles.find``)."""
    # In task order, held as names (metafiles.MetaFiles): a scan keeps this list to its end.
    specs = project.require_specs()
    refs: Sequence[MetaFileRef] = MetaFiles.find(specs, look=look)
    wanted = only.get(project.root) if only is not None else None
    if wanted is not None:
        refs = [r for r in refs if r.path_text in wanted]
    return refs
