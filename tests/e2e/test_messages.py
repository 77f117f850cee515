"""Every message the CLI prints, read once: each command's success and failure paths, run as
a user runs them (the real ``postflightd`` in a subprocess, on real trees), their full output
compared with the transcripts under ``tests/e2e/messages/``.

A transcript is what a person would see: the command line, its exit code, then stdout and
stderr in full. Whatever changes from run to run is replaced by a placeholder before the
comparison, so a transcript is stable: the test's temporary directory is ``<TMP>`` (and its
systemd-escaped form ``<TMP-UNIT>``), the isolated home ``<HOME>``, times ``<TIME>``, dates
``<DATE>``, durations ``<DURATION>``, process ids ``<PID>``, the version ``<VERSION>``.

A wording changed on purpose: regenerate the transcripts, read the diff, commit it::

    POSTFLIGHTD_UPDATE_MESSAGES=1 .venv/bin/python -m pytest tests/e2e/test_messages.py

Each test whose transcript that rewrote fails, so the run that rewrote is never green; run
again without the switch (``helpers.update_mode`` says what the switch accepts).

Every text gathered is also checked for what reads wrong whatever the wording: a ``(s)``
plural (``1 file(s)``: counts say ``1 file``, ``2 files``) and a doubled word (``return
return``, ``the the``).

``schema`` and ``completion`` print data, not messages (the JSON Schema, a shell script):
they are checked for their exit code and an empty stderr, not compared line by line. Every
rule's explanation (``rules CODE``) is read and checked for the two faults above; one of them
is in a transcript.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from helpers.documents import final_text
from helpers.paths import REPO, copy_example
from helpers.project import project, user_config, write_meta
from helpers.serve_process import answers
from helpers.update_mode import update, updating
from helpers.waiting import wait_until
from postflightd.project.setup import systemd_escape_path
from postflightd.timestamps import iso_timestamp

MESSAGES = Path(__file__).resolve().parent / "messages"
UPDATE_ENV = "POSTFLIGHTD_UPDATE_MESSAGES"
EXAMPLE = REPO / "examples" / "project"

#: ``1 file(s)``: a count says ``1 file``, ``2 files``.
PLURAL_S = re.compile(r"\w\(s\)")
#: A word said twice in a row (``return return``), across spaces, not across lines.
DOUBLED = re.compile(r"\b([A-Za-z]+)[ \t]+\1\b", re.IGNORECASE)
#: Where a doubled word is the text itself: ``ls -l`` output quoted by a rule's explanation
#: (owner and group).
DOUBLED_ALLOWED = frozenset({"root root", "me   me"})

_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?")
_DATE = re.compile(r"\b\d{4}-\d\d-\d\d\b")
_DURATION = re.compile(r"\b(\d+d\d\dh|\d+h\d\dm|\d+m\d\ds|\d+s)\b")
_PID = re.compile(r"\b(pid[ =])\d+\b")
_CLOCK = re.compile(r"\b\d\d:\d\d:\d\d\b")


@dataclass
class Transcript:
    """The commands of one scenario and what each printed, placeholders in."""

    tmp: Path
    blocks: list[str] = field(default_factory=list)

    def stable(self, text: str) -> str:
        home = os.environ["HOME"]
        text = text.replace(str(self.tmp), "<TMP>")
        text = text.replace(systemd_escape_path(str(self.tmp)), "<TMP-UNIT>")
        text = text.replace(home, "<HOME>")
        text = text.replace(systemd_escape_path(home), "<HOME-UNIT>")
        from postflightd import __version__

        text = text.replace(f"postflightd {__version__}", "postflightd <VERSION>")
        text = _TIMESTAMP.sub("<TIME>", text)
        text = _DATE.sub("<DATE>", text)
        text = _CLOCK.sub("<TIME>", text)
        text = _PID.sub(r"\1<PID>", text)
        return _DURATION.sub("<DURATION>", text)


def _check_words(texts: Sequence[str]) -> None:
    for text in texts:
        for line in text.splitlines():
            assert not PLURAL_S.search(line), f"a (s) plural: {line!r}"
            for m in DOUBLED.finditer(line):
                if m.group(0) not in DOUBLED_ALLOWED:
                    raise AssertionError(f"a doubled word {m.group(0)!r}: {line!r}")


def run(
    t: Transcript,
    *args: str,
    cwd: Path | None = None,
    stdin: str | None = None,
    show: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Run ``postflightd ARGS`` as a user would; its transcript block is added unless
    ``show`` is False (a step that only sets the scene)."""
    env = {**os.environ, "COLUMNS": "100", "NO_COLOR": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "postflightd", *args],
        cwd=cwd or t.tmp,
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    # Every output is read, shown in the transcript or not.
    _check_words([done.stdout, done.stderr])
    if show:
        where = "" if cwd is None else f"(in {cwd}) "
        block = [f"$ {where}postflightd {' '.join(args)}".rstrip()]
        if stdin:
            block.append(f"  stdin: {stdin.strip()}")
        block.append(f"[exit {done.returncode}]")
        if done.stdout:
            block.append("--- stdout\n" + done.stdout.rstrip("\n"))
        if done.stderr:
            block.append("--- stderr\n" + done.stderr.rstrip("\n"))
        t.blocks.append(t.stable("\n".join(block)))
    return done


