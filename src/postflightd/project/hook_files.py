"""``postflightd init``: the stop hook in each agent runtime's own configuration.

One table, ``RUNTIMES``, says for each runtime the file init writes, the events the hook goes
on and the handler it adds; ``hook_config_with`` merges that handler into the file's current
text (None: absent), keeping every key and hook already there, and returns the text unchanged
when the hook is there already. OpenCode has no configured hooks: its hook is a plugin file
shipped in the package (``data/opencode/postflightd.ts``), written as it is.

The formats, as each runtime documents them:

- Claude Code: ``.claude/settings.json``, ``hooks.<Event>: [{"hooks": [{"type": "command",
  "command": ...}]}]``.
- Codex CLI: ``.codex/hooks.json``, the same groups (``timeout`` in seconds); the file's top
  level may hold only ``hooks`` and ``description`` (codex-rs/config/src/hook_config.rs).
- Gemini CLI: ``.gemini/settings.json``, the same groups on ``AfterAgent`` (``timeout`` in
  milliseconds; ``name`` identifies the hook in ``/hooks``) (docs/hooks/reference.md).
- GitHub Copilot CLI: ``.github/hooks/*.json``, ``{"version": 1, "hooks": {"agentStop":
  [{"type": "command", "bash": ..., "timeoutSec": ...}]}}``, handlers listed directly.
- Cursor: ``.cursor/hooks.json``, ``{"version": 1, "hooks": {"stop": [{"command": ...,
  "loop_limit": ...}]}}``, handlers listed directly.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from dataclasses import dataclass, field
from importlib.resources import files
from typing import Any, Final

from postflightd.inert import clip
from postflightd.models.files import json_problem
from postflightd.postflight.json_layout import (
    PLAIN_INDENT,
    LayoutBudget,
    LayoutTooLargeError,
    bounded_indent,
    dump_json,
    layout_limit,
)

#: Seconds a runtime gives the hook before it kills it: a stop is post-flighted in well under
#: one, and waits at most a few seconds for the project lock.
HOOK_TIMEOUT_S: Final = 60
#: Follow-up messages Cursor sends in a row before it stops running the hook (its own guard;
#: the hook itself blocks an agent at most once in a row).
CURSOR_LOOP_LIMIT: Final = 3


@dataclass(frozen=True, slots=True)
class Runtime:
    """An agent runtime: where its stop hook is configured, and what init adds there."""

    name: str  # as `init --runtime NAME` and `postflightd hook NAME` spell it
    title: str
    marker: str  # a project with this directory uses the runtime
    path: str  # the file init writes, relative to the project root
    events: tuple[str, ...] = ()
    handler: dict[str, Any] = field(default_factory=dict)  # empty: a plugin file, not a hook
    grouped: bool = True  # handlers inside {"hooks": [...]} groups, or listed directly
    top: dict[str, Any] = field(default_factory=dict)  # top-level keys the file must have
    needs: str = ""  # what the runtime needs before it runs the hook

    @property
    def command(self) -> str:
        return f"postflightd hook {self.name}"


def _handler(name: str, **extra: Any) -> dict[str, Any]:
    return {"type": "command", "command": f"postflightd hook {name}", **extra}


RUNTIMES: Final = (
    Runtime(
        "claude",
        "Claude Code",
        ".claude",
        ".claude/settings.json",
        ("Stop", "SubagentStop"),
        _handler("claude"),
    ),
    Runtime(
        "codex",
        "Codex CLI",
        ".codex",
        ".codex/hooks.json",
        ("Stop", "SubagentStop"),
        _handler("codex", timeout=HOOK_TIMEOUT_S),
        needs="Codex CLI runs a project's hooks only in a trusted project, and a new or changed "
        "hook only once you trust it: open `/hooks` in Codex and trust `postflightd hook codex`.",
    ),
    Runtime(
        "gemini",
        "Gemini CLI",
        ".gemini",
        ".gemini/settings.json",
        ("AfterAgent",),
        {"name": "postflightd", **_handler("gemini", timeout=HOOK_TIMEOUT_S * 1000)},
        needs="Gemini CLI reads .gemini/settings.json only in a trusted folder (when folder "
        "trust is on) and warns once about a new project hook: trust this folder when it asks.",
    ),
    Runtime(
        "copilot",
        "GitHub Copilot CLI",
        ".github/hooks",
        ".github/hooks/postflightd.json",
        ("agentStop", "subagentStop"),
        {"type": "command", "bash": "postflightd hook copilot", "timeoutSec": HOOK_TIMEOUT_S},
        grouped=False,
        top={"version": 1},
        needs="GitHub Copilot CLI loads .github/hooks/*.json from the directory it starts in: "
        "start it at the project root.",
    ),
    Runtime(
        "cursor",
        "Cursor",
        ".cursor",
        ".cursor/hooks.json",
        ("stop",),
        {"command": "postflightd hook cursor", "loop_limit": CURSOR_LOOP_LIMIT},
        grouped=False,
        top={"version": 1},
    ),
    Runtime(
        "opencode",
        "OpenCode",
        ".opencode",
        ".opencode/plugins/postflightd.ts",
        needs="OpenCode loads plugins when it starts: restart it to load "
        ".opencode/plugins/postflightd.ts.",
    ),
)
RUNTIME_NAMES: Final = tuple(r.name for r in RUNTIMES)
BY_NAME: Final = {r.name: r for r in RUNTIMES}
CLAUDE: Final = BY_NAME["claude"]


def packaged_plugin() -> str:
    """The text of the OpenCode plugin shipped in the package."""
    return files("postflightd").joinpath("data", "opencode", "postflightd.ts").read_text("utf-8")


class SettingsShapeError(ValueError):
    """A runtime's hook file is not JSON of the shape the runtime reads: never rewritten.
    ``path`` is the file, relative to the project root, once known."""

    def __init__(self, message: str, path: str = "") -> None:
        super().__init__(message)
        self.path = path


#: The program a hook's command runs when postflightd is on the runtime's PATH.
PROGRAM: Final = "postflightd"


def handler_for(runtime: Runtime, program: str = PROGRAM) -> dict[str, Any]:
    """The handler init adds for ``runtime``, its command running ``program`` (the bare name,
    or the absolute path of postflightd where it is not on PATH)."""
    handler = dict(runtime.handler)
    command = f"{shlex.quote(program)} hook {runtime.name}"
    for key in ("command", "bash"):
        if key in handler:
            handler[key] = command
    return handler


def _is_ours(handler: Any, runtime: Runtime) -> bool:
    if not isinstance(handler, dict):
        return False
    # Exactly the command init writes, postflightd by name or by its absolute path: one that
    # merely contains it (`curl ... | sh; postflightd hook claude`) runs something else too,
    # and is not ours.
    return any(
        isinstance(handler.get(key), str) and _runs_our_hook(handler[key], runtime.name)
        for key in ("command", "bash")
    )


def _runs_our_hook(command: str, name: str) -> bool:
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    if len(words) != 3 or words[1:] != ["hook", name]:
        return False
    program = words[0]
    return program == PROGRAM or (program.startswith("/") and program.endswith(f"/{PROGRAM}"))


def _has_our_hook(entries: list[Any], runtime: Runtime) -> bool:
    if not runtime.grouped:
        return any(_is_ours(handler, runtime) for handler in entries)
    for group in entries:
        hooks = group.get("hooks") if isinstance(group, dict) else None
        if any(_is_ours(h, runtime) for h in (hooks if isinstance(hooks, list) else [])):
            return True
    return False


def _indent_of(text: str) -> str:
    # Keep the file's own indentation: a rewrite that reindents every line hides the change.
    # Up to a sane width: the unit is written once per level on every line, so 2,000 spaces
    # on the first indented line would grow the file with the unit times the depth squared.
    match = re.search(r"\n( +)\S", text)
    return bounded_indent(match.group(1)) if match else PLAIN_INDENT


#: Deeper settings are refused: the runtime's own are a few levels deep, and a rewrite of a
#: deeper document would exhaust the interpreter's stack.
MAX_SETTINGS_DEPTH: Final = 64


def _not_a_number(word: str) -> Any:
    raise ValueError(f"{word} is not a JSON number")


#: Longer integers are refused: the interpreter converts at most a few thousand digits, and
#: no setting the runtime reads is a number that long.
MAX_NUMBER_DIGITS: Final = 100


def _bounded_int(text: str) -> int:
    if len(text) > MAX_NUMBER_DIGITS:
        raise ValueError(f"a number of {len(text):,} digits")
    return int(text)


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"the number {clip(text, 20)} is too large to write back")
    return value


def _load_settings(text: str) -> Any:
    """The parsed settings, or a SettingsShapeError saying what keeps init from rewriting them."""
    try:
        parsed = json.loads(
            text, parse_constant=_not_a_number, parse_float=_finite, parse_int=_bounded_int
        )
    except json.JSONDecodeError as exc:
        if text.startswith(("//", "/*"), exc.pos):
            # Gemini CLI accepts comments in its settings; a rewrite would drop them.
            raise SettingsShapeError(
                f"holds a comment at {exc.lineno}:{exc.colno}, which init cannot "
                "keep in a rewrite: add the hook by hand"
            ) from None
        raise SettingsShapeError(f"{json_problem(exc)}; fix it, then run init again") from None
    except RecursionError:
        raise SettingsShapeError(_TOO_DEEP) from None
    except ValueError as exc:
        # A number past what can be converted and written back, NaN, Infinity.
        raise SettingsShapeError(
            f"not JSON init can write back: {clip(str(exc), 120)}; fix it, then run init again"
        ) from None
    _check_writable(parsed)
    return parsed


_TOO_DEEP: Final = f"nested deeper than {MAX_SETTINGS_DEPTH} levels; fix it, then run init again"


def _check_writable(doc: Any) -> None:
    """Refuse what could not be written back as it was read: too deep a document, or a string
    holding a lone surrogate (a ``\\ud800`` escape, which UTF-8 cannot encode)."""
    stack: list[tuple[Any, int]] = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, str):
            if _SURROGATE.search(value):
                raise SettingsShapeError(
                    "a string holds a \\uXXXX escape of a lone surrogate, which is no "
                    "character and cannot be written as UTF-8; fix it, then run init again"
                )
            continue
        if not isinstance(value, dict | list):
            continue
        if depth > MAX_SETTINGS_DEPTH:
            raise SettingsShapeError(_TOO_DEEP)
        items = [*value.keys(), *value.values()] if isinstance(value, dict) else value
        stack.extend((item, depth + 1) for item in items)


_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def settings_document(text: str | None) -> tuple[dict[str, Any], str]:
    """A settings file's object and its indent unit (None or blank: an empty one, indented
    as json.dumps does); a SettingsShapeError when it is not a JSON object."""
    if text is None or not text.strip():
        return {}, PLAIN_INDENT
    parsed = _load_settings(text)
    if not isinstance(parsed, dict):
        raise SettingsShapeError("the top-level value is not an object")
    return parsed, _indent_of(text)


def hook_config_with(text: str | None, runtime: Runtime, program: str = PROGRAM) -> str:
    """The runtime's hook file with ``postflightd hook NAME`` (``program`` running it) on each
    of its events, every other key and hook kept; ``text`` itself when nothing is missing."""
    doc, indent = settings_document(text)
    changed = False
    for key, value in runtime.top.items():
        if key not in doc:
            doc[key] = value
            changed = True
    hooks = doc.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise SettingsShapeError('"hooks" is not an object')
    for event in runtime.events:
        entries = hooks.setdefault(event, [])
        if not isinstance(entries, list):
            raise SettingsShapeError(f'"hooks.{event}" is not a list')
        if not _has_our_hook(entries, runtime):
            handler = handler_for(runtime, program)
            entries.append({"hooks": [handler]} if runtime.grouped else handler)
            changed = True
    if not changed and text is not None:
        return text
    return settings_text(doc, indent, text, "flatten it, or add the hook by hand")


def settings_text(doc: Any, indent: str, text: str | None, by_hand: str) -> str:
    """``doc`` as a runtime's settings file, written in proportion to ``text`` (what was read):
    a document nested so deeply that its indentation alone would pass the limit is refused,
    not written (``by_hand``: what to do instead)."""
    limit = layout_limit(len(text or ""))
    try:
        return dump_json(doc, indent, ensure_ascii=False, budget=LayoutBudget(limit)) + "\n"
    except LayoutTooLargeError:
        raise SettingsShapeError(
            f"nested too deeply to rewrite: its indentation alone would pass {limit:,} "
            f"characters; {by_hand}"
        ) from None
