"""A plain scan's files as a stream (``scan_files``): each checked as it is asked for, in
forked processes for a large directory (``pipeline.parallel``).

Apart from ``pipeline.check``: the stop hook checks its files one by one with it, and never
streams a scan (its record's class and the forked checks, made at start-up, are that much of
every stop that applies a file).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Final

from postflightd.config import Config
from postflightd.errors import StateUnusableError
from postflightd.fs.directory import Directory
from postflightd.pipeline.check import (
    Only,
    check_file,
    check_specs_dir,
    metadata_refs,
    rule_options,
)
from postflightd.pipeline.parallel import check_all
from postflightd.pipeline.results import FileReport
from postflightd.project.metafiles import MetaFileRef, has_metadata_file
from postflightd.project.root import Project
from postflightd.rules.findings import Policy, state_unusable_text
from postflightd.rules.metadata import prepare_type_check


@dataclass(frozen=True, slots=True)
class ScanFiles:
    """A plain scan's files, checked one at a time as they are asked for.

    The command streams them to its reporter (check, report, forget): memory stays flat in
    the number of files. ``reports`` gives each root's notes to ``note`` as it reaches them.
    """

    roots: list[Path]
    config: Config
    policy: Policy
    now: datetime
    only: Only = None
    positions: bool = False
    #: each valid file's typed model is wanted (a dry run applies it); a plain scan, which
    #: only reports, does without.
    model: bool = True

    def reports(self, note: Callable[[str], None]) -> Iterator[FileReport]:
        config = self.config
        for root in self.roots:
            with Project.open(root, config, read_only=True) as project:
                if project.specs is None:
                    if project.specs_problem is not None:
                        raise StateUnusableError(project.specs_problem)
                    note(f"{root}: no {config.specs_dir}/ directory; nothing to scan")
                    continue
                # The task directories, not looked into here: whichever process checks a
                # chunk of them (a large scan's forked workers too) asks each one whether it
                # holds a metadata file, as the listing would have, just before reading it.
                specs = project.require_specs()
                refs = metadata_refs(project, self.only, look=False)
                if (
                    project.state.exists
                    and not project.state.usable
                    and not any(has_metadata_file(specs, ref) for ref in refs)
                ):
                    # With metadata files, each carries PF604 and the report shows it once.
                    note(state_unusable_text(f"{project.root}: {project.state.problem}"))
                options = rule_options(config, model=self.model)
                check = partial(
                    _if_there,
                    specs,
                    partial(
                        check_file,
                        project,
                        config=config,
                        policy=self.policy,
                        now=self.now,
                        options=options,
                    ),
                )
                # The first file that is not clean loads its type check (pydantic-core and a
                # stored schema, or the models), in each process that meets one: loaded before
                # the fork, the workers inherit it.
                prepare = partial(prepare_type_check, options)
                files = _files_among(specs, refs)
                yield from check_all(refs, check, project.root, self.positions, prepare, files)


def _if_there(
    specs: Directory, check: Callable[[MetaFileRef], FileReport], ref: MetaFileRef
) -> FileReport | None:
    """``check`` of ``ref`` when its task directory holds a metadata file, else None."""
    return check(ref) if has_metadata_file(specs, ref) else None


#: Task directories looked into to tell how many hold a metadata file (``_files_among``).
_SAMPLE: Final = 64


def _files_among(specs: Directory, refs: Sequence[MetaFileRef]) -> int:
    """How many of the task directories ``refs`` hold a metadata file, estimated from
    ``_SAMPLE`` of them spread over the list: what the scan's workers are counted by (a
    project's applied files are deleted, its task directories kept: thousands of them with a
    few files pay for no fork)."""
    count = len(refs)
    if count <= _SAMPLE:
        return count
    step = count / _SAMPLE
    found = sum(has_metadata_file(specs, refs[int(i * step)]) for i in range(_SAMPLE))
    return count * found // _SAMPLE


def scan_files(
    roots: Sequence[Path],
    config: Config,
    policy: Policy,
    now: datetime,
    only: Only = None,
    *,
    positions: bool = False,
    model: bool = True,
) -> ScanFiles:
    """``scan``'s files as a stream; a configured specs_dir that is missing raises here, before
    anything is checked or printed (ConfigError). ``model``: see ``ScanFiles.model``."""
    for root in roots:
        check_specs_dir(root, config)
    return ScanFiles(list(roots), config, policy, now, only, positions, model)
