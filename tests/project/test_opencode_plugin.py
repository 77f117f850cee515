"""The OpenCode plugin ``init`` writes, run under Node against a fake OpenCode client.

The plugin is TypeScript; Node 20 cannot run that, so esbuild (Debian's) strips its types first.
`postflightd` on the plugin's PATH is a stand-in that records what the plugin sent it and answers
what each test says; the last test runs the real CLI instead.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers.documents import researched_doc
from helpers.needs import require_tool
from helpers.project import project, task_status, write_meta
from postflightd.project.hook_files import packaged_plugin

NODE = shutil.which("node")
ESBUILD = shutil.which("esbuild")
DRIVER = Path(__file__).parents[1] / "fixtures" / "opencode" / "driver.mjs"
SESSION = "ses_4f1c2a"


@pytest.fixture(autouse=True)
def _node_and_esbuild() -> None:
    require_tool("node", "it runs the plugin (.ci/run installs nodejs)")
    require_tool("esbuild", "it strips the plugin's TypeScript types (.ci/run installs it)")


STAND_IN = """\
#!{python}
import json, os, sys, time
here = os.path.dirname(os.path.abspath(__file__))
calls = os.path.join(here, "calls.jsonl")
with open(calls, "a+", encoding="utf-8") as f:
    f.seek(0)
    n = len(f.readlines())
    f.write(json.dumps({{"argv": sys.argv[1:], "cwd": os.getcwd(),
                         "stdin": json.loads(sys.stdin.read())}}) + "\\n")
with open(os.path.join(here, "answers.json"), encoding="utf-8") as f:
    answers = json.load(f)
