"""``postflightd init``: set a project up (the planned changes are ``project.setup``'s, pure)."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from postflightd.config import load_config
from postflightd.errors import ExitCode, UsageError
from postflightd.fs.atomic import write_file
from postflightd.fs.directory import StoreError
from postflightd.inert import inert_diff
from postflightd.project.hook_files import (
    BY_NAME,
    CLAUDE,
    RUNTIMES,
    Runtime,
    SettingsShapeError,
    packaged_plugin,
)
from postflightd.project.root import resolve_root, why_not_a_directory
from postflightd.project.setup import (
    CONFIG_NAME,
    GITIGNORE_NAME,
    MAX_INIT_FILE_BYTES,
    plan_init,
    read_project_text,
    systemd_escape_path,
    write_project_text,
)
from postflightd.project.units import (
    TEMPLATE_UNIT,
    hidden_by_private_tmp,
    packaged_unit,
    private_tmp,
    user_unit_dir,
)
from postflightd.words import counted, joined


def run_init(
    *,
    root_arg: str,
    yes: bool,
    systemd: bool,
    config_path: str | None,
    out: TextIO,
    runtimes: Sequence[str] | None = None,
) -> int:
    """Exit 0 set up (or already), 1 changes shown but not written, 2 error."""
    given = Path(root_arg).expanduser()
    if not given.is_dir():
        # Not resolve_root's message: init asks for no specs directory, only a place to write.
        raise UsageError(
            f"{root_arg}: {why_not_a_directory(given)}; init sets up an existing directory: "
            "create the project's directory first, or give its path"
        )
    root = resolve_root(root_arg)
    config = load_config(config_path, [root])
    chosen, why = _choose_runtimes(root, runtimes)
    names = (GITIGNORE_NAME, CONFIG_NAME, *(r.path for r in chosen))
    current = {name: read_project_text(root, name) for name in names}
    try:
        changes = plan_init(current, config.specs_dir, chosen)
    except SettingsShapeError as exc:
        raise UsageError(f"{root / exc.path}: {exc}") from None
    out.write(f"Stop hook for: {', '.join(r.title for r in chosen)} ({why})\n")
    for runtime in chosen:
        if not runtime.events and current[runtime.path] not in (None, packaged_plugin()):
            out.write(
                f"{runtime.path}: not the plugin this postflightd ships: left as it is "
                "(remove it and run init again to get the current one)\n"
            )
    unit = f"postflightd@{systemd_escape_path(str(root))}.service"
    unit_path = user_unit_dir() / TEMPLATE_UNIT
    installed = _read_installed_unit(unit_path)
    new_unit = packaged_unit(TEMPLATE_UNIT) if systemd and installed is None else None
    _warn_if_hidden_by_private_tmp(root, unit, installed)
    if systemd and installed is not None and installed != packaged_unit(TEMPLATE_UNIT):
        out.write(f"{unit_path}: yours, and not the packaged unit: left as it is\n")
    if not changes and new_unit is None:
        out.write(f"{root}: already set up for postflightd; nothing to change\n")
        _print_systemd_line(root, unit, unit_path, installed is not None, out)
        _print_hook_line(config.hook.apply, chosen, out)
        _print_dashboard_line(root, out)
        return int(ExitCode.OK)
    for change in changes:
        out.write(change.diff())
    if new_unit is not None:
        out.write(inert_diff("", new_unit, "/dev/null", str(unit_path)))
    count = len(changes) + (new_unit is not None)
    if not yes:
        # Exit 1, as for findings: the project still lacks what the diff shows.
        if not sys.stdin.isatty():
            print(
                "postflightd: nothing written: no terminal to ask on; "
                "run `postflightd init --yes` to write these changes",
                file=sys.stderr,
            )
            return int(ExitCode.FINDINGS)
        out.write(f"Write these changes to {counted(count, 'file')}? [y/N] ")
        out.flush()
        answer = sys.stdin.readline().strip().lower()
        if answer not in ("y", "yes"):
            out.write("nothing written\n")
            return int(ExitCode.FINDINGS)
    for change in changes:
        try:
            write_project_text(root, change.path, change.new)
        except OSError as exc:
            raise UsageError(f"{root / change.path}: cannot write: {exc.strerror or exc}") from None
        verb = "created" if change.old is None else "updated"
        out.write(f"{verb} {change.path}\n")
    if new_unit is not None:
        _install_unit(unit_path, new_unit)
        out.write(f"created {unit_path}\n")
    _print_systemd_line(root, unit, unit_path, installed is not None or new_unit is not None, out)
    _print_hook_line(config.hook.apply, chosen, out)
    _print_dashboard_line(root, out)
    return int(ExitCode.OK)


def _print_dashboard_line(root: Path, out: TextIO) -> None:
    out.write(
        f"To watch its runs live in a browser: postflightd serve {shlex.quote(str(root))} "
        "(needs postflightd's web extra: `postflightd serve` says how to install it)\n"
    )


def _choose_runtimes(root: Path, names: Sequence[str] | None) -> tuple[list[Runtime], str]:
    """The runtimes named (``--runtime``), else those whose directory the project has
    (``.github/hooks/``, not ``.github/``, which most repositories have for other reasons),
    else Claude Code; and why, as the output's first line says."""
    if names:
        chosen = [BY_NAME[n] for n in dict.fromkeys(names)]
        why = "as --runtime asks"
    else:
        chosen = [r for r in RUNTIMES if (root / r.marker).is_dir()]
        markers = joined([f"{r.marker}/" for r in chosen])
        why = f"{markers} found; `--runtime NAME` chooses others"
        if not chosen:
            chosen = [CLAUDE]
            why = "no runtime's directory found; `--runtime NAME` chooses another"
    return chosen, why


