"""The pipeline every command runs: find -> read -> validate (-> postflight -> clean up).

It never prints and never exits: it returns reports, and ``ScanReport.exit_code`` decides.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from postflightd.config import Config
from postflightd.errors import ExitCode, UsageError
from postflightd.findings import Finding, Policy, Severity, expand_codes, finding
from postflightd.loader import (
    Loaded,
    MetaFileRef,
    StateView,
    artifact_probe,
    find_metadata_files,
    load_state,
    parse_task_dir,
    read_metadata,
    task_context,
)
from postflightd.models import Status
from postflightd.rules import ArtifactProbe, RuleOptions, Validation, validate


@dataclass(slots=True)
class FileReport:
    """What the pipeline found for one metadata file."""

    root: Path
    path: Path
    task: int | None
    findings: list[Finding]
    valid: bool
    loaded: Loaded
    validation: Validation | None = None

    @property
    def rel_path(self) -> str:
        try:
            return self.path.relative_to(self.root).as_posix()
        except ValueError:
            return self.path.as_posix()

    @property
    def status(self) -> Status | None:
        return self.validation.status if self.validation else None

    @property
    def raw_status(self) -> str | None:
        doc = self.loaded.doc
        value = doc.get("status") if isinstance(doc, dict) else None
        return value if isinstance(value, str) else None

    @property
    def stuck(self) -> bool:
        return bool(self.validation and self.validation.stuck)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.rel_path,
            "task": self.task,
            "status": self.raw_status,
            "valid": self.valid,
            "stuck": self.stuck,
            "findings": [f.to_json() for f in self.findings],
        }


@dataclass(slots=True)
class ScanReport:
    roots: list[Path]
    files: list[FileReport] = field(default_factory=list)
    #: notes about a root as a whole (no specs directory, unusable state.json), for stderr.
    notes: list[str] = field(default_factory=list)
    strict: bool = False

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.files for x in f.findings if x.severity is severity)

    def summary(self) -> dict[str, int]:
        valid = sum(1 for f in self.files if f.valid)
        return {
            "files": len(self.files),
            "valid": valid,
            "invalid": len(self.files) - valid,
            "errors": self.count(Severity.ERROR),
            "warnings": self.count(Severity.WARNING),
            "stuck": sum(1 for f in self.files if f.stuck),
        }

    @property
    def exit_code(self) -> ExitCode:
        failing = self.count(Severity.ERROR) or (self.strict and self.count(Severity.WARNING))
        if failing or any(f.stuck for f in self.files):
            return ExitCode.FINDINGS
        return ExitCode.OK

    def to_json(self) -> dict[str, Any]:
        return {
            "roots": [str(r) for r in self.roots],
            "files": [f.to_json() for f in self.files],
            "summary": self.summary(),
        }


def policy_from(
    config: Config,
    select: Iterable[str] = (),
    ignore: Iterable[str] = (),
    strict: bool | None = None,
) -> Policy:
    """Command flags override the configuration file (SPEC 4.1)."""
    v = config.validation
    chosen = expand_codes(select) or frozenset(v.select)
    return Policy(
        select=chosen,
        ignore=expand_codes(ignore) | frozenset(v.ignore),
        severity=dict(v.severity),
        strict=v.strict if strict is None else strict,
    )


@dataclass(frozen=True, slots=True)
class Project:
    """One project root, with what the pipeline needs to read it."""

    root: Path
    specs_dir: Path
    state: StateView
    probe: ArtifactProbe

    @classmethod
    def open(cls, root: Path, config: Config) -> Project:
        specs = root / config.specs_dir
        state = load_state(specs / config.postflight.state_file)
        return cls(root, specs, state, artifact_probe(root))


def resolve_root(raw: str | Path) -> Path:
    root = Path(raw).expanduser()
    if not root.is_dir():
        raise UsageError(f"{raw}: not a directory (give a project root holding a specs directory)")
    return root.resolve()


def check_file(
    project: Project,
    ref: MetaFileRef,
    config: Config,
    policy: Policy,
    now: datetime,
) -> FileReport:
    """Read and validate one metadata file of ``project``."""
    parsed = parse_task_dir(ref.task_dir)
    number = parsed[0] if parsed else None
    if ref.refused is not None:
        loaded = Loaded(ref.path, failure=ref.refused)
    else:
        loaded = read_metadata(ref.path, config.validation.max_file_bytes)
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
        ctx = task_context(ref.path.parent, project.state)
        options = RuleOptions(
            timeouts=config.timeouts.as_mapping(),
            check_artifacts=config.validation.check_artifacts,
        )
        validation = validate(loaded.doc, ctx, now, options, project.probe)
        findings.extend(validation.findings)
    if project.state.exists and not project.state.usable:
        findings.append(
            finding(
                "PF604",
                "",
                f"{project.state.problem}: postflight is impossible until it is fixed "
                "(the metadata file is kept)",
            )
        )
    kept = policy.apply(findings)
    usable = validation is not None and validation.model is not None
    return FileReport(
        root=project.root,
        path=ref.path,
        task=number,
        findings=kept,
        valid=usable and not policy.fails(kept),
        loaded=loaded,
        validation=validation,
    )


def scan(roots: Iterable[Path], config: Config, policy: Policy, now: datetime) -> ScanReport:
    """Validate every metadata file under each root (SPEC 4, ``scan``)."""
    report = ScanReport(roots=list(roots), strict=policy.strict)
    for root in report.roots:
        project = Project.open(root, config)
        if not project.specs_dir.is_dir():
            report.notes.append(f"{root}: no {config.specs_dir}/ directory; nothing to scan")
            continue
        if project.state.exists and not project.state.usable:
            report.notes.append(f"{root}: {project.state.problem} (PF604)")
        for ref in find_metadata_files(project.specs_dir):
            report.files.append(check_file(project, ref, config, policy, now))
    return report
