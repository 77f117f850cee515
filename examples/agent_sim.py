#!/usr/bin/env python3
"""A simulated AI coding agent: it writes its metadata file the way real agents do.

    python examples/agent_sim.py ROOT 259_prove_completeness --steps 3 --interval 1

It writes ``specs/<task>/.return-meta.json`` with ``"status": "in_progress"`` (with a
heredoc-like, non-atomic write), rewrites it with progress (stage, phases) every
``--interval`` seconds, writes its artifact, then writes the final status with the chosen
``--write`` pattern. Standard library only, so it runs anywhere ``postflightd`` is tried out.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import string
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

META = ".return-meta.json"
OPERATIONS = {
    "researched": ("research", "report", "reports/research-001.md"),
    "planned": ("plan", "plan", "plans/implementation-001.md"),
    "implemented": ("implement", "summary", "summaries/implementation-summary.md"),
    "partial": ("implement", "summary", "summaries/implementation-summary.md"),
    "failed": ("implement", "summary", "summaries/implementation-summary.md"),
    "blocked": ("implement", "summary", "summaries/implementation-summary.md"),
}


def new_session() -> str:
    suffix = "".join(random.choices(string.ascii_lowercase + string.digits, k=6))  # noqa: S311 - an id, not a secret
    return f"sess_{int(time.time())}_{suffix}"


def delegated_session(specs: Path, task: str) -> str | None:
    """The session the orchestrator delegated: the marker's, else the task's in state.json."""
    for source in (specs / task / ".postflight-pending", specs / "state.json"):
        try:
            doc = json.loads(source.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if source.name != "state.json":
            sid = doc.get("session_id") if isinstance(doc, dict) else None
        else:
            number = int(task.split("_", 1)[0]) if task.split("_", 1)[0].isdigit() else None
            tasks = doc.get("active_projects", []) if isinstance(doc, dict) else []
            entry: dict[str, Any] = next(
                (t for t in tasks if t.get("project_number") == number), {}
            )
            sid = entry.get("session_id")
        if isinstance(sid, str) and sid:
            return sid
    return None


def metadata(session: str, operation: str, phases_done: int, phases: int) -> dict[str, Any]:
    agent = f"general-{operation}-agent"
    return {
        "session_id": session,
        "agent_type": agent,
        "delegation_depth": 1,
        "delegation_path": ["orchestrator", operation, agent],
        "phases_completed": phases_done,
        "phases_total": phases,
    }


def write(path: Path, doc: dict[str, Any], pattern: str) -> None:
    """Write ``doc`` to ``path`` the way one kind of agent does."""
    text = json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    if pattern == "heredoc":
        # `cat > file <<EOF`: created empty, then filled, then closed; readable half-written.
        with path.open("w", encoding="utf-8") as fh:
            half = len(text) // 2
            fh.write(text[:half])
            fh.flush()
            time.sleep(0.01)
            fh.write(text[half:])
    elif pattern == "rename":
        # Write a temporary file next to it, then rename over it (atomic).
        tmp = path.with_name(f".{META}.{os.getpid()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    elif pattern == "jq":
        # `jq ... > /tmp/x && mv /tmp/x file`: a rename from outside the directory.
        fd, tmp_name = tempfile.mkstemp(suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        if _same_fs(Path(tmp_name), path):
            Path(tmp_name).replace(path)
        else:
            _move(tmp_name, path)
    else:
        raise SystemExit(f"unknown --write pattern {pattern!r}")


def _same_fs(a: Path, b: Path) -> bool:
    return a.stat().st_dev == b.parent.stat().st_dev


def _move(src: str, dst: Path) -> None:
    # `mv` across filesystems is a copy then a delete: the copy is readable half-written.
    with Path(src).open("rb") as fin, dst.open("wb") as fout:
        while chunk := fin.read(64):
            fout.write(chunk)
    Path(src).unlink()


def run(args: argparse.Namespace) -> int:
    root = Path(args.root).resolve()
    task_dir = root / args.specs_dir / args.task
    task_dir.mkdir(parents=True, exist_ok=True)
    path = task_dir / META
    operation, artifact_type, artifact_rel = OPERATIONS[args.final]
    session = args.session or delegated_session(root / args.specs_dir, args.task) or new_session()
    started = datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
    phases = max(args.steps, 1)

    def progress(done: int, stage: str) -> dict[str, Any]:
        return {
            "status": "in_progress",
            "started_at": started,
            "artifacts": [],
            "partial_progress": {
                "stage": stage,
                "details": f"{operation}: step {done} of {phases}",
                "phases_completed": done,
                "phases_total": phases,
            },
            "metadata": metadata(session, operation, done, phases),
        }

    write(path, progress(0, "starting"), "heredoc")
    print(f"agent {session}: in_progress -> {path}", file=sys.stderr)
    for step in range(1, args.steps + 1):
        time.sleep(args.interval)
        write(path, progress(step, f"phase {step}"), args.write)
        print(f"agent {session}: phase {step}/{phases}", file=sys.stderr)
    time.sleep(args.interval)

    artifact = task_dir / artifact_rel
    artifact.parent.mkdir(parents=True, exist_ok=True)
    artifact.write_text(f"# {args.task}: {operation} output\n\nWritten by agent_sim.\n", "utf-8")
    rel = artifact.relative_to(root).as_posix()
    final: dict[str, Any] = {
        "status": args.final,
        "artifacts": [{"type": artifact_type, "path": rel, "summary": f"{operation} output"}],
        "next_steps": "Review the output",
        "metadata": metadata(session, operation, phases, phases),
    }
    if args.final == "implemented":
        final["completion_data"] = {
            "completion_summary": "Implemented every phase of the plan.",
            "roadmap_items": [],
        }
    if args.final in ("partial", "failed", "blocked"):
        final["errors"] = [
            {
                "type": "execution",
                "message": f"simulated {args.final} run",
                "recoverable": args.final != "failed",
                "recommendation": "Resume the run",
            }
        ]
    write(path, final, args.write)
    print(f"agent {session}: {args.final} -> {path}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("root", help="project root (holding specs/)")
    parser.add_argument("task", help="task directory name, e.g. 259_prove_completeness")
    parser.add_argument("--final", choices=sorted(OPERATIONS), default="researched")
    parser.add_argument("--steps", type=int, default=2, help="progress updates to write")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between writes")
    parser.add_argument("--write", choices=("heredoc", "rename", "jq"), default="rename")
    parser.add_argument(
        "--session",
        help="session id (default: the delegated one from the marker or state.json, else new)",
    )
    parser.add_argument("--specs-dir", default="specs")
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
