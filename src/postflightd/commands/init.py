"""``postflightd init``: set a project up (the planned changes are ``project.setup``'s, pure)."""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TextIO

from postflightd.config import load_config
from postflightd.errors import ExitCode, UsageError
from postflightd.fs.atomic import write_file
from postflightd.fs.directory import Directory, StoreError
from postflightd.inert import inert, inert_diff
from postflightd.models.files import META_NAME
from postflightd.project.adoption import WORKFLOW_DIRS, Survey, survey
from postflightd.project.codex_trust import trust_report
from postflightd.project.hook_files import (
    BY_NAME,
    CLAUDE,
    PROGRAM,
    RUNTIME_NAMES,
    RUNTIMES,
    Runtime,
    SettingsShapeError,
    hook_config_with,
    packaged_plugin,
)
from postflightd.project.mcp_files import mcp_paths, plan_mcp
from postflightd.project.root import resolve_root, why_not_a_directory
from postflightd.project.setup import (
    CONFIG_NAME,
    GITIGNORE_NAME,
    MAX_INIT_FILE_BYTES,
    labelled_hunks,
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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``init``'s options."""
    parser.add_argument("root", nargs="?", default=".", metavar="ROOT", help="default: .")
    parser.add_argument(
        "-y",
        "--yes",
        action="store_true",
        help="write without asking (without it and without a terminal, nothing is written)",
    )
    parser.add_argument(
        "--systemd",
        action="store_true",
        help="also install the systemd user unit postflightd@.service "
        "(in $XDG_CONFIG_HOME/systemd/user/)",
    )
    parser.add_argument(
        "--runtime",
        action="append",
        choices=RUNTIME_NAMES,
        metavar="NAME",
        help="set the stop hook up for this agent runtime (repeatable): "
        f"{', '.join(RUNTIME_NAMES)}; default: those whose directory the project has "
        "(.claude/, .codex/, .gemini/, .github/hooks/, .cursor/, .opencode/), else claude",
    )
    parser.add_argument(
        "--mcp",
        action="store_true",
        help="also register `postflightd mcp` in each runtime's project MCP configuration "
        "(docs/mcp.md)",
    )
    parser.add_argument("--config", metavar="PATH", help="configuration file (TOML)")


def run(args: argparse.Namespace) -> int:
    return run_init(
        root_arg=args.root,
        yes=args.yes,
        systemd=args.systemd,
        config_path=args.config,
        out=sys.stdout,
        runtimes=args.runtime,
        mcp=args.mcp,
    )


def run_init(
    *,
    root_arg: str,
    yes: bool,
    systemd: bool,
    config_path: str | None,
    out: TextIO,
    runtimes: Sequence[str] | None = None,
    mcp: bool = False,
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
    titles = [r.title for r in chosen]
    # Before Copilot CLI gives way to Claude Code's hook: its MCP file is Claude Code's.
    mcp_files = mcp_paths([r.name for r in chosen]) if mcp else []
    chosen, served = _served_by_claude(root, chosen)
    names = (GITIGNORE_NAME, CONFIG_NAME, *(r.path for r in chosen), *(f.path for f in mcp_files))
    current = {name: read_project_text(root, name) for name in names}
    found = _survey(root, config.specs_dir, config.postflight.errors_file)
    has_config = current[CONFIG_NAME] is not None
    # A new configuration chooses validator mode where the workflow post-flights by hand:
    # the hook would delete each file before the workflow's own step reads it.
    apply = config.hook.apply and (has_config or not found.hand_postflights)
    program, program_note = _hook_program(chosen)
    try:
        changes = plan_init(current, config.specs_dir, chosen, apply=apply, program=program)
        changes = plan_mcp(current, changes, mcp_files, program)
    except SettingsShapeError as exc:
        raise UsageError(f"{root / exc.path}: {exc}") from None
    unit = f"postflightd@{systemd_escape_path(str(root))}.service"
    unit_path = user_unit_dir() / TEMPLATE_UNIT
    installed = _read_installed_unit(unit_path)
    new_unit = packaged_unit(TEMPLATE_UNIT) if systemd and installed is None else None
    if systemd or installed is not None:
        _warn_if_hidden_by_private_tmp(root, unit, installed)
    conflict = bool(found.hand_postflights) and apply
    if not changes and new_unit is None and not conflict and not program_note.cannot_run:
        out.write(f"{inert(str(root))}: already set up for postflightd; nothing to change\n")
        if served:
            out.write(f"{served}\n")
        return int(ExitCode.OK)
    out.write(f"Stop hook for: {', '.join(titles)} ({why})\n")
    if served:
        out.write(f"{served}\n")
    _print_summary(found, apply=apply, has_config=has_config, out=out)
    if program_note.text:
        out.write(f"{program_note.text}\n")
    for runtime in chosen:
        if not runtime.events and current[runtime.path] not in (None, packaged_plugin()):
            out.write(
                f"{runtime.path}: not the plugin this postflightd ships: left as it is "
                "(remove it and run init again to get the current one)\n"
            )
    if systemd and installed is not None and installed != packaged_unit(TEMPLATE_UNIT):
        out.write(f"{unit_path}: yours, and not the packaged unit: left as it is\n")
    for change in changes:
        out.write(change.diff())
    if new_unit is not None:
        unit_diff = inert_diff("", new_unit, "/dev/null", str(unit_path))
        out.write(labelled_hunks(unit_diff, lambda _: "the systemd user unit"))
    _print_hand_postflights(found, out)
    if not changes and new_unit is None:
        return int(ExitCode.OK)
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
    # Every file first, then what was done: a reader that leaves now (`| head`) cannot cut
    # the set-up in half (the hook without its configuration).
    done: list[str] = []
    for change in changes:
        try:
            write_project_text(root, change.path, change.new)
        except OSError as exc:
            before = f" (written before it: {', '.join(done)})" if done else ""
            raise UsageError(
                f"{root / change.path}: cannot write: {exc.strerror or exc}{before}"
            ) from None
        done.append(change.path)
    if new_unit is not None:
        _install_unit(unit_path, new_unit)
    for change in changes:
        out.write(f"{'created' if change.old is None else 'updated'} {change.path}\n")
    if new_unit is not None:
        out.write(f"created {unit_path}\n")
    if systemd:
        _print_systemd_line(unit, unit_path, out)
    for runtime in chosen:
        if runtime.needs:
            out.write(f"{runtime.needs}\n")
    _print_codex_trust(root, chosen, out)
    if mcp_files:
        out.write(
            f"Agents can now check their metadata before writing it: the MCP server "
            f"`{program} mcp` (docs/mcp.md; it needs postflightd's mcp extra)\n"
        )
    _print_dashboard_line(root, out)
    return int(ExitCode.OK)


def _print_codex_trust(root: Path, chosen: Sequence[Runtime], out: TextIO) -> None:
    """Whether Codex trusts the project and its hook (it skips an untrusted hook silently)."""
    if any(r.name == "codex" for r in chosen):
        for line in trust_report(root):
            out.write(f"{inert(line)}\n")


def _survey(root: Path, specs_dir: str, errors_file: str) -> Survey:
    """What the project's workflow does already; nothing when the root cannot be opened (the
    writes that follow say why)."""
    try:
        with Directory.anchor(root) as directory:
            return survey(directory, specs_dir, errors_file)
    except OSError:
        return Survey()


#: How many hand postflights are listed by path; a workflow of hundreds is counted beyond.
MAX_LISTED: Final = 40


def _print_summary(found: Survey, *, apply: bool, has_config: bool, out: TextIO) -> None:
    """What init found and the mode it chose, in a few lines, before the diff."""
    hands = found.hand_postflights
    if hands:
        tops = Counter(_workflow_dir(h.path) for h in hands)
        where = joined([f"{n} under {top}/" for top, n in tops.items()])
        verbs = "reads or deletes" if len(hands) == 1 else "read or delete"
        out.write(
            f"A workflow here post-flights by hand: {counted(len(hands), 'file')} {verbs} "
            f"{META_NAME} ({where}; listed below).\n"
        )
        if apply:
            out.write(
                f"But {CONFIG_NAME} lets the hook apply: set `[hook] apply = false` there "
                "(init does not rewrite it) until those steps are removed, or the hook deletes "
                "each file before they read it and they report a successful run as failed.\n"
            )
        else:
            out.write(
                "So the stop hook only validates ([hook] apply = false"
                f"{' in ' + CONFIG_NAME if has_config else ''}): it blocks an agent until its "
                "own metadata file is right and leaves the file to those steps (or to "
                "`postflightd process FILE`). Applying, it would delete each file before they "
                "read it.\n"
            )
    elif apply:
        out.write(
            f"No skill, command or hook script here reads or deletes {META_NAME}, so the stop "
            "hook applies ([hook] apply = true): it applies and deletes each valid metadata "
            f"file when its agent stops (set `[hook] apply = false` in {CONFIG_NAME} if a "
            "later stage of your workflow reads the file).\n"
        )
    else:
        out.write(
            "The stop hook only validates ([hook] apply = false): it blocks an agent until its "
            "own metadata file is right and leaves the file for your workflow's "
            "`postflightd process FILE`.\n"
        )
    if found.cut_short:
        out.write(f"The look at the workflow {found.cut_short}: the rest was not read.\n")
    if found.errors_form is not None:
        form = {
            "array": "a bare array of error records",
            "envelope": "an envelope object, its records in an `errors` array",
        }.get(found.errors_form, f"neither form postflight knows ({found.errors_note})")
        out.write(f"{inert(found.errors_path)}: {form}.\n")
    if found.leftovers:
        shown = inert(found.leftovers[0]) + (", ..." if len(found.leftovers) > 1 else "")
        then = (
            "the hook, applying, post-flights each at the next stop"
            if apply
            else "`postflightd process FILE` applies one"
        )
        out.write(
            f"{counted(len(found.leftovers), 'metadata file')} with a final status never "
            f"applied ({shown}): `postflightd scan` checks them; {then}.\n"
        )


def _workflow_dir(path: str) -> str:
    return next((d for d in WORKFLOW_DIRS if path.startswith(d + "/")), path.rpartition("/")[0])


def _print_hand_postflights(found: Survey, out: TextIO) -> None:
    """The files to remove the hand postflight from before the hook may apply, by path."""
    hands = found.hand_postflights
    if not hands:
        return
    out.write(
        "Before setting `[hook] apply = true`, remove the steps that read or delete "
        f"{META_NAME} (docs/adopting.md) from:\n"
    )
    for hand in hands[:MAX_LISTED]:
        out.write(f"  {inert(hand.path)}:{hand.line} ({hand.does})\n")
    if len(hands) > MAX_LISTED:
        out.write(f"  and {counted(len(hands) - MAX_LISTED, 'file')} more\n")


@dataclass(frozen=True, slots=True)
class _ProgramNote:
    text: str = ""
    cannot_run: bool = False


def _hook_program(runtimes: Sequence[Runtime]) -> tuple[str, _ProgramNote]:
    """The program the hook's command names: ``postflightd`` when it is on PATH, else this
    console script by its absolute path (a runtime runs the hook with the PATH it has, and a
    bare name not on it is a hook that never runs); and what to say of it."""
    if shutil.which(PROGRAM):
        return PROGRAM, _ProgramNote()
    script = Path(sys.argv[0]).resolve() if sys.argv and sys.argv[0] else None
    if script is not None and script.name == PROGRAM and os.access(script, os.X_OK):
        text = f"postflightd is not on PATH: the hook runs it by its path, {inert(str(script))}."
        if any(not r.events for r in runtimes):
            text += " OpenCode's plugin runs `postflightd` from PATH: put it there first."
        return str(script), _ProgramNote(text)
    return PROGRAM, _ProgramNote(
        "postflightd is not on PATH, and this run is not its console script: the runtime "
        "cannot run `postflightd hook ...`; put postflightd on PATH (`pipx ensurepath`, or "
        "its virtualenv's bin directory), then run init again.",
        cannot_run=True,
    )


def _print_dashboard_line(root: Path, out: TextIO) -> None:
    out.write(
        f"To watch its runs live in a browser: postflightd serve {shlex.quote(str(root))} "
        "(needs postflightd's web extra: `postflightd serve` says how to install it)\n"
    )


def _served_by_claude(root: Path, chosen: list[Runtime]) -> tuple[list[Runtime], str]:
    """``chosen`` without GitHub Copilot CLI where Claude Code's hook serves it, and why.

    Copilot CLI runs the Stop and SubagentStop hooks of .claude/settings.json as well as its
    own files: where Claude Code's hook is chosen too, or already there, a Copilot file would
    run postflightd a second time at every stop."""
    copilot = BY_NAME["copilot"]
    if copilot not in chosen:
        return chosen, ""
    if CLAUDE not in chosen:
        text = read_project_text(root, CLAUDE.path)
        try:
            if text is None or hook_config_with(text, CLAUDE) != text:
                return chosen, ""
        except SettingsShapeError:
            return chosen, ""
    return [r for r in chosen if r is not copilot], (
        f"{copilot.path}: not written: {copilot.title} also runs the Stop and SubagentStop "
        f"hooks of {CLAUDE.path}, which {'will hold' if CLAUDE in chosen else 'holds'} "
        "postflightd's; a file of its own would run postflightd twice at every stop"
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


def _print_systemd_line(unit: str, unit_path: Path, out: TextIO) -> None:
    out.write(
        f"To watch this root with a systemd user service (unit: {unit_path}):\n"
        "  systemctl --user daemon-reload\n"
        f"  systemctl --user enable --now '{unit}'\n"
    )
