"""`postflightd mcp` as a client sees it: the real server started as a subprocess, spoken to by
the official MCP SDK's own client over stdio (every tool, and every malformed call, which gets
an MCP error and leaves the server answering)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from helpers.documents import SESSION, researched_doc, task_entry
from helpers.needs import require_extra
from helpers.project import META, project, write_meta

require_extra("mcp", "postflightd mcp runs on it")

from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

pytestmark = pytest.mark.slow

CLI = Path(sys.executable).parent / "postflightd"
OWN = "259_prove_completeness"


def with_server(
    root: Path,
    talk: Callable[[ClientSession], Awaitable[Any]],
    *,
    env: dict[str, str] | None = None,
    errlog_path: str = os.devnull,
) -> Any:
    """Start `postflightd mcp` in ``root``, initialize, run ``talk``, close it."""
    params = StdioServerParameters(command=str(CLI), args=["mcp"], cwd=str(root), env=env)

    async def main() -> Any:
        with open(errlog_path, "w", encoding="utf-8") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):  # noqa: SIM117
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await talk(session)

    return anyio.run(main)


async def call(session: ClientSession, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result
    (block,) = result.content
    value = json.loads(block.text)  # type: ignore[union-attr]
    assert value == result.structured_content
    return value  # type: ignore[no-any-return]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return project(
        tmp_path / "proj",
        [task_entry(259, "prove_completeness"), task_entry(260, "plan_it")],
        todo=True,
        artifacts=[259],
    )


def tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CLI), *args], cwd=root, capture_output=True, text=True, check=False, timeout=60
    )


def test_check_metadata_judges_the_document_about_to_be_written_as_scan_judges_the_file(
    root: Path,
) -> None:
    doc = researched_doc(OWN)
    doc["status"] = "research-done"
    doc["metadata"]["session_id"] = "sess_1736700000_zzz999"
    text = json.dumps(doc, indent=2)
    before = tree(root)

    async def talk(session: ClientSession) -> list[dict[str, Any]]:
        tools = await session.list_tools()
        assert {t.name for t in tools.tools} == {
            "check_metadata",
            "task_state",
            "explain_rule",
            "metadata_schema",
        }
        return [
            await call(session, "check_metadata", {"task": 259, "document": text}),
            await call(session, "check_metadata", {"task": "259", "document": doc}),
        ]

    given, as_object = with_server(root, talk)
    assert tree(root) == before  # nothing written
    assert given["valid"] is False and given["written"] is False
    assert given["checked"] == "the document given"
    fixes = {f["code"]: f["fix"] for f in given["findings"]}
    assert fixes["PF202"] == '"status": "researched"'
    assert fixes["PF405"] == f'"session_id": "{SESSION}"'
    # The same text `postflightd scan` prints for that document written as the file.
    write_meta(root, OWN, text)
    scan = cli(root, "scan", "--color", "never")
    assert given["text"] == scan.stdout
    assert as_object["findings"] == given["findings"]


def test_check_metadata_without_a_document_checks_the_file_on_disk(root: Path) -> None:
    write_meta(root, OWN, researched_doc(OWN))

    async def talk(session: ClientSession) -> dict[str, Any]:
        return await call(session, "check_metadata", {"task": f"specs/{OWN}/{META}"})

    answer = with_server(root, talk)
    assert answer["valid"] is True and answer["findings"] == []
    assert answer["checked"] == "the file on disk"
    assert answer["file"] == f"specs/{OWN}/{META}"
    assert (root / "specs" / OWN / META).exists()


def test_task_state_says_the_entry_the_session_the_marker_and_the_file(root: Path) -> None:
    marker = {"session_id": "sess_1736700000_mrk001", "operation": "research"}
    (root / "specs" / OWN / ".postflight-pending").write_text(json.dumps(marker), "utf-8")
    (root / "specs" / "260_plan_it").mkdir()
    write_meta(
        root,
        OWN,
        {"status": "in_progress", "started_at": "2026-01-08T14:00:00Z", "artifacts": []},
    )

    async def talk(session: ClientSession) -> list[dict[str, Any]]:
        return [
            await call(session, "task_state", {"task": 259}),
            await call(session, "task_state", {"task": str(root / "specs" / "260_plan_it")}),
        ]

    own, other = with_server(root, talk)
    assert own["task"] == 259 and own["task_dir"] == f"specs/{OWN}"
    assert own["state_entry"]["project_name"] == "prove_completeness"
    assert own["session"] == {"session_id": marker["session_id"], "from": ".postflight-pending"}
    assert own["marker"]["operation"] == "research"
    assert own["metadata_file"]["status"] == "in_progress"
    assert own["metadata_file"]["file"] == f"specs/{OWN}/{META}"
    assert other["session"] == {"session_id": SESSION, "from": "state.json"}
    assert other["marker"] is None and other["metadata_file"] is None


def test_explain_rule_and_metadata_schema_are_what_rules_and_schema_print(root: Path) -> None:
    async def talk(session: ClientSession) -> list[dict[str, Any]]:
        return [
            await call(session, "explain_rule", {"code": "pf405"}),
            await call(session, "explain_rule", {"code": "202"}),
            await call(session, "metadata_schema", {}),
        ]

    pf405, pf202, schema = with_server(root, talk)
    assert pf405["code"] == "PF405"
    assert pf405["text"] == cli(root, "rules", "PF405").stdout
    assert pf202["text"] == cli(root, "rules", "PF202").stdout
    assert schema == json.loads(cli(root, "schema").stdout)


def test_every_malformed_call_is_an_mcp_error_and_the_server_keeps_answering(
    root: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / META).write_text("{}", "utf-8")
    (root / "specs" / "261_linked").symlink_to(outside)
    (root / "specs" / "262_file_link").mkdir()
    (root / "specs" / "262_file_link" / META).symlink_to(outside / META)
    huge = json.dumps({"status": "researched", "pad": "x" * (1024 * 1024 + 1)})
    bad: list[tuple[str, dict[str, Any], str]] = [
        ("check_metadata", {"task": 999}, "task 999: no task directory"),
        ("check_metadata", {"task": "/etc/passwd"}, "not a task directory of this project"),
        ("check_metadata", {"task": f"specs/{OWN}/../../.."}, "not a task directory"),
        ("check_metadata", {"task": str(outside)}, "not a task directory"),
        ("check_metadata", {"task": "specs/261_linked"}, "refused, never followed"),
        ("check_metadata", {"task": 262}, "is a symbolic link"),
        ("task_state", {"task": "specs/261_linked"}, "refused, never followed"),
        ("check_metadata", {"task": 259, "document": huge}, "over the limit"),
        ("check_metadata", {"task": 259, "document": '{"status": '}, "document: not JSON"),
        ("check_metadata", {"task": 259, "document": 5}, "JSON text or an object"),
        ("check_metadata", {"task": 259}, "does not exist yet"),
        ("check_metadata", {"task": [259]}, "a task number or a path"),
        ("check_metadata", {"task": True}, "a task number or a path"),
        ("check_metadata", {}, "a task number or a path"),
        ("check_metadata", {"task": 259, "extra": 1}, "unknown argument"),
        ("explain_rule", {"code": 7}, "a string is wanted"),
        ("explain_rule", {"code": "PF999"}, "PF999"),
        ("explain_rule", {"code": "PF4"}, "a group of rules"),
        ("metadata_schema", {"x": 1}, "unknown argument"),
        ("no_such_tool", {}, "no tool"),
    ]
    before = tree(root)

    async def talk(session: ClientSession) -> list[str]:
        errors = []
        for tool, arguments, _ in bad:
            try:
                result = await session.call_tool(tool, arguments)
            except MCPError as exc:
                errors.append(exc.message)
            else:
                errors.append(f"answered: {result}")
        await call(session, "explain_rule", {"code": "PF102"})  # still answering
        return errors

    errors = with_server(root, talk)
    for (tool, arguments, expected), message in zip(bad, errors, strict=True):
        assert expected in message, (tool, arguments, message)
        assert "Traceback" not in message
    assert tree(root) == before


def test_every_value_returned_is_inert(root: Path) -> None:
    doc = researched_doc(OWN)
    doc["status"] = "\x1b]0;owned\x07\u202eresearched\ninjected"

    async def talk(session: ClientSession) -> str:
        result = await session.call_tool("check_metadata", {"task": 259, "document": doc})
        return json.dumps(result.structured_content) + result.content[0].text  # type: ignore[union-attr]

    seen = with_server(root, talk)
    for char in ("\x1b", "\x07", "\u202e", "\\u001b", "\\u202e"):
        assert char not in seen.replace("\\\\", "/"), char


def test_the_server_answers_before_it_imports_the_checks_and_imports_them_at_the_first_call(
    root: Path, tmp_path: Path
) -> None:
    # A runtime waits for the answer to initialize before the agent starts: the checks, the
    # reporter and the status code wait for the first tools/call, which still answers.
    errlog = tmp_path / "imports.txt"

    def imported() -> set[str]:
        lines = errlog.read_text("utf-8").splitlines()
        return {
            line.rsplit("|", 1)[-1].strip() for line in lines if line.startswith("import time:")
        }

    async def talk(session: ClientSession) -> tuple[set[str], set[str], dict[str, Any]]:
        await session.list_tools()
        before = imported()
        found = await call(session, "check_metadata", {"task": 259, "document": {"status": "x"}})
        return before, imported(), found

    before, after, found = with_server(
        root, talk, env={"PYTHONPROFILEIMPORTTIME": "1"}, errlog_path=str(errlog)
    )
    assert "postflightd.commands.mcp" in before and "mcp.server.lowlevel" in before
    lazy = {
        "postflightd.pipeline.check",
        "postflightd.reporters.scan",
        "postflightd.rules.metadata",
    }
    assert not lazy & before
    assert lazy <= after
    assert found["valid"] is False


def test_mcp_outside_a_project_says_so_without_a_traceback(tmp_path: Path) -> None:
    out = cli(tmp_path, "mcp")
    assert out.returncode == 2
    assert "Traceback" not in out.stderr and out.stderr.startswith("postflightd: ")