answer = answers[min(n, len(answers) - 1)]
time.sleep(answer.get("sleep", 0))
sys.stdout.write(answer["stdout"])
sys.exit(answer.get("exit", 0))
"""


def _plugin_js(tmp_path: Path) -> Path:
    source = tmp_path / "postflightd.ts"
    source.write_text(packaged_plugin(), encoding="utf-8")
    out = tmp_path / "postflightd.mjs"
    subprocess.run(
        [str(ESBUILD), str(source), "--loader:.ts=ts", "--format=esm", f"--outfile={out}"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return out


def _stand_in(tmp_path: Path, answers: list[dict[str, Any]]) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "postflightd"
    script.write_text(STAND_IN.format(python=sys.executable), encoding="utf-8")
    script.chmod(0o755)
    (bin_dir / "answers.json").write_text(json.dumps(answers), encoding="utf-8")
    return bin_dir


def _drive(
    tmp_path: Path,
    steps: list[dict[str, Any]],
    bin_dir: Path,
    path_before: str = "",
    **scenario: Any,
) -> dict[str, Any]:
    directory = tmp_path / "proj"
    directory.mkdir(exist_ok=True)
    scenario_path = tmp_path / "scenario.json"
    scenario_path.write_text(
        json.dumps({"directory": str(directory), "steps": steps, **scenario}), encoding="utf-8"
    )
    path = f"{path_before}{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {**os.environ, "PATH": path}
    run = subprocess.run(
        [str(NODE), str(DRIVER), str(_plugin_js(tmp_path)), str(scenario_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    record: dict[str, Any] = json.loads(run.stdout.splitlines()[-1])
    assert record["thrown"] == [], record["thrown"]
    return record


def _calls(bin_dir: Path) -> list[dict[str, Any]]:
    calls = bin_dir / "calls.jsonl"
    if not calls.exists():
        return []
    return [json.loads(line) for line in calls.read_text(encoding="utf-8").splitlines()]


def _idle(session: str = SESSION) -> dict[str, Any]:
    return {"event": {"type": "session.idle", "properties": {"sessionID": session}}}


def _write(path: str, session: str = SESSION, tool: str = "write") -> list[dict[str, Any]]:
    """A write tool call as OpenCode reports it: arguments before, and after with its result."""
    call = {"tool": tool, "sessionID": session, "callID": f"call_{path}"}
    return [
        {"hook": "tool.execute.before", "input": call, "output": {"args": {"filePath": path}}},
        {
            "hook": "tool.execute.after",
            "input": {**call, "args": {"filePath": path}},
            "output": {"title": path, "output": "", "metadata": {}},
        },
    ]


REASON = "repair specs/1_x/.return-meta.json"
BLOCK = {"stdout": json.dumps({"decision": "block", "reason": REASON})}
NOTHING = {"stdout": "{}"}


def test_a_block_answer_sends_its_reason_once_as_a_prompt(tmp_path: Path) -> None:
    bin_dir = _stand_in(tmp_path, [BLOCK])
    meta = str(tmp_path / "proj" / "specs" / "1_x" / ".return-meta.json")
    record = _drive(tmp_path, [*_write(meta), _write("notes.md", tool="read")[1], _idle()], bin_dir)
    assert record["exports"] == ["PostflightdPlugin"]  # OpenCode loads every export as a plugin
    assert record["prompts"] == [
        {
            "path": {"id": SESSION},
            "body": {"parts": [{"type": "text", "text": REASON}]},
        }
    ]
    [call] = _calls(bin_dir)
    assert call["argv"] == ["hook", "opencode"]
    assert call["cwd"] == "/"  # never the project, which agents write; its input names it
    assert call["stdin"] == {
        "session_id": SESSION,
        "cwd": str(tmp_path / "proj"),
        "files": [meta],  # what it wrote, not what it read
        "commands": [],
        "attempt": 0,
    }


def test_a_postflightd_in_the_project_never_runs_whatever_the_path(tmp_path: Path) -> None:
    """An empty PATH entry (``PATH=$EXTRA:$PATH`` with EXTRA unset) and ``.`` name the working
    directory: the plugin takes postflightd from PATH's absolute entries only, and runs it
    from ``/``, so an executable an agent put in the project is never run."""
    bin_dir = _stand_in(tmp_path, [NOTHING])
    mark = tmp_path / "planted-ran"
    for where in ("proj", "proj/specs"):
        planted = tmp_path / where / "postflightd"
        planted.parent.mkdir(parents=True, exist_ok=True)
        planted.write_text(f"#!/bin/sh\necho ran >> {mark}\necho '{{}}'\n", encoding="utf-8")
        planted.chmod(0o755)
    steps = [*_write("specs/1_x/.return-meta.json"), _idle()]
    for path_before in (os.pathsep, f".{os.pathsep}", f"specs{os.pathsep}"):
        _drive(tmp_path, steps, bin_dir, path_before=path_before)
    assert not mark.exists(), mark.read_text(encoding="utf-8")
    calls = _calls(bin_dir)
    assert len(calls) == 3
    assert {call["cwd"] for call in calls} == {"/"}


def test_an_empty_answer_sends_no_prompt(tmp_path: Path) -> None:
    bin_dir = _stand_in(tmp_path, [NOTHING])
    record = _drive(tmp_path, [*_write("specs/1_x/.return-meta.json"), _idle()], bin_dir)
    assert record["prompts"] == []
    assert record["toasts"] == []
    # A relative path is made absolute against the project directory.
    [call] = _calls(bin_dir)
    assert call["stdin"]["files"] == [str(tmp_path / "proj" / "specs/1_x/.return-meta.json")]


def test_the_session_status_idle_event_and_session_idle_together_run_the_hook_once(
    tmp_path: Path,
) -> None:
    """OpenCode sends both when a session goes idle; only idle status counts, busy does not."""
    bin_dir = _stand_in(tmp_path, [BLOCK])
    status = {"type": "session.status", "properties": {"sessionID": SESSION}}
    steps = [
        {"event": {**status, "properties": {"sessionID": SESSION, "status": {"type": "busy"}}}},
        {
            "concurrently": [
                {**status, "properties": {"sessionID": SESSION, "status": {"type": "idle"}}},
                _idle()["event"],
            ]
        },
    ]
    record = _drive(tmp_path, steps, bin_dir)
    assert len(_calls(bin_dir)) == 1
    assert len(record["prompts"]) == 1


def test_the_counter_stops_prompting_after_three_blocks_in_a_row(tmp_path: Path) -> None:
    bin_dir = _stand_in(tmp_path, [BLOCK])
    meta = str(tmp_path / "proj" / "specs" / "1_x" / ".return-meta.json")
    record = _drive(tmp_path, [*_write(meta)] + [_idle()] * 5, bin_dir)
    assert len(record["prompts"]) == 3
    # The hook is still asked (it may apply other files), told how many prompts were sent.
    assert [c["stdin"]["attempt"] for c in _calls(bin_dir)] == [0, 1, 2, 3, 3]
    assert all(c["stdin"]["files"] == [meta] for c in _calls(bin_dir))


def test_an_answer_without_a_block_resets_the_counter_and_the_files(tmp_path: Path) -> None:
    bin_dir = _stand_in(tmp_path, [BLOCK, BLOCK, NOTHING, BLOCK])
    record = _drive(tmp_path, [*_write("a.json"), _idle(), _idle(), _idle(), _idle()], bin_dir)
    assert len(record["prompts"]) == 3
    calls = _calls(bin_dir)
    assert [c["stdin"]["attempt"] for c in calls] == [0, 1, 2, 0]
    assert calls[3]["stdin"]["files"] == []


def test_sessions_are_counted_and_tracked_apart(tmp_path: Path) -> None:
    bin_dir = _stand_in(tmp_path, [BLOCK])
    steps = [*_write("a.json", "ses_a"), *_write("b.json", "ses_b"), _idle("ses_a"), _idle("ses_b")]
    record = _drive(tmp_path, steps, bin_dir)
    assert [p["path"]["id"] for p in record["prompts"]] == ["ses_a", "ses_b"]
    files = {c["stdin"]["session_id"]: c["stdin"]["files"] for c in _calls(bin_dir)}
    assert files == {
        "ses_a": [str(tmp_path / "proj" / "a.json")],
        "ses_b": [str(tmp_path / "proj" / "b.json")],
    }


def test_shell_commands_are_sent_as_they_are(tmp_path: Path) -> None:
    """The plugin cannot tell what a shell command wrote: the hook reads the files it names."""
    bin_dir = _stand_in(tmp_path, [NOTHING])
    command = "cat > specs/1_x/.return-meta.json <<'EOF'\n{}\nEOF"
    call = {"tool": "bash", "sessionID": SESSION, "callID": "c1"}
    steps = [
        {"hook": "tool.execute.before", "input": call, "output": {"args": {"command": command}}},
        {"hook": "tool.execute.after", "input": call, "output": {"metadata": {}}},
        _idle(),
    ]
    _drive(tmp_path, steps, bin_dir)
    [sent] = _calls(bin_dir)
    assert (sent["stdin"]["commands"], sent["stdin"]["files"]) == ([command], [])


def test_dispose_waits_for_the_check_under_way(tmp_path: Path) -> None:
    """OpenCode does not await an event handler, but awaits dispose before it ends (`opencode
    run` ends at the session's first idle): dispose returns once the hook has answered and
    the reason was sent."""
    bin_dir = _stand_in(tmp_path, [{**BLOCK, "sleep": 1.0}, NOTHING])
    steps = [*_write("a.json"), {"event_unawaited": _idle()["event"]}, {"dispose": True}]
    record = _drive(tmp_path, steps, bin_dir)
    assert len(_calls(bin_dir)) == 1
    assert len(record["prompts"]) == 1
    assert record["disposed_after"] == ["prompt"]


def test_patch_results_name_the_files_they_wrote(tmp_path: Path) -> None:
    """apply_patch has no filePath argument: its result's metadata lists the files (a moved
    file by where it went)."""
    bin_dir = _stand_in(tmp_path, [NOTHING])
    after = {
        "hook": "tool.execute.after",
        "input": {"tool": "apply_patch", "sessionID": SESSION, "callID": "c1"},
        "output": {
            "title": "",
            "output": "",
            "metadata": {
                "files": [
                    {"filePath": "/p/specs/2_y/.return-meta.json", "type": "add"},
                    {"filePath": "/p/old.md", "movePath": "/p/new.md", "type": "move"},
                ]
            },
        },
    }
    _drive(tmp_path, [after, _idle()], bin_dir)
    [call] = _calls(bin_dir)
    assert call["stdin"]["files"] == ["/p/specs/2_y/.return-meta.json", "/p/new.md"]


def test_a_message_for_the_person_is_shown_as_a_toast(tmp_path: Path) -> None:
    answer = {"stdout": json.dumps({"systemMessage": "postflightd: 1 invalid file not yours"})}
    record = _drive(tmp_path, [_idle()], _stand_in(tmp_path, [answer]), toast_fails=True)
    assert record["toasts"] == [
        {"body": {"message": "postflightd: 1 invalid file not yours", "variant": "warning"}}
    ]
    assert record["prompts"] == []


@pytest.mark.parametrize(
    "answer",
    [
        {"stdout": "Traceback (most recent call last):\n", "exit": 1},
        {"stdout": json.dumps({"decision": "block", "reason": "x"}), "exit": 2},
        {"stdout": "{not json"},
        {"stdout": "null"},
        {"stdout": json.dumps({"decision": "block"})},
        {"stdout": json.dumps({"decision": "block", "reason": ["not", "text"]})},
        {"stdout": ""},
    ],
    ids=["crash", "usage-error", "bad-json", "null", "no-reason", "reason-not-text", "empty"],
)
def test_a_failing_hook_or_an_answer_that_is_not_a_block_sends_nothing_and_throws_nothing(
    tmp_path: Path, answer: dict[str, Any]
) -> None:
    record = _drive(tmp_path, [*_write("a.json"), _idle()], _stand_in(tmp_path, [answer]))
    assert record["prompts"] == []


def test_no_postflightd_on_the_path_and_a_failing_client_throw_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    steps = [
        *_write("a.json"),
        _idle(),
        {"hook": "tool.execute.after", "input": None, "output": None},
        {"hook": "tool.execute.before", "input": {"tool": "write"}, "output": None},
        {"event": None},
        {"event": {"type": "session.idle"}},
        {"event": {"type": "session.status", "properties": None}},
    ]
    env_path = os.environ.get("PATH", "")
    without = [p for p in env_path.split(os.pathsep) if not (Path(p) / "postflightd").exists()]
    monkeypatch.setenv("PATH", os.pathsep.join(without))
    record = _drive(tmp_path, steps, empty)
    assert record["prompts"] == []
    monkeypatch.setenv("PATH", env_path)
    # The server failing the prompt is caught too.
    bin_dir = _stand_in(tmp_path, [BLOCK])
    record = _drive(tmp_path, [_idle()], bin_dir, prompt_fails=True)
    assert len(record["prompts"]) == 1


def _real_hook_opencode() -> subprocess.CompletedProcess[str]:
    """`postflightd hook opencode --help` from the installed CLI (the adapter the plugin calls)."""
    script = Path(sys.executable).with_name("postflightd")
    return subprocess.run(
        [str(script), "hook", "opencode", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_end_to_end_through_the_real_cli(tmp_path: Path) -> None:
    """The plugin, the real `postflightd hook opencode`, a real project: the session's invalid
    file is a prompt; rewritten valid, it is applied and nothing more is sent."""
    # The command exists: a CLI that cannot run it is a failure, never a reason to skip.
    usage = _real_hook_opencode()
    assert usage.returncode == 0, usage.stdout + usage.stderr
    root = project(tmp_path / "proj", 1)
    bad = write_meta(root, "1_task1", {**researched_doc("1_task1"), "status": "nonsense"})
    bin_dir = Path(sys.executable).parent
    first = _drive(tmp_path, [*_write(str(bad)), _idle()], bin_dir)
    [prompt] = first["prompts"]
    assert "1_task1/.return-meta.json" in prompt["body"]["parts"][0]["text"]
    assert bad.exists()

    write_meta(root, "1_task1", researched_doc("1_task1"))
    second = _drive(tmp_path, [*_write(str(bad)), _idle()], bin_dir)
    assert second["prompts"] == []
    assert not bad.exists()
    assert task_status(root, 1) == "researched"