def compare(t: Transcript, name: str) -> None:
    """The scenario's transcript against ``messages/NAME.txt`` (written when updating)."""
    text = "\n\n".join(t.blocks) + "\n"
    _check_words([text])
    path = MESSAGES / f"{name}.txt"
    if updating(UPDATE_ENV):
        update(path, text, UPDATE_ENV)  # fails the test when it rewrote the transcript
        return
    assert path.exists(), f"no transcript {path.name}: run with {UPDATE_ENV}=1 to write it"
    expected = path.read_text(encoding="utf-8")
    assert text == expected, f"{path.name} differs; with {UPDATE_ENV}=1 it is rewritten"


def example(tmp: Path, name: str = "project") -> Path:
    """A copy of the example project, its stuck run started 3 hours ago and every metadata file
    last written 10 minutes ago (not when the repository was checked out): the times shown
    keep one width (``3h00m``, ``10m..s``), and with them the columns of the tables that show
    them; and no file is a leftover, whenever the checkout was made."""
    root = tmp / name
    copy_example(root)
    stuck = root / "specs" / "262_parser_rewrite" / ".return-meta.json"
    doc = json.loads(stuck.read_text(encoding="utf-8"))
    doc["started_at"] = iso_timestamp(datetime.now(UTC) - timedelta(hours=3))
    stuck.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    written = time.time() - 600
    for meta in (root / "specs").glob("*/.return-meta.json"):
        os.utime(meta, (written, written))
    return root


# --- the scenarios ----------------------------------------------------------------------------


def test_scan(tmp_path: Path) -> None:
    t = Transcript(tmp_path)
    root = example(tmp_path)
    run(t, "scan", cwd=root)
    run(t, "scan", "--format", "json", cwd=root)
    run(t, "scan", "--statistics", cwd=root)
    run(t, "scan", "-q", cwd=root)
    run(t, "scan", "--select", "PF5", cwd=root)
    run(t, "scan", "--apply", "--dry-run", cwd=root)
    run(t, "scan", "--apply", "-v", cwd=root)
    run(t, "scan", "--apply", "--dry-run", cwd=root)
    clean = project(tmp_path / "clean", 1)
    run(t, "scan", cwd=clean)
    run(t, "scan", str(tmp_path / "missing"))
    (tmp_path / "a-file").write_text("x\n", encoding="utf-8")
    run(t, "scan", "a-file")
    run(t, "scan", str(tmp_path))
    run(t, "scan", "specs/260_lsp_setup/.return-meta.json", cwd=root)
    run(t, "scan", "specs/999_gone/.return-meta.json", cwd=root)
    compare(t, "scan")


