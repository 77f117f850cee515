"""``postflightd rules CODE``: what each rule checks, why, and a bad and a fixed example.

Kept apart from the registry in findings.py (which holds the one-line summary and severity
every command reads): this is documentation, read only by ``rules CODE``. A test checks that
every registered code has an entry here.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Final

from postflightd.rules.findings import RULES


@dataclass(frozen=True, slots=True)
class Explanation:
    what: str
    why: str
    #: the offending document (or fragment, or situation), then the same fixed
    bad: str
    fixed: str


_AGENT_META = (
    '"metadata": {"session_id": "sess_1736700000_abc123", "agent_type": "general-research-agent",\n'
    '             "delegation_depth": 1,\n'
    '             "delegation_path": ["orchestrator", "research", "general-research-agent"]}'
)

EXPLANATIONS: Final[dict[str, Explanation]] = {
    "PF100": Explanation(
        what="The metadata path is a symbolic link, a directory, a FIFO or another non-regular "
        "file, or it is reached through a symlinked task directory.",
        why="Agents write into the tree and can be wrong or prompt-injected: a link could make "
        "postflightd read, or later delete, a file outside the project. Such a path is refused "
        "and never followed.",
        bad="specs/259_prove_completeness/.return-meta.json -> /home/me/.ssh/config",
        fixed="specs/259_prove_completeness/.return-meta.json   (a regular file the agent wrote)",
    ),
    "PF101": Explanation(
        what="The metadata file is larger than [validation] max_file_bytes (1 MiB by default).",
        why="A metadata file is a short JSON object; a huge one is a mistake (a log pasted in) "
        "or an attack, and reading it would cost memory and time for every command.",
        bad='{"status": "researched", "next_steps": "<3 MB of build log>", ...}',
        fixed='{"status": "researched", "next_steps": "See reports/research-001.md", ...}',
    ),
    "PF102": Explanation(
        what="The file is not UTF-8, or not valid JSON once it has settled (truncated, NaN, a "
        "byte-order mark, trailing commas, nested too deep).",
        why="Nothing else can be known about a file that does not parse, so this is reported "
        "alone. The daemon waits for the settle time first: a file still being written is never "
        "reported.",
        bad='{"status": "researched", "artifacts": [',
        fixed='{"status": "researched", "artifacts": [], ...}',
    ),
    "PF103": Explanation(
        what="The top-level JSON value is not an object.",
        why="Every field the schema defines lives in a top-level object.",
        bad='["researched", "specs/259_prove_completeness/reports/research-001.md"]',
        fixed='{"status": "researched", "artifacts": [{"path": "specs/259_.../research-001.md"}], ...}',
    ),
    "PF104": Explanation(
        what="The task directory's name is not {number}_{slug}.",
        why="The task number is read from the directory name: without it the outcome cannot be "
        "applied to the right task in state.json.",
        bad="specs/prove-completeness/.return-meta.json",
        fixed="specs/259_prove_completeness/.return-meta.json",
    ),
    "PF105": Explanation(
        what="The metadata file exists but cannot be read (permission denied, an I/O error).",
        why="An unreadable file can be neither validated nor applied; it is reported so that "
        "it is not silently skipped.",
        bad="-rw------- root root specs/259_prove_completeness/.return-meta.json",
        fixed="-rw-r--r-- me   me   specs/259_prove_completeness/.return-meta.json",
    ),
    "PF106": Explanation(
        what="The file validates, but its outcome cannot be recorded: a value no UTF-8 file or "
        "journal row can hold (a lone surrogate such as \\ud800, a task directory name that is "
        "not UTF-8), or an integer json cannot print (resume_phase past 4,300 digits).",
        why="One such file must not stop the others: it is left out of its batch, kept and "
        "reported, and every other file of the batch is applied.",
        bad='"metadata": {"session_id": "sess_1736700000_\\ud800", ...}',
        fixed='"metadata": {"session_id": "sess_1736700000_abc123", ...}',
    ),
    "PF200": Explanation(
        what="A field postflight needs is missing: status, artifacts, metadata, "
        "metadata.session_id, an artifact's path, an error's message, or a nested required "
        "field of partial_progress or completion_data.",
        why="Without these the outcome cannot be applied or recorded correctly.",
        bad='{"status": "researched", "metadata": {"agent_type": "general-research-agent"}}',
        fixed='{"status": "researched", "artifacts": [...],\n ' + _AGENT_META + "}",
    ),
    "PF201": Explanation(
        what="A field has the wrong JSON type (a number written as a string, a boolean as a "
        "string, an object where a list belongs).",
        why='Types are checked strictly: "1" is not an integer and 1 is not a boolean, so a '
        "workflow reading the field with jq gets what the schema promises.",
        bad='"metadata": {..., "delegation_depth": "1"}',
        fixed='"metadata": {..., "delegation_depth": 1}',
    ),
    "PF202": Explanation(
        what="status is not one of in_progress, researched, planned, implemented, partial, "
        "failed, blocked.",
        why="The status decides what postflight does; an unknown one makes the outcome "
        "ambiguous. The message names the status it probably means. It hides no other "
        "finding: the rules that depend on the status take it for the one the message "
        "suggests; with none suggested, the artifacts are checked as for a success (a missing "
        "file is an error) and the rules that need the very status (PF300, PF302-PF305, "
        "PF307-PF309) wait for it.",
        bad='{"status": "research_done", ...}',
        fixed='{"status": "researched", ...}',
    ),
    "PF203": Explanation(
        what='status is "completed".',
        why="It is forbidden in this file: it triggers the agent runtime's stop behaviour. "
        "The success statuses say which operation finished.",
        bad='{"status": "completed", ...}',
        fixed='{"status": "implemented", ...}   (or "researched" / "planned")',
    ),
    "PF204": Explanation(
        what="An artifact's type is not report, plan, summary or implementation.",
        why='"research" is read as report; any other type is stored as written and not linked '
        "in TODO.md, which is rarely what the agent meant.",
        bad='"artifacts": [{"type": "research", "path": "specs/259_x/reports/research-001.md", ...}]',
        fixed='"artifacts": [{"type": "report", "path": "specs/259_x/reports/research-001.md", ...}]',
    ),
    "PF205": Explanation(
        what="A field the schema does not define.",
        why="Newer agent systems add fields, so unknown keys are kept and only reported: a "
        "misspelt field (next_step for next_steps) shows up here.",
        bad='{"status": "researched", "next_step": "Plan the proof", ...}',
        fixed='{"status": "researched", "next_steps": "Plan the proof", ...}',
    ),
    "PF206": Explanation(
        what="A required text field is empty or blank (session_id, an artifact's path, an "
        "error's message, partial_progress.stage or details): an error. Optional text given "
        "blank (next_steps, a delegation_path or roadmap_items entry) is a warning.",
        why="An empty string satisfies the type but carries nothing postflight can use.",
        bad='"errors": [{"type": "timeout", "message": "  ", "recoverable": true, ...}]',
        fixed='"errors": [{"type": "timeout", "message": "lake build timed out", ...}]',
    ),
    "PF207": Explanation(
        what="A field the schema asks for but postflight can do without is missing or blank "
        "(metadata.agent_type, delegation_depth, delegation_path, an artifact's type or "
        "summary, an error's type, recoverable or recommendation).",
        why="Real agents drift from the schema; the outcome is still applied, and --strict or "
        "a severity override enforces the full contract.",
        bad='"artifacts": [{"path": "specs/259_x/reports/research-001.md"}]',
        fixed='"artifacts": [{"type": "report", "path": "specs/259_x/reports/research-001.md",\n'
        '               "summary": "Survey of completeness proofs"}]',
    ),
    "PF208": Explanation(
        what="An artifact is given as a plain path string instead of an object.",
        why='It is read as {"path": ...} with its type taken from its folder (reports/, '
        "plans/, summaries/), so the outcome is applied; the object form says what it is.",
        bad='"artifacts": ["specs/259_x/reports/research-001.md"]',
        fixed='"artifacts": [{"type": "report", "path": "specs/259_x/reports/research-001.md",\n'
        '               "summary": "Survey of completeness proofs"}]',
    ),
    "PF300": Explanation(
        what="status is in_progress but started_at is missing.",
        why="Stuck detection measures from started_at: without it a dead agent would never be "
        "noticed.",
        bad='{"status": "in_progress", ...}',
        fixed='{"status": "in_progress", "started_at": "2026-01-08T14:30:00Z", ...}',
    ),
    "PF301": Explanation(
        what="started_at is not an ISO 8601 timestamp, or lies more than 5 minutes in the future.",
        why="A future start would postpone stuck detection indefinitely; an unparseable one "
        "disables it.",
        bad='"started_at": "08/01/2026 14:30"',
        fixed='"started_at": "2026-01-08T14:30:00Z"',
    ),
    "PF302": Explanation(
        what="status is in_progress or partial without partial_progress.",
        why="partial_progress (stage, details) is what status shows for a running run and what "
        "a resumed run starts from.",
        bad='{"status": "partial", ...}',
        fixed='{"status": "partial", "partial_progress": {"stage": "phase 2", '
        '"details": "proved lemmas 1-3", "phases_completed": 2, "phases_total": 4}, ...}',
    ),
    "PF303": Explanation(
        what="status is implemented without completion_data.",
        why="completion_data.completion_summary is copied to the task in state.json: a "
        "completed task must say what was done.",
        bad='{"status": "implemented", "artifacts": [...], ...}',
        fixed='{"status": "implemented", "artifacts": [...],\n'
        ' "completion_data": {"completion_summary": "Proved completeness for the fragment"}, ...}',
    ),
    "PF304": Explanation(
        what="status is implemented and completion_data.completion_summary is empty.",
        why="An empty summary is copied to state.json as if it said something.",
        bad='"completion_data": {"completion_summary": ""}',
        fixed='"completion_data": {"completion_summary": "Proved completeness for the fragment"}',
    ),
    "PF305": Explanation(
        what="A meta task (language meta in state.json) is implemented without "
        "completion_data.claudemd_suggestions.",
        why="Meta tasks change the agent system itself; the suggestions say which instruction "
        'files should change ("none" when none).',
        bad='"completion_data": {"completion_summary": "Added the review agent"}',
        fixed='"completion_data": {"completion_summary": "Added the review agent",\n'
        '                    "claudemd_suggestions": "none"}',
    ),
    "PF306": Explanation(
        what="roadmap_items on a meta task, or claudemd_suggestions on a non-meta task.",
        why="Each belongs to one kind of task; on the other it is copied to state.json where "
        "nothing reads it.",
        bad='(task 259, language lean4) "completion_data": {..., "claudemd_suggestions": "none"}',
        fixed='(task 259, language lean4) "completion_data": {..., "roadmap_items": ["Completeness"]}',
    ),
    "PF307": Explanation(
        what="status is partial, failed or blocked with no errors entry.",
        why="errors.json records why a run did not succeed; without an entry postflight "
        "records a generic error and the reason is lost.",
        bad='{"status": "failed", "artifacts": [], ...}',
        fixed='{"status": "failed", "artifacts": [], "errors": [{"type": "build_error",\n'
        ' "message": "lake build failed in Completeness.lean", "recoverable": true,\n'
        ' "recommendation": "fix the import cycle, then resume"}], ...}',
    ),
    "PF308": Explanation(
        what="partial_progress is still present on a success status.",
        why="It is a leftover of the in_progress file; it suggests the run did not finish.",
        bad='{"status": "researched", "partial_progress": {"stage": "searching", ...}, ...}',
        fixed='{"status": "researched", ...}',
    ),
    "PF309": Explanation(
        what="completion_data on a status other than implemented.",
        why="It is only read for implemented; elsewhere it is ignored, which the writer "
        "probably did not intend.",
        bad='{"status": "planned", "completion_data": {...}, ...}',
        fixed='{"status": "planned", ...}',
    ),
    "PF310": Explanation(
        what="phases_completed is negative or greater than phases_total.",
        why="resume_phase is computed from it; an impossible count resumes at a phase that "
        "does not exist.",
        bad='"partial_progress": {..., "phases_completed": 5, "phases_total": 4}',
        fixed='"partial_progress": {..., "phases_completed": 3, "phases_total": 4}',
    ),
    "PF400": Explanation(
        what="session_id is not sess_{unix seconds}_{6 lower-case letters or digits}.",
        why="Workflows generate ids of this form; another form usually means the agent made "
        "one up instead of returning the one it was given.",
        bad='"session_id": "research-session-1"',
        fixed='"session_id": "sess_1736700000_abc123"',
    ),
    "PF401": Explanation(
        what="delegation_depth is below 0 or above the maximum of 3.",
        why="A bounded delegation depth is the safety against runaway agent chains.",
        bad='"delegation_depth": 4',
        fixed='"delegation_depth": 1',
    ),
    "PF402": Explanation(
        what="delegation_path names an agent twice.",
        why="An agent appearing twice is a delegation cycle.",
        bad='"delegation_path": ["orchestrator", "research", "orchestrator", "research"]',
        fixed='"delegation_path": ["orchestrator", "research", "general-research-agent"]',
    ),
    "PF403": Explanation(
        what="delegation_depth is not len(delegation_path) - 2.",
        why="The two fields describe the same chain; when they disagree one of them is wrong.",
        bad='"delegation_depth": 3,\n"delegation_path": ["orchestrator", "research", "agent"]',
        fixed='"delegation_depth": 1,\n"delegation_path": ["orchestrator", "research", "agent"]',
    ),
    "PF404": Explanation(
        what="agent_type is not the last entry of delegation_path.",
        why="The last entry of the path is the agent that wrote the file.",
        bad='"agent_type": "planner-agent",\n"delegation_path": ["orchestrator", "plan", "planner"]',
        fixed='"agent_type": "planner",\n"delegation_path": ["orchestrator", "plan", "planner"]',
    ),
    "PF405": Explanation(
        what="metadata.session_id differs from the expected session: the .postflight-pending "
        "marker's session_id, else the task's session_id in state.json (no check when neither "
        "exists).",
        why="The outcome of another run (a stale file, a foreign or replayed agent) must not be "
        "applied to this task. When the expected session comes from state.json, the usual "
        "cause is a pre-flight that did not record the run: state.json's session is the one "
        "the task was last delegated with, so a run delegated without writing the marker (and "
        "without updating state.json) looks foreign. Write the marker before delegating.",
        bad='specs/259_x/.postflight-pending: {"session_id": "sess_1736700000_abc123", ...}\n'
        'specs/259_x/.return-meta.json:    {"metadata": {"session_id": "sess_1736699999_zzz999", ...}}',
        fixed='specs/259_x/.postflight-pending: {"session_id": "sess_1736700000_abc123", ...}\n'
        'specs/259_x/.return-meta.json:    {"metadata": {"session_id": "sess_1736700000_abc123", ...}}',
    ),
    "PF406": Explanation(
        what="metadata.duration_seconds is negative.",
        why="A negative duration is a clock or arithmetic error; reports would average it in.",
        bad='"duration_seconds": -42',
        fixed='"duration_seconds": 1830',
    ),
    "PF500": Explanation(
        what="A success status (researched, planned, implemented) with no artifacts.",
        why="A success with nothing to show is a phantom operation: the task would advance "
        "with no report, plan or summary behind it.",
        bad='{"status": "researched", "artifacts": [], ...}',
        fixed='{"status": "researched", "artifacts": [{"type": "report",\n'
        ' "path": "specs/259_x/reports/research-001.md", "summary": "..."}], ...}',
    ),
    "PF501": Explanation(
        what="An artifact path is absolute, leaves the project root (.., a symlink), holds a "
        "control character or a URI scheme, is over-long, or holds a character the system "
        "cannot encode in a file name (a lone surrogate, such as the JSON escape \\ud800 "
        "alone).",
        why="Paths are linked from TODO.md and checked on disk: one that escapes the root or "
        "carries markup is unsafe to follow or to render.",
        bad='"path": "/home/me/notes/research.md"',
        fixed='"path": "specs/259_x/reports/research-001.md"',
    ),
    "PF502": Explanation(
        what="An artifact file does not exist (a warning for non-success statuses, which may "
        "list unfinished work).",
        why="A link to a missing file in TODO.md misleads the next agent and the reader.",
        bad='"path": "specs/259_x/reports/research-001.md"   (never written)',
        fixed='"path": "specs/259_x/reports/research-001.md"   (written before the metadata)',
    ),
    "PF503": Explanation(
        what="An artifact file is empty (a warning for non-success statuses).",
        why="An empty report is usually an agent that died while writing it.",
        bad="specs/259_x/reports/research-001.md   (0 bytes)",
        fixed="specs/259_x/reports/research-001.md   (the report)",
    ),
    "PF504": Explanation(
        what="The same artifact path is listed twice.",
        why="Artifacts are merged by path, so the second entry silently replaces the first.",
        bad='"artifacts": [{"path": "specs/259_x/plans/plan-001.md", ...},\n'
        '              {"path": "specs/259_x/plans/plan-001.md", ...}]',
        fixed='"artifacts": [{"path": "specs/259_x/plans/plan-001.md", ...}]',
    ),
    "PF600": Explanation(
        what="The task number is not in state.json's active_projects (checked only when "
        "state.json exists).",
        why="There is no task to apply the outcome to: a typo in the directory name, or a "
        "task that was archived.",
        bad="specs/2590_prove_completeness/.return-meta.json   (state.json lists 259)",
        fixed="specs/259_prove_completeness/.return-meta.json",
    ),
    "PF601": Explanation(
        what="The task directory's slug differs from the task's project_name in state.json.",
        why="Usually harmless (a renamed task), sometimes a sign of writing into the wrong "
        "task's directory.",
        bad="specs/259_prove_soundness/   (project_name: prove_completeness)",
        fixed="specs/259_prove_completeness/",
    ),
    "PF602": Explanation(
        what="The agent is stuck: status in_progress, and started_at is older than the "
        "operation's timeout ([timeouts]; research 1 h, planning 30 min, implementation 2 h).",
        why="An agent that died leaves its task in progress forever; this flags it so the run "
        "can be resumed. It depends on the clock: `scan --ignore PF602` in a pre-commit hook "
        "keeps a commit's verdict from changing overnight.",
        bad='{"status": "in_progress", "started_at": "2026-01-08T14:30:00Z", ...}   (now: 2 days later)',
        fixed='{"status": "researched", "artifacts": [...], ...}   (the run resumed and finished)',
    ),
    "PF603": Explanation(
        what="A new session replaced an in_progress file of another session before it "
        "finished (watch mode).",
        why="Two agents on one task overwrite each other's metadata; the first run's outcome "
        "is lost.",
        bad="in_progress by sess_1736700000_abc123, then in_progress by sess_1736700500_def456",
        fixed="one run per task at a time: the second waits for the first's final status",
    ),
    "PF604": Explanation(
        what="state.json is missing, not JSON, or not of the expected shape "
        "(next_project_number, active_projects with project_number entries). `scan` reports "
        "it once, at the place in state.json, however many metadata files wait on it.",
        why="Postflight writes state.json; it never creates or overwrites one it cannot read, "
        "so every metadata file is kept until state.json is fixed.",
        bad='specs/state.json: {"active_projects": "259"}',
        fixed='specs/state.json: {"next_project_number": 260, "active_projects": '
        '[{"project_number": 259, ...}]}',
    ),
    "PF605": Explanation(
        what="The .postflight-pending marker is not valid JSON.",
        why="It is treated as naming no session, so PF405 falls back to state.json's session.",
        bad='specs/259_x/.postflight-pending: {"session_id": "sess_1736700000_abc123"',
        fixed='specs/259_x/.postflight-pending: {"session_id": "sess_1736700000_abc123", '
        '"operation": "research"}',
    ),
    "PF606": Explanation(
        what="The outcome was written to state.json (and the journal), but TODO.md or "
        "errors.json could not be written: a full disk, an I/O error, permission denied, or "
        "an errors.json of neither form postflightd keeps (a JSON array of records, or an "
        'object whose "errors" key is that array), or one too large to read.',
        why="Nothing an agent reported is deleted while part of its outcome is unwritten: the "
        "metadata file is kept, and running postflight again once the cause is fixed "
        "completes it (state.json, which already holds the outcome, is left as it is).",
        bad="specs/TODO.md could not be written: No space left on device (exit 4, file kept)",
        fixed="df -h specs/  # free space, then: postflightd process FILE  (exit 0, done)",
    ),
    "PF607": Explanation(
        what="A final metadata file was written longer before postflightd first saw it than "
        "its operation's timeout ([timeouts]): a leftover, such as the files a project "
        "holds when postflightd is adopted, or those written while no daemon or hook ran. "
        "`scan`, `process` and the hook first see a file when they run; the daemon when it "
        "starts, or when the file is written.",
        why="An outcome is dated when the agent wrote its final file (its modification time, "
        "never before its started_at nor after now), not when postflightd got to it: "
        "applying a leftover records that date in state.json (last_updated and the status "
        "timestamp) and TODO.md's Completed line, so the task's history stays true. When "
        "its run ended is not known, so `report` and the dashboard leave it out of their "
        "durations. A warning: the file is applied (under --strict it fails, and is kept).",
        bad="specs/959_x/.return-meta.json, written 2026-03-11, first seen 2026-11-28:\n"
        '{"status": "implemented", ...}   (applied: "completed": "2026-03-11T01:30:00Z")',
        fixed="run `postflightd watch`, or the stop hook, so that an agent's final file is "
        "applied when it is written",
    ),
    "PF700": Explanation(
        what="check-return found no JSON in the return: not bare JSON, no AGENT_OUTPUT "
        "markers, no fenced json block (or the input is empty).",
        why="The orchestrator cannot read a return it cannot find.",
        bad="Research complete! I wrote the report to reports/research-001.md.",
        fixed='```json\n{"status": "completed", "summary": "...", "artifacts": [...], ...}\n```',
    ),
    "PF701": Explanation(
        what="check-return: the summary is over about 100 tokens (400 characters).",
        why="The contract asks for summaries under 100 tokens: the orchestrator's context is "
        "spent on every return; details belong in artifacts.",
        bad='"summary": "<600 characters of narrative>"',
        fixed='"summary": "Surveyed 12 completeness proofs; recommends the Henkin approach."',
    ),
    "PF702": Explanation(
        what="check-return: the summary is over 500 characters.",
        why="Orchestrators that validate returns refuse a summary over 500 characters.",
        bad='"summary": "<900 characters>"',
        fixed='"summary": "Surveyed 12 completeness proofs; recommends the Henkin approach."',
    ),
    "PF703": Explanation(
        what="check-return: a subagent return whose status is not completed has no errors entry.",
        why="The orchestrator needs the reason to decide whether to resume.",
        bad='{"status": "failed", "summary": "Build failed", ...}',
        fixed='{"status": "failed", "summary": "Build failed", "errors": [{"type": '
        '"build_error", "message": "...", "recoverable": true}], ...}',
    ),
    "PF704": Explanation(
        what="check-return: agent output with meta.status error and no error object.",
        why="The orchestrator reads what went wrong from the error object: the contract "
        "requires it for that status.",
        bad='{"meta": {"status": "error", ...}, ...}',
        fixed='{"meta": {"status": "error", ...}, "error": {"type": "tool_failure", '
        '"message": "..."}, ...}',
    ),
    "PF705": Explanation(
        what="check-return: an artifact's key_points does not hold 3 to 5 entries.",
        why="The contract asks for 3-5 key points so the orchestrator can summarise without "
        "reading the artifact.",
        bad='"key_points": ["done"]',
        fixed='"key_points": ["Henkin construction fits", "needs choice", "2 lemmas missing"]',
    ),
    "PF706": Explanation(
        what="check-return: agent output with meta.status partial and empty next_steps.",
        why="A partial result must say how to continue.",
        bad='{"meta": {"status": "partial", ...}, "next_steps": []}',
        fixed='{"meta": {"status": "partial", ...}, "next_steps": ["Prove lemma 4"]}',
    ),
}


def explain(code: str) -> str:
    """The text ``postflightd rules CODE`` prints."""
    rule = RULES[code]
    ex = EXPLANATIONS[code]
    return (
        f"{rule.code} ({rule.severity.value}): {rule.summary}\n\n"
        f"What it checks\n{_indent(ex.what)}\n\n"
        f"Why\n{_indent(ex.why)}\n\n"
        f"Example\n{_indent(ex.bad)}\n\n"
        f"Fixed\n{_indent(ex.fixed)}\n"
    )


def _indent(text: str) -> str:
    if "\n" in text or text.startswith(("{", '"', "[", "specs/", "`")):
        return textwrap.indent(text, "    ")
    return textwrap.fill(
        text, width=96, initial_indent="    ", subsequent_indent="    ", break_on_hyphens=False
    )
