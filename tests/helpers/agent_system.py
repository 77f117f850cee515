"""An agent system's own files, as real ones write them: skills that post-flight a metadata
file by hand (jq reads it, records it, deletes it), a subagent that only writes its file, a
SubagentStop hook script and an OpenCode command doing the same. For the tests of adopting
postflightd in such a project."""

from __future__ import annotations

#: A research skill as real agent systems write them: a subagent writes the metadata file, the
#: skill reads it with jq, records it with jq, and deletes it.
RESEARCH_SKILL = """\
---
name: research
description: Research a task, then post-flight its metadata by hand
---
# Research

## Stage 5: delegate

Spawn the `researcher` subagent with the task number; it writes its report and
`specs/{N}_{SLUG}/.return-meta.json`.

## Stage 6: read the metadata file

```bash
meta="specs/${task}_${slug}/.return-meta.json"
if [ -f "$meta" ] && jq empty "$meta" 2>/dev/null; then
  status=$(jq -r '.status' "$meta")
  artifact_path=$(jq -r '.artifacts[0].path // ""' "$meta")
else
  status=failed
fi
```

## Stage 7: update state.json

```bash
jq --arg ts "$now" \\
  '(.active_projects[] | select(.project_number == '"$task"')) |= . + {status: "researched"}' \\
  specs/state.json > /tmp/state.json && mv /tmp/state.json specs/state.json
```

## Stage 10: clean up

```bash
rm -f specs/.postflight-pending specs/${task}_${slug}/.return-meta.json
```
"""

#: The subagent's own instructions: it writes the file and reads nothing back.
RESEARCHER_AGENT = """\
---
name: researcher
---
Read the task's description in specs/TODO.md, research it, write the report under
specs/{N}_{SLUG}/reports/, then write specs/{N}_{SLUG}/.return-meta.json with status
"researched" and the report as an artifact.
"""

SUBAGENT_POSTFLIGHT_HOOK = """\
#!/usr/bin/env bash
# SubagentStop: post-flight the subagent's metadata file.
set -euo pipefail
for meta in "$CLAUDE_PROJECT_DIR"/specs/*/.return-meta.json; do
  [ -f "$meta" ] || continue
  status=$(jq -r .status "$meta")
  echo "postflight: $status"
done
"""

OPENCODE_COMMAND = """\
---
description: Plan a task
---
When the planner returns, Read specs/$TASK/.return-meta.json and copy its plan path into
state.json; then delete the metadata file:
specs/$TASK/.return-meta.json
"""


#: Where each lives in the project.
HAND_WORKFLOW = {
    ".claude/skills/research/SKILL.md": RESEARCH_SKILL,
    ".claude/skills/plan/SKILL.md": RESEARCH_SKILL.replace("research", "plan"),
    ".claude/agents/researcher.md": RESEARCHER_AGENT,
    ".claude/hooks/subagent-postflight.sh": SUBAGENT_POSTFLIGHT_HOOK,
    ".opencode/command/plan.md": OPENCODE_COMMAND,
}