def test_scan_usage_errors(tmp_path: Path) -> None:
    t = Transcript(tmp_path)
    root = example(tmp_path)
    run(t, "scan", "--dry-run", cwd=root)
    run(t, "scan", "--apply", "--dry-run", "--format", "json", cwd=root)
    run(t, "scan", "--verbose", cwd=root)
    run(t, "scan", "--select", "PF999", cwd=root)
    run(t, "scan", "--statistic", cwd=root)
    run(t, "scan", "--format", "yaml", cwd=root)
    run(t, "scan", "--config", "nowhere.toml", cwd=root)
    (root / ".postflightd.toml").write_text("[validation\n", encoding="utf-8")
    run(t, "scan", cwd=root)
    (root / ".postflightd.toml").write_text("colour = 1\n", encoding="utf-8")
    run(t, "scan", cwd=root)
    (root / ".postflightd.toml").write_text('specs_dir = "spec"\n', encoding="utf-8")
    run(t, "scan", cwd=root)
    compare(t, "scan-usage")


def test_process(tmp_path: Path) -> None:
    t = Transcript(tmp_path)
    root = example(tmp_path)
    researched = "specs/259_prove_completeness/.return-meta.json"
    run(t, "process", "--dry-run", researched, cwd=root)
    run(t, "process", researched, cwd=root)
    run(t, "process", researched, cwd=root)
    run(t, "process", "specs/260_lsp_setup/.return-meta.json", cwd=root)
    run(t, "process", "--dry-run", "specs/260_lsp_setup/.return-meta.json", cwd=root)
    interrupted = "specs/262_parser_rewrite/.return-meta.json"
    run(t, "process", interrupted, cwd=root)
    run(t, "process", interrupted, cwd=root)
    run(t, "process", "--format", "json", "specs/263_flaky_ci/.return-meta.json", cwd=root)
    run(t, "process", "specs/state.json", cwd=root)
    run(t, "process", "specs/999_gone/.return-meta.json", cwd=root)
    run(t, "process", "--dry-run", "--format", "json", interrupted, cwd=root)
    (root / "specs" / "state.json").write_text('{"active_projects": [\n', encoding="utf-8")
    run(t, "process", "specs/261_agent_registry/.return-meta.json", cwd=root)
    compare(t, "process")


def test_status_history_report_verify(tmp_path: Path) -> None:
    t = Transcript(tmp_path)
    root = example(tmp_path)
    run(t, "history", cwd=root)
    run(t, "history", "--events", cwd=root)
    run(t, "report", cwd=root)
    run(t, "verify", cwd=root)
    run(t, "status", cwd=root)
    run(t, "status", str(tmp_path / "missing"))
    run(t, "status", "--interval", "500ms", cwd=root)
    run(t, "scan", "--apply", cwd=root, show=False)
    run(t, "process", "specs/262_parser_rewrite/.return-meta.json", cwd=root, show=False)
    run(t, "status", cwd=root)
    run(t, "history", cwd=root)
    run(t, "history", "--task", "259", "--events", cwd=root)
    run(t, "history", "--task", "1", cwd=root)
    run(t, "history", "--root", str(tmp_path / "missing"), cwd=root)
    run(t, "history", "--since", "soon", cwd=root)
    run(t, "report", "--since", "all", cwd=root)
    run(t, "report", "-o", str(tmp_path), cwd=root)
    run(t, "report", str(tmp_path / "missing"), cwd=root)
    run(t, "verify", cwd=root)
    # A writer that ignored the lock puts task 259's old entry back.
    state = json.loads((EXAMPLE / "specs" / "state.json").read_text(encoding="utf-8"))
    current = json.loads((root / "specs" / "state.json").read_text(encoding="utf-8"))
    current["active_projects"][0] = state["active_projects"][0]
    (root / "specs" / "state.json").write_text(json.dumps(current, indent=2), encoding="utf-8")
    run(t, "verify", cwd=root)
    run(t, "verify", "--repair", cwd=root)
    run(t, "verify", cwd=root)
    run(t, "verify", "--since", "yesterday", cwd=root)
    compare(t, "status-history-report-verify")


