"""cli: the parser's ``--format`` choices come from the reporter registries; ``main`` maps
failures to exit codes (70 with a crash log, 74 when stdout cannot be written, 130 on Ctrl-C,
141 on a broken pipe)."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
from importlib import import_module
from pathlib import Path

import pytest

from helpers.documents import researched_doc, task_entry
from helpers.project import project, write_meta
from helpers.waiting import wait_until
from postflightd import cli
from postflightd.cli import main
from postflightd.commands.hook import RUNTIME_NAMES
from postflightd.errors import ExitCode, UsageError, exit_code_of
from postflightd.fs import faults
from postflightd.fs.directory import StoreError
from postflightd.fs.locks import LockTimeoutError

#: Each command with a --format, and the module whose ``REPORTERS`` keys are its choices.
REGISTRIES = [
    ("scan", "postflightd.reporters.scan"),
    ("process", "postflightd.reporters.process"),
    ("history", "postflightd.reporters.history"),
    ("check-return", "postflightd.reporters.check_return"),
    ("status", "postflightd.reporters.status"),
    ("verify", "postflightd.reporters.verify"),
    ("report", "postflightd.reporters.report"),
]


@pytest.mark.parametrize(("command", "module"), REGISTRIES)
def test_format_choices_are_the_registry_keys(
    command: str, module: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unknown --format is exit 2, and the choices offered are exactly the registry's keys."""
    keys = list(import_module(module).REPORTERS)
    assert "text" in keys
    with pytest.raises(SystemExit) as exc:
        main([command, "--format", "no-such-format"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"(choose from {', '.join(map(repr, keys))})" in err


@pytest.mark.parametrize(("command", "module"), REGISTRIES)
def test_usage_lists_the_registry_keys(
    command: str, module: str, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = list(import_module(module).REPORTERS)
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0
    assert "--format {" + ",".join(keys) + "}" in capsys.readouterr().out


def test_every_reporter_module_is_a_format_registry() -> None:
    """No command's registry is missed above: every reporter module with ``REPORTERS`` is
    listed, and each registry maps a format to a reporter."""
    package = Path(import_module("postflightd.reporters").__file__ or "").parent
    with_registry = {
        f"postflightd.reporters.{p.stem}"
        for p in package.glob("*.py")
        if hasattr(import_module(f"postflightd.reporters.{p.stem}"), "REPORTERS")
    }
    assert with_registry == {module for _, module in REGISTRIES}
    for module in with_registry:
        assert all(callable(r) for r in import_module(module).REPORTERS.values())


def test_version_imports_no_registry_and_no_command() -> None:
    """--version builds the parser without importing a reporter, a renderer or a command."""
    code = (
        "import json, sys\n"
        "from postflightd.cli import main\n"
        "try:\n"
        "    main(['--version'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(('postflightd.reporters', "
        "'postflightd.stats.figures', 'postflightd.commands', 'postflightd.pipeline.apply')))\n"
        "print(loaded)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    # The parsing machinery of commands/ (no command): what every start-up imports.
    assert out.splitlines()[-1] == "['postflightd.commands', 'postflightd.commands.parsing']"


# --- exit codes: one mapping, errors.exit_code_of ----------------------------------------------


def _postflightd(*argv: str) -> list[str]:
    return [sys.executable, "-m", "postflightd", *argv]


def _broken_project(root: Path, count: int = 1) -> Path:
    """A project whose ``count`` metadata files are each invalid (findings: exit 1)."""
    project(root, [task_entry(259, "prove_completeness")])
    for n in range(count):
        write_meta(root, f"{300 + n}_broken", {"status": "researched"})
    return root


def test_exit_code_of_maps_each_failure(capsys: pytest.CaptureFixture[str]) -> None:
    """Usage errors 2 (message made inert), Ctrl-C 130, a bug 70 naming the crash log."""
    assert exit_code_of(UsageError("bad \x1b[31mflag")) is ExitCode.USAGE
    assert exit_code_of(KeyboardInterrupt()) is ExitCode.INTERRUPTED
    assert exit_code_of(RuntimeError("boom")) is ExitCode.INTERNAL
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "postflightd: bad \\x1b[31mflag"
    assert err[1] == "postflightd: interrupted"
    assert err[2].startswith(
        "postflightd: internal error (RuntimeError), a bug in postflightd: please report it, "
        "with the details in "
    )


def test_store_errors_take_their_codes_from_errors() -> None:
    """The lock timeout is 2 and a store failure 4, decided next to ExitCode."""
    assert LockTimeoutError("held").exit_code is ExitCode.USAGE
    assert StoreError("unwritable").exit_code is ExitCode.STATE_UNUSABLE


def test_the_fault_variable_is_fs_faults() -> None:
    """cli names fs.faults' fault variable itself (start-up does not import the file layer)."""
    assert cli.FAULT_ENV == faults.FAULT_ENV


def test_the_completion_variable_is_commands_completions() -> None:
    """cli names argcomplete's variable itself: start-up imports no command to look it up."""
    from postflightd.commands import completion

    assert cli.COMPLETING_ENV == completion.COMPLETING_ENV


def test_internal_error_exits_70_and_writes_the_crash_log(tmp_path: Path) -> None:
    """An error no command expects: one line on stderr naming the crash log, which holds the
    traceback; no traceback on the terminal."""
    env = {**os.environ, faults.FAULT_ENV: "command=EIO"}
    proc = subprocess.run(
        _postflightd("schema"), check=False, capture_output=True, text=True, env=env, timeout=60
    )
    assert proc.returncode == 70
    assert proc.stdout == ""
    (line,) = proc.stderr.splitlines()
    prefix = (
        "postflightd: internal error (OSError), a bug in postflightd: please report it, "
        "with the details in "
    )
    assert line.startswith(prefix)
    log = Path(line.removeprefix(prefix))
    # The autouse fixture's state directory: platformdirs' user log directory lives in it.
    assert log.is_relative_to(os.environ["XDG_STATE_HOME"])
    text = log.read_text(encoding="utf-8")
    assert "Traceback (most recent call last)" in text
    assert "OSError: [Errno 5]" in text


def test_ctrl_c_exits_130(tmp_path: Path) -> None:
    """SIGINT while a command waits (check-return reading a FIFO nobody writes to): 130."""
    project(tmp_path / "p", [])
    fifo = tmp_path / "return.fifo"
    os.mkfifo(fifo)
    writer: int | None = None
    with subprocess.Popen(
        _postflightd("check-return", str(fifo), "--root", str(tmp_path / "p")),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            # A non-blocking open for writing succeeds once a reader has the FIFO open: the
            # command is inside main. Then wait for it to sleep in read(2): a signal that
            # lands between the interpreter's last check and the read would only be seen
            # after the read returns (CPython checks signals on EINTR), and none comes.
            def writer_opened() -> int | None:
                try:
                    return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
                except OSError:
                    return None

            writer = wait_until("check-return to open the FIFO", writer_opened)
            wchan = Path(f"/proc/{proc.pid}/wchan")
            wait_until(
                "check-return to block reading the FIFO",
                lambda: "pipe" in wchan.read_text() and "partner" not in wchan.read_text(),
            )
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=60)
        finally:
            if writer is not None:
                os.close(writer)
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 130
    assert out == ""
    assert err == "postflightd: interrupted\n"


def test_broken_pipe_with_findings_is_not_success(tmp_path: Path) -> None:
    """The reader closed stdout before the report: exit 141, never 0, and nothing on stderr
    (no traceback, no "Exception ignored" from the interpreter's last flush)."""
    root = _broken_project(tmp_path / "p")
    proc = subprocess.Popen(
        _postflightd("scan", str(root)), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the only read end: every write to stdout is EPIPE
    err = proc.stderr.read()
    proc.stderr.close()
    assert proc.wait(60) == 141
    assert err == b""


@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize(
    "argv",
    [("scan",), ("scan", "--format", "json"), ("schema",), ("--version",), ("--help",)],
    ids=" ".join,
)
def test_a_full_disk_under_stdout_is_said_as_such_not_as_a_bug(
    tmp_path: Path, argv: tuple[str, ...], unbuffered: bool
) -> None:
    """``postflightd scan > report.json`` on a full disk (``/dev/full``: every write fails
    with ENOSPC): exit 74 and one line saying stdout could not be written, never "internal
    error ... please report it" (70) with a crash log, nor argparse swallowing it (exit 0), nor
    the interpreter's "Exception ignored" at its last flush (120); buffered or not
    (PYTHONUNBUFFERED, where nothing waits in a buffer to fail at the end)."""
    root = _broken_project(tmp_path / "p", count=400)  # a report well past any buffer
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    with open("/dev/full", "wb") as full:
        proc = subprocess.run(
            _postflightd(*argv),
            stdout=full,
            stderr=subprocess.PIPE,
            check=False,
            text=True,
            cwd=root,
            env=env,
            timeout=120,
        )
    assert (proc.returncode, proc.stderr) == (
        74,
        "postflightd: cannot write to stdout (No space left on device): "
        "what it shows is incomplete\n",
    )
    assert not any(Path(os.environ["XDG_STATE_HOME"]).rglob("crash.log"))


def test_broken_pipe_in_a_shell_pipeline(tmp_path: Path) -> None:
    """``postflightd scan ROOT | head -c1``: head exits after one byte; scan's exit is 141."""
    root = _broken_project(tmp_path / "p", count=400)  # a report well past the pipe's 64 KiB
    command = " ".join(shlex.quote(a) for a in _postflightd("scan", str(root)))
    proc = subprocess.run(
        ["bash", "-c", f'{command} | head -c1; echo " ${{PIPESTATUS[0]}}"'],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.stdout.split() == [proc.stdout[0], "141"]
    assert proc.stderr == ""


def test_complete_output_keeps_the_verdict(tmp_path: Path) -> None:
    """A reader that reads everything: the findings' exit 1, as before."""
    root = _broken_project(tmp_path / "p")
    proc = subprocess.run(
        _postflightd("scan", str(root)), check=False, capture_output=True, timeout=60
    )
    assert proc.returncode == 1
    assert b"PF" in proc.stdout


@pytest.mark.parametrize("flag", ["--limit", "--task"])
@pytest.mark.parametrize("value", ["99999999999999999999", "-99999999999999999999", "x", "1.5"])
def test_history_numbers_past_the_journal_range_are_usage_errors(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A number SQLite cannot hold is exit 2 naming the flag, not an internal error (70)."""
    with pytest.raises(SystemExit) as exc:
        main(["history", flag, value])
    assert exc.value.code == 2
    assert f"argument {flag}: " in capsys.readouterr().err


def test_history_limit_at_the_journal_range_is_accepted(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["history", "--limit", str(2**63 - 1), "--task", str(-(2**63))]) == 0
    assert "no runs recorded for that filter" in capsys.readouterr().err
    assert main(["history", "--events", "--limit", str(2**63 - 1), "--task", "-1"]) == 0
    assert "no journal rows recorded for that filter" in capsys.readouterr().err


# --- options: spelled in full, near misses named, no option without effect ------------------


def _usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == ExitCode.USAGE
    captured = capsys.readouterr()
    assert captured.out == ""
    return captured.err


@pytest.mark.parametrize(
    ("argv", "meant"),
    [
        (["scan", "--fromat", "json"], "--format"),
        (["scan", "--statistic"], "--statistics"),
        (["status", "--intervall", "1s", "--watch"], "--interval"),
        (["report", "--outptu=x.html"], "--output"),
        (["--verson"], "--version"),
    ],
)
def test_a_near_miss_names_the_option_meant_under_the_command_s_own_usage(
    argv: list[str], meant: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _usage_error(argv, capsys)
    assert f"unrecognized arguments: {argv[1] if len(argv) > 1 else argv[0]}" in err
    assert f"(did you mean `{meant}`?)" in err
    command = argv[0] if not argv[0].startswith("-") else ""
    assert err.startswith(f"usage: postflightd {command}".rstrip())
    assert err.count("usage:") == 1


def test_an_abbreviation_is_not_an_option(capsys: pytest.CaptureFixture[str]) -> None:
    # argparse would take --stat as --statistics, and --sel as --select: one new option
    # starting the same way and the same command line would mean something else.
    for argv in (["scan", "--stat"], ["scan", "--sel", "PF5"], ["history", "--lim", "3"]):
        assert "unrecognized arguments" in _usage_error(argv, capsys)


def test_an_unknown_option_far_from_any_is_named_without_a_guess(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = _usage_error(["verify", "--zzz"], capsys)
    assert err.startswith("usage: postflightd verify")
    assert "unrecognized arguments: --zzz" in err
    assert "did you mean" not in err


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["status", "--interval", "1s"], "--interval sets how often --watch redraws"),
        (["scan", "-v"], "--verbose names each file --apply applied"),
        (
            ["history", "--show", "--format", "json"],
            "--format json always carries it with --events",
        ),
    ],
)
def test_an_option_that_would_change_nothing_is_a_usage_error(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _usage_error(argv, capsys)
    assert err.startswith(f"usage: postflightd {argv[0]}")
    assert said in err


def test_the_real_console_script_gives_the_command_s_usage(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("postflightd")
    done = subprocess.run(
        [script, "scan", "--fromat", "json"],
        check=False,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("usage: postflightd scan")
    assert "did you mean `--format`?" in done.stderr


def test_every_command_module_is_in_the_table_and_owns_its_options() -> None:
    """Each module of ``commands/`` but the shared arguments and the parsing machinery is a
    command of ``cli.COMMANDS``, with the two functions the parser and ``main`` call."""
    package = Path(import_module("postflightd.commands").__file__ or "").parent
    modules = {p.stem for p in package.glob("*.py")} - {"__init__", "arguments", "parsing"}
    assert {name.replace("-", "_") for name in cli.COMMANDS} == modules
    for name in cli.COMMANDS:
        module = cli.command_module(name)
        assert callable(module.add_arguments), name
        assert callable(module.run), name


def _commands_loaded(*argv: str) -> list[str]:
    """The modules of ``commands/`` a fresh interpreter loads to run ``argv``."""
    code = (
        "import json, sys\n"
        "from postflightd.cli import main\n"
        "try:\n"
        f"    main({list(argv)!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        # commands.parsing is the machinery every start-up imports; the commands are the rest.
        "loaded = sorted(m for m in sys.modules if m.startswith('postflightd.commands.')\n"
        "    and m != 'postflightd.commands.parsing')\n"
        "print(json.dumps(loaded))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    loaded: list[str] = json.loads(out.splitlines()[-1])
    return loaded


@pytest.mark.parametrize(
    ("argv", "loaded"),
    [
        (["--help"], []),
        (["rules", "PF205"], ["rules"]),
        (["schema"], ["schema"]),
        (["completion", "bash"], ["completion"]),
        (["scan", "--help"], ["arguments", "scan"]),
    ],
)
def test_a_command_imports_its_own_module_alone(argv: list[str], loaded: list[str]) -> None:
    """The table names each command without importing it: only the command given is."""
    assert _commands_loaded(*argv) == [f"postflightd.commands.{m}" for m in loaded]


def test_a_command_parser_made_alone_reads_as_in_the_whole_one() -> None:
    """The parser main makes for one command line (that command's alone) has the usage, help
    and defaults of the whole parser the docs and completion use."""
    whole = _subparsers(cli.parser(whole=True))
    for name in cli.COMMANDS:
        alone = _subparsers(cli.parser())
        assert list(alone) == []  # nothing made before it is looked up
        assert alone[name].format_help() == whole[name].format_help()
        defaults = [{a.dest: a.default for a in p._actions} for p in (alone[name], whole[name])]
        assert defaults[0] == defaults[1]
        assert list(alone) == [name]


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (action,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    parsers: dict[str, argparse.ArgumentParser] = action._name_parser_map
    return parsers


def test_a_near_miss_command_names_the_command_meant(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["scna"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'scna'" in err
    assert "(did you mean `scan`?)" in err


def test_an_unknown_command_far_from_any_gets_no_guess(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["xyzzy"])
    assert "did you mean" not in capsys.readouterr().err


@pytest.mark.parametrize("given", ["205", "pf205", "PF205", " 205 "])
def test_rules_takes_a_code_with_or_without_its_prefix(
    given: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["rules", given]) == 0
    assert capsys.readouterr().out.startswith("PF205 (warning)")


def test_rules_of_an_unknown_number_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules", "999"]) == 2
    assert "unknown rule code 'PF999'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "words",
    [
        *(["hook", name] for name in RUNTIME_NAMES),
        ["hook", "claude", "--config", "c.toml"],
        ["hook", "vim"],
        ["hook"],
        ["scan", "claude"],
        ["--version", "claude"],
    ],
)
def test_the_hook_command_line_is_read_as_the_parser_reads_it(words: list[str]) -> None:
    """``hook RUNTIME`` skips argparse at every stop: it must mean just what the parser makes
    of it, and any other command line goes to the parser."""
    runtime = cli._plain_hook(words)
    if words[0] == "hook" and len(words) == 2 and words[1] in RUNTIME_NAMES:
        # the shortcut runs run_hook(runtime, config_path=None), as hook's run does with this
        parsed = argparse.Namespace(command="hook", runtime=runtime, config=None)
        assert cli.parser().parse_known_args(words) == (parsed, [])
    else:
        assert runtime is None


#: Runs a stop in a fresh interpreter, as the console script does (``main()``: the process's
#: own command line) or as a test does (``main([...])``), then prints how many passes the
#: cyclic collector made during it and what it left: whether the collector is on, and how many
#: objects it set aside for the process's exit.
STOP_CODE = """\
import gc, json, sys
from postflightd.cli import main
passes = []
gc.callbacks.append(lambda phase, info: passes.append(info) if phase == "start" else None)
sys.argv = ["postflightd", "hook", "claude"]
code = main() if "{how}" == "process" else main(sys.argv[1:])
gc.callbacks.clear()
report = dict(code=code, passes=len(passes), on=gc.isenabled(), frozen=gc.get_freeze_count())
print(json.dumps(report), file=sys.stderr)
"""


@pytest.mark.parametrize("how", ["process", "in-process"])
def test_a_stop_runs_no_pass_of_the_cyclic_collector(tmp_path: Path, how: str) -> None:
    """A stop applying files makes some fifty classes and frees nearly all it makes as it
    goes: the collector is paused for it, and, where the stop is the process's own command
    line, what it holds is left to the exit; a caller of ``main([...])`` gets the collector
    back as it was, nothing set aside."""
    root = project(tmp_path / "proj", 2)
    for n in (1, 2):
        write_meta(root, f"{n}_task{n}", researched_doc(f"{n}_task{n}"))
    payload = {"cwd": str(root), "hook_event_name": "Stop", "stop_hook_active": False}
    done = subprocess.run(
        [sys.executable, "-c", STOP_CODE.replace("{how}", how)],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert json.loads(done.stdout) == {}
    report = json.loads(done.stderr.splitlines()[-1])
    assert (report["code"], report["passes"], report["on"]) == (0, 0, True)
    if how == "process":
        assert report["frozen"] > 0
    else:
        assert report["frozen"] == 0
