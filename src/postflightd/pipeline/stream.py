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

from postflightd.config import Config
from postflightd.errors import StateUnusableError
from postflightd.pipeline.check import (
    Only,
    check_file,
    check_specs_dir,
    metadata_refs,
    rule_options,
)
from postflightd.pipeline.parallel import check_all
from postflightd.pipeline.results import FileReport
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
                refs = metadata_refs(project, self.only)
                if project.state.exists and not project.state.usable and not refs:
                    # With metadata files, each carries PF604 and the report shows it once.
                    note(state_unusable_text(f"{project.root}: {project.state.problem}"))
                options = rule_options(config, model=self.model)
                check = partial(
                    check_file,
                    project,
                    config=config,
                    policy=self.policy,
                    now=self.now,
                    options=options,
                )
                # The first file that is not clean loads its type check (pydantic-core and a
                # stored schema, or the models), in each process that meets one: loaded before
                # the fork, the workers inherit it.
                prepare = partial(prepare_type_check, options)
                yield from check_all(refs, check, project.root, self.positions, prepare)


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
