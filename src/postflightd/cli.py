"""The command line: the parser, and ``main``, which runs one command of ``commands/``.

Each command's module is imported only when it runs, so that ``--version`` and ``--help``
stay fast (the CLI starts in at most 250 ms: a hook or pre-commit runs it on every stop or
commit). ``_dispatch`` passes each ``run_*`` its arguments by keyword, and every ``run_*``
takes keywords only.

Why this module stays whole: it is the one table of every command's arguments and of the
function each runs; split, a command's options and its dispatch would live apart.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator, Sequence

from postflightd import __version__

#: ``typing.TYPE_CHECKING``, without importing typing: ``--version`` needs nothing of it (3 ms
#: of its start-up), and every name below is for the type checker alone.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Final, NoReturn

    _SubParsers = argparse._SubParsersAction["_Parser"]

COLOR_CHOICES = ("auto", "always", "never")
#: fs.faults.FAULT_ENV, named here so that start-up does not import the file layer to look it up.
FAULT_ENV = "POSTFLIGHTD_FAULT_AT"
#: commands.completion.COMPLETING_ENV, named here for the same reason.
COMPLETING_ENV = "_ARGCOMPLETE"
#: Where each shell's completion script goes: ``completion --help`` says it, and so does the
#: script's first comment (docs/index.md too).
COMPLETION_INSTALL = {
    "bash": "postflightd completion bash > ~/.local/share/bash-completion/completions/postflightd",
    "zsh": 'postflightd completion zsh > "${fpath[1]}/_postflightd"  (or any directory on $fpath)',
    "fish": "postflightd completion fish > ~/.config/fish/completions/postflightd.fish",
}
#: project.hook_files.RUNTIME_NAMES (a test keeps the two equal), named here for the same reason.
RUNTIME_NAMES = ("claude", "codex", "gemini", "copilot", "cursor", "opencode")


class _Parser(argparse.ArgumentParser):
    """A parser (and, as ``add_subparsers``' class, each command's) that takes an option only
    as spelled in full: an abbreviation accepted today would change meaning the day another
    option starts the same way (``--statistic``), and a CI job would not notice."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        """argparse's error, with the command meant by a near miss (``scna``), as options get."""
        prefix = "argument COMMAND: invalid choice: "
        if message.startswith(prefix):
            from difflib import get_close_matches

            given = message[len(prefix) :].split(" (choose from", 1)[0].strip("'\"")
            near = get_close_matches(given, list(_subcommands(self)), n=1, cutoff=0.6)
            if near:
                message = f"{message} (did you mean `{near[0]}`?)"
        super().error(message)


#: The commands whose command line is parsed by a parser holding that command alone (``only``).
_ALONE: Final = ("scan", "hook")


