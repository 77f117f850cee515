"""``postflightd init``: set a project up (the planned changes are ``project.setup``'s, pure)."""

from __future__ import annotations

import sys
from typing import TextIO

from postflightd.config import load_config
from postflightd.errors import ExitCode, UsageError
from postflightd.project.root import resolve_root
from postflightd.project.setup import (
    CONFIG_NAME,
    GITIGNORE_NAME,
    SETTINGS_PATH,
    SettingsShapeError,
    plan_init,
    read_project_text,
    systemd_escape_path,
    write_project_text,
)


def run_init(*, root_arg: str, yes: bool, config_path: str | None, out: TextIO) -> int:
    """Exit 0 set up (or already), 1 changes shown but not written, 2 error."""
    root = resolve_root(root_arg)
    config = load_config(config_path, [root])
    paths = {name: root / name for name in (GITIGNORE_NAME, SETTINGS_PATH, CONFIG_NAME)}
    current = {name: read_project_text(root, name) for name in paths}
    try:
        changes = plan_init(current, config.specs_dir)
    except SettingsShapeError as exc:
        raise UsageError(f"{paths[SETTINGS_PATH]}: {exc}") from None
    unit = f"postflightd@{systemd_escape_path(str(root))}.service"
    if not changes:
        out.write(f"{root}: already set up for postflightd; nothing to change\n")
        _print_systemd_line(unit, out)
        _print_hook_line(config.hook.apply, out)
        return int(ExitCode.OK)
    for change in changes:
        out.write(change.diff())
    if not yes:
        # Exit 1, as for findings: the project still lacks what the diff shows.
        if not sys.stdin.isatty():
            print(
                "postflightd: nothing written: no terminal to ask on; "
                "run `postflightd init --yes` to write these changes",
                file=sys.stderr,
            )
            return int(ExitCode.FINDINGS)
        out.write(f"Write these changes to {len(changes)} file(s) under {root}? [y/N] ")
        out.flush()
        answer = sys.stdin.readline().strip().lower()
        if answer not in ("y", "yes"):
            out.write("nothing written\n")
            return int(ExitCode.FINDINGS)
    for change in changes:
        try:
            write_project_text(root, change.path, change.new)
        except OSError as exc:
            raise UsageError(f"{paths[change.path]}: cannot write: {exc.strerror or exc}") from None
        verb = "created" if change.old is None else "updated"
        out.write(f"{verb} {change.path}\n")
    _print_systemd_line(unit, out)
    _print_hook_line(config.hook.apply, out)
    return int(ExitCode.OK)


def _print_hook_line(applies: bool, out: TextIO) -> None:
    """The one choice a workflow must make about the stop hook, said once."""
    if applies:
        out.write(
            "The stop hook applies and deletes each valid metadata file when its agent stops; "
            f"if a later stage of your workflow reads the file, set `[hook] apply = false` in "
            f"{CONFIG_NAME}: the hook then only validates, and the workflow runs "
            "`postflightd process FILE` itself.\n"
        )
    else:
        out.write(
            "The stop hook only validates ([hook] apply = false): it blocks an agent until its "
            "own metadata file is right and leaves the file for your workflow's "
            "`postflightd process FILE`.\n"
        )


def _print_systemd_line(unit: str, out: TextIO) -> None:
    out.write(
        "To watch this root with a systemd user service (unit: systemd/postflightd@.service "
        "from the postflightd repository, in ~/.config/systemd/user/):\n"
        f"  systemctl --user enable --now '{unit}'\n"
    )