def _print_hook_line(applies: bool, runtimes: Sequence[Runtime], out: TextIO) -> None:
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
    for runtime in runtimes:
        if runtime.needs:
            out.write(f"{runtime.needs}\n")


def _read_installed_unit(path: Path) -> str | None:
    """The user's copy of the template unit, None when there is none (or it is unreadable:
    then ``--systemd`` offers to install it and writing says why it cannot)."""
    try:
        with path.open("rb") as f:
            data = f.read(MAX_INIT_FILE_BYTES + 1)
    except OSError:
        return None
    if len(data) > MAX_INIT_FILE_BYTES:
        return ""
    return data.decode("utf-8", errors="replace")


def _install_unit(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_file(path, text.encode("utf-8"))
    except OSError as exc:
        raise UsageError(f"{path}: cannot write: {exc.strerror or exc}") from None
    except StoreError as exc:
        raise UsageError(f"{path}: cannot write: {exc}") from None


def _warn_if_hidden_by_private_tmp(root: Path, unit: str, installed: str | None) -> None:
    """A root in /tmp or /var/tmp is invisible to a unit with ``PrivateTmp=yes``: its daemon
    would exit 2 at once ("not a directory"), so say so before the user starts it."""
    tmp = hidden_by_private_tmp(root)
    unit_text = packaged_unit(TEMPLATE_UNIT) if installed is None else installed
    if tmp is None or not private_tmp(unit_text):
        return
    print(
        f"postflightd: warning: {root} is under {tmp}, and the systemd unit sets "
        f"PrivateTmp=yes: the service gets a private, empty {tmp} and cannot see this root "
        f"(its daemon would exit 2). Keep the project outside {tmp}, or set PrivateTmp=no "
        f"with `systemctl --user edit '{unit}'`.",
        file=sys.stderr,
    )


def _print_systemd_line(
    root: Path, unit: str, unit_path: Path, installed: bool, out: TextIO
) -> None:
    if installed:
        out.write(
            f"To watch this root with a systemd user service (unit: {unit_path}):\n"
            "  systemctl --user daemon-reload\n"
            f"  systemctl --user enable --now '{unit}'\n"
        )
    else:
        out.write(
            "To watch this root with a systemd user service, install the unit "
            f"({unit_path}) and start it:\n"
            f"  postflightd init --systemd {shlex.quote(str(root))}\n"
            "  systemctl --user daemon-reload\n"
            f"  systemctl --user enable --now '{unit}'\n"
        )