def test_init(tmp_path: Path) -> None:
    t = Transcript(tmp_path)
    run(t, "init", "missing")
    (tmp_path / "a-file").write_text("x\n", encoding="utf-8")
    run(t, "init", "a-file")
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    run(t, "init", "fresh")
    run(t, "init", "--yes", "fresh")
    run(t, "init", "fresh")
    run(t, "init", "--systemd", "fresh")  # the unit shown, nothing written: no terminal
    # A workflow that post-flights by hand: validator mode, and what to remove.
    adopted = tmp_path / "adopted"
    copy_example(adopted)
    skill = adopted / ".claude" / "skills" / "research" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text(
        "## Stage 6: read the metadata file\n\n"
        'meta="specs/${task}_${slug}/.return-meta.json"\n'
        "status=$(jq -r '.status' \"$meta\")\n\n"
        "## Stage 10: clean up\n\n"
        "rm -f specs/${task}_${slug}/.return-meta.json\n",
        encoding="utf-8",
    )
    (adopted / "specs" / "errors.json").write_text('{"errors": []}\n', encoding="utf-8")
    run(t, "init", "--yes", "adopted")
    run(t, "init", "adopted")
    broken = tmp_path / "broken"
    (broken / ".claude").mkdir(parents=True)
    (broken / ".claude" / "settings.json").write_text('{"hooks": {\n', encoding="utf-8")
    run(t, "init", "--yes", "broken")
    # Said only when the temporary directory is under /tmp (TMPDIR may put it elsewhere):
    # checked here, then left out of the transcript.
    warned = [b for b in t.blocks if _PRIVATE_TMP in b]
    if str(tmp_path).startswith(("/tmp/", "/var/tmp/")):
        assert len(warned) == 1, t.blocks  # only with --systemd
    t.blocks = [_without_private_tmp(b) for b in t.blocks]
    compare(t, "init")


_PRIVATE_TMP = "postflightd: warning: <TMP>/fresh is under "
_PRIVATE_TMP_LINE = re.compile(
    r"\npostflightd: warning: <TMP>/fresh is under (/var)?/tmp, and the systemd unit sets "
    r"PrivateTmp=yes: the service gets a private, empty (/var)?/tmp and cannot see this root "
    r"\(its daemon would exit 2\)\. Keep the project outside (/var)?/tmp, or set PrivateTmp=no "
    r"with `systemctl --user edit 'postflightd@<TMP-UNIT>-fresh\.service'`\."
)


def _without_private_tmp(block: str) -> str:
    block = _PRIVATE_TMP_LINE.sub("", block)
    assert _PRIVATE_TMP not in block, block  # worded as the pattern says, or it is shown
    return block.removesuffix("\n--- stderr")


def test_hook_claude(tmp_path: Path) -> None:
    t = Transcript(tmp_path)
    root = project(tmp_path / "p", 2)
    write_meta(root, "1_task1", final_text(1))
    write_meta(root, "2_task2", '{"status": "researched", "artifacts": [')
    run(t, "hook", "claude", stdin="not json")
    run(t, "hook", "claude", stdin="[1, 2]")
    run(t, "hook", "claude", stdin='{"session_id": "s"}')
    run(t, "hook", "claude", stdin=json.dumps({"cwd": str(tmp_path / "elsewhere")}))
    # No transcript: the hook cannot tell whose file is whose, so it names the invalid one to
    # the person once, and applies the valid one.
    run(t, "hook", "claude", stdin=json.dumps({"cwd": str(root)}))
    run(t, "hook", "claude", stdin=json.dumps({"cwd": str(root)}))
    run(t, "hook", "claude", "--bogus", stdin="{}")
    compare(t, "hook")