def _parser(*, only: str | None = None) -> argparse.ArgumentParser:
    """The parser; ``only`` (one of ``_ALONE``): with that command alone, for a command line
    that starts with it (a hook runs at every agent stop and pre-commit runs ``scan`` at every
    commit: building every command's parser costs them 2.5 ms of their start-up)."""
    parser = _Parser(
        prog="postflightd",
        description="Validate AI agents' .return-meta.json files and apply their outcome to "
        "specs/state.json and TODO.md.",
    )
    parser.add_argument("--version", action="version", version=f"postflightd {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    if only == "hook":
        _add_hook_parser(sub)
        return parser
    _add_scan_parser(sub)
    if only == "scan":
        return parser

    process = sub.add_parser(
        "process", help="validate one metadata file and apply its outcome now (for a workflow)"
    )
    process.add_argument("file", metavar="FILE", help="specs/{N}_{SLUG}/.return-meta.json")
    _add_format(process, "process")
    process.add_argument("--config", metavar="PATH", help="configuration file (TOML)")
    process.add_argument(
        "--dry-run",
        action="store_true",
        help="print the diff of state.json and TODO.md; write nothing",
    )
    _add_code_filters(process)

    _add_hook_parser(sub)

    history = sub.add_parser("history", help="what the journal recorded")
    history.add_argument(
        "--task", type=_journal_int, metavar="N", help="only the runs of task N (project_number)"
    )
    history.add_argument(
        "--session", metavar="S", help="only the runs of session S (metadata.session_id)"
    )
    history.add_argument(
        "--limit", type=_journal_int, default=200, metavar="N", help="the latest N runs (rows)"
    )
    history.add_argument("--root", metavar="DIR", help="only this project root")
    history.add_argument(
        "--since",
        metavar="WHEN",
        help="only since then: a duration back (30m, 2h, 7d), a date, or all",
    )
    history.add_argument(
        "--events", action="store_true", help="one line per journal row instead of per run"
    )
    history.add_argument(
        "--show", action="store_true", help="the rows (--events), each with its recorded file"
    )
    _add_format(history, "history")
    history.add_argument("--config", metavar="PATH", help="configuration file (TOML)")

    ret = sub.add_parser("check-return", help="validate a subagent's console return")
    ret.add_argument("file", nargs="?", default="-", metavar="FILE", help="default: - (stdin)")
    ret.add_argument(
        "--dialect", choices=("auto", "subagent-return", "agent-output"), default="auto"
    )
    ret.add_argument("--expect-session", metavar="SID", help="the session id delegated")
    ret.add_argument("--root", default=".", metavar="DIR", help="artifact paths are relative to it")
    _add_format(ret, "check_return")
    ret.add_argument("--select", action="append", default=[], metavar="CODES")
    ret.add_argument("--ignore", action="append", default=[], metavar="CODES")
    ret.add_argument("--strict", action="store_true", default=None, help="warnings fail too")
    ret.add_argument(
        "--config", metavar="PATH", help="configuration file (TOML; default: looked up from --root)"
    )

    sub.add_parser("schema", help="print the JSON Schema of the metadata file")
    sub.add_parser("mcp", help="an MCP server for agents to check their metadata ([mcp] extra)")
    rules = sub.add_parser("rules", help="list the rule codes, or explain one (rules PF405)")
    rules.add_argument("code", nargs="?", metavar="CODE", help="explain this rule")

    watch = sub.add_parser("watch", help="the daemon: watch roots, post-flight as agents finish")
    watch.add_argument(
        "roots", nargs="*", metavar="ROOT", help="default: [watch] roots, else the project here"
    )
    watch.add_argument("--config", metavar="PATH", help="configuration file (TOML)")
    watch.add_argument("--log-format", choices=("auto", "json", "console"), default=None)
    watch.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default=None)

    status = sub.add_parser("status", help="the runs in flight: stage, phases, elapsed, STUCK")
    status.add_argument(
        "roots", nargs="*", metavar="ROOT", help="default: [watch] roots, else the project here"
    )
    _add_format(status, "status")
    status.add_argument("--config", metavar="PATH", help="configuration file (TOML)")
    status.add_argument("--color", choices=COLOR_CHOICES, default="auto", help="default: auto")
    _add_code_filters(status)

    verify = sub.add_parser(
        "verify", help="outcomes the journal recorded that state.json or TODO.md no longer shows"
    )
    verify.add_argument("roots", nargs="*", metavar="ROOT", help="default: the project here")
    verify.add_argument(
        "--since",
        default="24h",
        metavar="WHEN",
        help="a duration back (90s, 10m, 24h, 7d), a date (2026-01-31), or all (default 24h)",
    )
    verify.add_argument(
        "--repair", action="store_true", help="re-apply the outcomes lost to non-locking writers"
    )
    _add_format(verify, "verify")
    verify.add_argument("--config", metavar="PATH", help="configuration file (TOML)")

    # --- project set-up and shell completion ---
    init = sub.add_parser(
        "init",
        help="set a project up: .gitignore, stop hook, config file (the hook only validates "
        "where a skill or hook script already reads or deletes metadata files)",
    )
    init.add_argument("root", nargs="?", default=".", metavar="ROOT", help="default: .")
    init.add_argument(
        "-y",
        "--yes",
        action="store_true",
        help="write without asking (without it and without a terminal, nothing is written)",
    )
    init.add_argument(
        "--systemd",
        action="store_true",
        help="also install the systemd user unit postflightd@.service "
        "(in $XDG_CONFIG_HOME/systemd/user/)",
    )
    init.add_argument(
        "--runtime",
        action="append",
        choices=RUNTIME_NAMES,
        metavar="NAME",
        help="set the stop hook up for this agent runtime (repeatable): "
        f"{', '.join(RUNTIME_NAMES)}; default: those whose directory the project has "
        "(.claude/, .codex/, .gemini/, .github/hooks/, .cursor/, .opencode/), else claude",
    )
    init.add_argument(
        "--mcp",
        action="store_true",
        help="also register `postflightd mcp` in each runtime's project MCP configuration "
        "(docs/mcp.md)",
    )
    init.add_argument("--config", metavar="PATH", help="configuration file (TOML)")
    places = "\n".join(f"  {shell}: {line}" for shell, line in COMPLETION_INSTALL.items())
    completion = sub.add_parser(
        "completion",
        help="print the shell completion script",
        description="Print the completion script of SHELL, to save where the shell reads it.",
        epilog=f"install it where the shell looks for it (then start a new shell):\n{places}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    completion.add_argument("shell", choices=tuple(COMPLETION_INSTALL))
    _add_report_parsers(sub, status)
    _add_serve_parser(sub)
    return parser


def _add_scan_parser(sub: _SubParsers) -> None:
    scan = sub.add_parser("scan", help="validate every metadata file; report stuck agents")
    scan.add_argument(
        "roots",
        nargs="*",
        metavar="ROOT|FILE",
        help="project roots, or metadata files (pre-commit passes these); default: the "
        "project the current directory is in",
    )
    _add_format(scan, "scan", "--output-format")
    scan.add_argument(
        "--select", action="append", default=[], metavar="CODES", help="only these codes"
    )
    scan.add_argument(
        "--ignore", action="append", default=[], metavar="CODES", help="never these codes"
    )
    scan.add_argument("--strict", action="store_true", default=None, help="warnings fail too")
    scan.add_argument("--apply", action="store_true", help="also post-flight valid final files")
    scan.add_argument(
        "--dry-run",
        action="store_true",
        help="with --apply: print the diff of state.json and TODO.md and which metadata files "
        "would be deleted (applied) or kept; write nothing",
    )
    scan.add_argument("--statistics", action="store_true", help="counts per code, not findings")
    scan.add_argument(
        "--exit-zero", action="store_true", help="exit 0 even when there are findings"
    )
    scan.add_argument("-q", "--quiet", action="store_true", help="findings only: no summary")
    scan.add_argument("-v", "--verbose", action="store_true", help="name each file applied")
    scan.add_argument("--color", choices=COLOR_CHOICES, default="auto", help="default: auto")
    scan.add_argument("--config", metavar="PATH", help="configuration file (TOML)")


def _add_hook_parser(sub: _SubParsers) -> None:
    hook = sub.add_parser("hook", help="adapter for an agent runtime's stop hook")
    hook.add_argument(
        "runtime",
        choices=("claude", "codex", "gemini", "copilot", "cursor", "opencode"),
        help="the hook protocol spoken on stdin/stdout",
    )
    hook.add_argument("--config", metavar="PATH", help="configuration file (TOML)")


def _add_serve_parser(sub: _SubParsers) -> None:
    serve = sub.add_parser("serve", help="the live dashboard and /metrics (the [web] extra)")
    serve.add_argument("roots", nargs="*", metavar="ROOT", help="default: as for status")
    serve.add_argument("--host", default="127.0.0.1", help="default: 127.0.0.1 (loopback)")
    serve.add_argument("--port", type=int, default=8427, help="default: 8427")
    serve.add_argument(
        "--token-file",
        metavar="PATH",
        help="a file holding the token every request must give (also $POSTFLIGHTD_TOKEN); "
        "needed beyond loopback (else one is generated and printed)",
    )
    # A token on the command line is readable by every local user (/proc/PID/cmdline): taken
    # only to say where to put it instead.
    serve.add_argument("--token", help=argparse.SUPPRESS)
    serve.add_argument("--interval", help="how often to look for changes (default: 200ms)")
    serve.add_argument("--config", metavar="PATH", help="configuration file (TOML)")


class RegistryKeys:
    """A reporter registry's keys as argparse ``choices``, imported when argparse first asks.

    ``--format`` choices are the registry's keys, never a copy; importing every registry
    when the parser is built would cost ``--version`` the report renderer's 130 ms (of a
    start-up kept under 250 ms), so the keys are read when a ``--format`` value is checked or a
    command's usage is shown (argcomplete asks too).
    """

    __slots__ = ("_keys", "_name")

    def __init__(self, name: str) -> None:
        self._name = name
        self._keys: tuple[str, ...] | None = None

    def _load(self) -> tuple[str, ...]:
        if self._keys is None:
            from importlib import import_module

            # The package spelled out: tests/test_architecture.py reads the prefix and counts
            # an import of every module under it.
            self._keys = tuple(import_module(f"postflightd.reporters.{self._name}").REPORTERS)
        return self._keys

    def __iter__(self) -> Iterator[str]:
        return iter(self._load())

    def __contains__(self, value: object) -> bool:
        return value in self._load()

    def __len__(self) -> int:
        return len(self._load())


def _add_format(command: argparse.ArgumentParser, name: str, *alias: str) -> None:
    """``--format``, its choices the keys of ``reporters.<name>.REPORTERS`` (default: text)."""
    action = command.add_argument("--format", *alias, dest="format", default="text")
    # Set after add_argument, which formats the option's usage (and would iterate the
    # choices, importing the registry) to check it.
    action.choices = RegistryKeys(name)


def _journal_int(text: str) -> int:
    """An integer the journal can be asked about: SQLite's are 64-bit, and a larger one made
    ``history --limit 99999999999999999999`` an internal error (exit 70)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if not -(2**63) <= value < 2**63:
        raise argparse.ArgumentTypeError(f"{text}: out of range (at most {2**63 - 1})")
    return value


def _add_code_filters(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--select", action="append", default=[], metavar="CODES", help="only these codes"
    )
    command.add_argument(
        "--ignore", action="append", default=[], metavar="CODES", help="never these codes"
    )


def _add_report_parsers(sub: _SubParsers, status: argparse.ArgumentParser) -> None:
    """``report`` and ``status --watch``."""
    status.add_argument(
        "--watch", action="store_true", help="live view, redrawn in place; Ctrl-C to quit"
    )
    status.add_argument(
        "--interval", metavar="SECONDS", help="with --watch: e.g. 1s (default), 500ms"
    )
    report = sub.add_parser(
        "report", help="analytics from the journal: outcomes, durations, timeouts, findings"
    )
    report.add_argument("roots", nargs="*", metavar="ROOT", help="default: every root journaled")
    report.add_argument(
        "--since", default="30d", metavar="DURATION", help="30d (default), 12h, 2026-01-31, all"
    )
    _add_format(report, "report")
    report.add_argument("-o", "--output", metavar="FILE", help="write to FILE (default: stdout)")
    report.add_argument("--config", metavar="PATH", help="configuration file (TOML)")


def _run(argv: Sequence[str] | None) -> int:
    words = sys.argv[1:] if argv is None else argv
    completing = COMPLETING_ENV in os.environ
    first = words[0] if words else None
    parser = _parser(only=first if not completing and first in _ALONE else None)
    if completing:
        # The shell's completion function is asking (argcomplete's protocol): the command
        # module is imported only then, so no other command loads it.
        from postflightd.commands.completion import complete_and_exit

        complete_and_exit(parser)
    args, extra = parser.parse_known_args(argv)
    if extra or (problem := _without_effect(args)) is not None:
        # The command's own usage, not the top-level one argparse gives an unknown option.
        command = _subcommands(parser).get(args.command, parser)
        command.error(_unrecognized(command, extra) if extra else str(problem))
    from postflightd.logs import command_logging

    # Once, for every command, on stderr: structlog's default prints to stdout, where a
    # warning would corrupt a JSON report or the hook's answer.
    with command_logging():
        if FAULT_ENV in os.environ:
            # Test hook: an error no command expects, to prove the crash log and exit 70.
            from postflightd.fs.faults import fault_point

            fault_point("command")
        return _dispatch(args)


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _unrecognized(command: argparse.ArgumentParser, extra: Sequence[str]) -> str:
    """argparse's message for arguments nobody took, with the option meant by a near miss."""
    from difflib import get_close_matches

    message = f"unrecognized arguments: {' '.join(extra)}"
    options = [o for o in command._option_string_actions if o.startswith("--")]
    for arg in extra:
        if arg.startswith("--"):
            near = get_close_matches(arg.split("=", 1)[0], options, n=1, cutoff=0.7)
            if near:
                return f"{message} (did you mean `{near[0]}`?)"
    return message


def _without_effect(args: argparse.Namespace) -> str | None:
    """An option given where it changes nothing: said, rather than silently ignored."""
    if args.command == "status" and args.interval is not None and not args.watch:
        return "--interval sets how often --watch redraws: give --watch, or drop --interval"
    if args.command == "scan" and args.verbose and not args.apply:
        return "--verbose names each file --apply applied: give --apply, or drop --verbose"
    if args.command == "history" and args.show and args.format != "text":
        return (
            f"--show adds the recorded content to the text form; --format {args.format} "
            "always carries it with --events: give --events instead of --show"
        )
    return None


def _dispatch(args: argparse.Namespace) -> int:
    """The command's module, imported only now (start-up), called with keyword arguments."""
    match args.command:
        case "scan":
            from postflightd.commands.scan import ScanOutput, run_scan

            return run_scan(
                roots=args.roots,
                fmt=args.format,
                select=args.select,
                ignore=args.ignore,
                strict=args.strict,
                apply=args.apply,
                config_path=args.config,
                output=ScanOutput(
                    statistics=args.statistics,
                    exit_zero=args.exit_zero,
                    quiet=args.quiet,
                    verbose=args.verbose,
                    color=args.color,
                    dry_run=args.dry_run,
                ),
            )
        case "process":
            from postflightd.commands.process import run_process

            return run_process(
                file=args.file,
                fmt=args.format,
                config_path=args.config,
                select=args.select,
                ignore=args.ignore,
                dry_run=args.dry_run,
            )
        case "hook":
            from postflightd.commands.hook import run_hook

            return run_hook(args.runtime, config_path=args.config)
        case "history":
            from postflightd.commands.history import run_history

            return run_history(
                task=args.task,
                session=args.session,
                limit=args.limit,
                fmt=args.format,
                config_path=args.config,
                root=args.root,
                since=args.since,
                show=args.show,
                events=args.events,
            )
        case "check-return":
            from postflightd.commands.check_return import run_check_return

            return run_check_return(
                file=args.file,
                dialect=args.dialect,
                expect_session=args.expect_session,
                root=args.root,
                fmt=args.format,
                select=args.select,
                ignore=args.ignore,
                strict=args.strict,
                config_path=args.config,
            )
        case "watch":
            from postflightd.commands.watch import run_watch

            return run_watch(
                roots=args.roots,
                config_path=args.config,
                log_format=args.log_format,
                log_level=args.log_level,
            )
        case "mcp":
            from postflightd.commands.mcp import run_mcp

            return run_mcp()
        case "serve":
            from postflightd.commands.serve import resolve_token, run_serve

            kwargs = {k: getattr(args, k) for k in ("roots", "host", "port", "interval")}
            token = resolve_token(args.token_file, given_inline=args.token is not None)
            return run_serve(**kwargs, token=token, config_path=args.config)
        case "status" if args.watch:
            from postflightd.commands.status import run_status_watch

            return run_status_watch(
                roots=args.roots,
                interval_text=args.interval or "1s",
                config_path=args.config,
                fmt=args.format,
                select=args.select,
                ignore=args.ignore,
            )
        case "status":
            from postflightd.commands.status import run_status

            return run_status(
                roots=args.roots,
                fmt=args.format,
                config_path=args.config,
                select=args.select,
                ignore=args.ignore,
                color=args.color,
            )
        case "verify":
            from postflightd.commands.verify import run_verify

            return run_verify(
                roots=args.roots,
                since_text=args.since,
                repair=args.repair,
                fmt=args.format,
                config_path=args.config,
            )
        case "report":
            from postflightd.commands.report import run_report

            return run_report(
                roots=args.roots,
                since=args.since,
                fmt=args.format,
                output=args.output,
                config_path=args.config,
            )
        case "schema":
            from postflightd.commands.schema import run_schema

            return run_schema()
        case "rules":
            from postflightd.commands.rules import run_rules

            return run_rules(code=args.code)
        case "init":
            from postflightd.commands.init import run_init

            return run_init(
                root_arg=args.root,
                yes=args.yes,
                systemd=args.systemd,
                config_path=args.config,
                out=sys.stdout,
                runtimes=args.runtime,
                mcp=args.mcp,
            )
        case "completion":
            from postflightd.commands.completion import run_completion

            return run_completion(shell=args.shell, install=COMPLETION_INSTALL[args.shell])
        case _:
            from postflightd.errors import ExitCode

            _parser().print_help(sys.stderr)
            return int(ExitCode.USAGE)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; return its exit code (failures: ``errors.exit_code_of``)."""
    try:
        code = _run(argv)
        # Flushed here, not at interpreter exit: a reader that went away is a broken pipe
        # (exit 141), not an "Exception ignored" message and exit 120. (No stdout at all when
        # started with it closed: `watch` never prints to it.)
        if sys.stdout is not None:
            sys.stdout.flush()
    except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - the one place they become codes
        from postflightd.errors import exit_code_of

        return int(exit_code_of(exc))
    return code