def test_serve(tmp_path: Path) -> None:
    t = Transcript(tmp_path)
    root = example(tmp_path)
    run(t, "serve", "--port", "0", cwd=root)
    run(t, "serve", "missing", cwd=root)
    run(t, "serve", "--interval", "soon", cwd=root)
    run(t, "serve", "--token", "secret", cwd=root)
    run(t, "serve", "--token-file", "missing", cwd=root)
    (root / "token").write_text("secret\n")
    run(t, "serve", "--host", "192.0.2.1", "--token-file", "token", cwd=root)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        done = run(t, "serve", "--port", port, cwd=root, show=False)
        shown = f"[exit {done.returncode}]\n" + done.stderr.replace(port, "<PORT>")
        t.blocks.append(t.stable(f"$ postflightd serve --port <PORT>  (in use)\n{shown}".rstrip()))
    # Served until Ctrl-C: the address it announces, and a quiet stop.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    server = subprocess.Popen(
        [sys.executable, "-m", "postflightd", "serve", "--port", port],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert server.stderr is not None
    first = server.stderr.readline()
    wait_until("the dashboard answers", lambda: answers(int(port)), timeout=30)
    server.send_signal(signal.SIGINT)
    out, rest = server.communicate(timeout=30)
    _check_words([first, out, rest])
    shown = f"[exit {server.returncode}]\n{first}{rest}".replace(port, "<PORT>").rstrip()
    t.blocks.append(t.stable(f"$ postflightd serve --port <PORT>  (then Ctrl-C)\n{shown}"))
    compare(t, "serve")


def test_rules_schema_completion_check_return(tmp_path: Path) -> None:
    t = Transcript(tmp_path)
    run(t, "rules")
    run(t, "rules", "PF102")
    run(t, "rules", "PF999")
    schema = run(t, "schema", show=False)
    assert schema.returncode == 0
    assert schema.stderr == ""
    assert json.loads(schema.stdout)["type"] == "object"
    bash = run(t, "completion", "bash", show=False)
    assert bash.returncode == 0
    assert bash.stderr == ""
    assert "postflightd" in bash.stdout
    run(t, "completion", "tcsh")
    valid = {
        "status": "completed",
        "summary": "Researched the parser; report written.",
        "artifacts": [],
        "metadata": {
            "session_id": "sess_1736700000_abc123",
            "agent_type": "general-research-agent",
            "delegation_depth": 1,
            "delegation_path": ["orchestrator", "research", "general-research-agent"],
        },
    }
    run(t, "check-return", stdin=json.dumps(valid))
    run(t, "check-return", stdin=json.dumps({**valid, "status": "done"}))
    run(t, "check-return", stdin='{"status": "completed", "summary": "Do')
    run(t, "check-return", stdin="The research went well.")
    run(t, "check-return", "--expect-session", "sess_1736700000_zzz999", stdin=json.dumps(valid))
    run(t, "check-return", "missing.json")
    run(t, "check-return", "--root", "missing", stdin=json.dumps(valid))
    compare(t, "rules-check-return")


def test_watch_start_up_errors_and_bad_arguments(tmp_path: Path) -> None:
    t = Transcript(tmp_path)
    run(t)
    run(t, "--version")
    run(t, "frobnicate")
    run(t, "watch", str(tmp_path / "missing"))
    (tmp_path / "empty").mkdir()
    run(t, "watch", "empty")
    run(t, "watch", "--log-format", "yaml")
    run(t, "process")
    run(t, "history", "--limit", "many")
    user_config("[journal]\nkeep_days = -1\n")
    run(t, "history")
    compare(t, "watch-and-arguments")


def test_every_rule_explanation_reads_without_a_plural_s_or_a_doubled_word(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``rules CODE`` for every code (one, PF102, is in a transcript): read in this process,
    each checked for what reads wrong, and each naming its own code first."""
    from postflightd.cli import main
    from postflightd.rules.findings import RULES

    for code in RULES:
        assert main(["rules", code.lower()]) == 0
        out, err = capsys.readouterr()
        assert out.startswith(f"{code} ("), out
        assert err == ""
        _check_words([out])


def test_every_transcript_reads_without_a_plural_s_or_a_doubled_word() -> None:
    """The committed transcripts too: one edited by hand is checked as a generated one is."""
    texts = [p.read_text(encoding="utf-8") for p in sorted(MESSAGES.glob("*.txt"))]
    assert texts, "no transcripts"
    _check_words(texts)


def test_the_checks_catch_what_they_look_for() -> None:
    with pytest.raises(AssertionError, match="plural"):
        _check_words(["2 file(s) would change"])
    with pytest.raises(AssertionError, match="doubled"):
        _check_words(["<stdin>: valid subagent-return return"])
    with pytest.raises(AssertionError, match="doubled"):
        _check_words(["see the the journal"])
    _check_words(["-rw------- root root specs/x", "1 file, 2 files"])
