"""Whether Codex CLI will run the project's stop hook: read, never written.

Codex runs a hook of a project's ``.codex/hooks.json`` only when both hold (measured on Codex
CLI 0.171.0, docs/hooks/codex.md):

- the project is trusted: ``[projects."<root>"] trust_level = "trusted"`` in the user's
  ``$CODEX_HOME/config.toml`` (``~/.codex/config.toml``);
- the hook is trusted: ``[hooks.state."<hooks.json path>:<event>:<group>:<handler>"]`` there
  holds ``trusted_hash = "sha256:<hex>"``, the hash of the hook's definition as it is now
  (what ``/hooks`` saves when the person trusts it). ``<event>`` is ``stop`` or
  ``subagent_stop``, ``<group>`` the index of the matcher group in the event's list and
  ``<handler>`` the handler's index in that group. The hash is SHA-256 of the compact JSON,
  keys sorted, of ``{"event_name": <event>, "matcher": <matcher, when the group has one>,
  "hooks": [{"type": "command", "command": ..., "timeout": <seconds, 600 when unset>,
  "async": <false unless set>, "statusMessage": <when set>}]}``.

An untrusted hook is skipped without a word in ``codex exec``; ``codex exec
--dangerously-bypass-hook-trust`` runs it for that one invocation.
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

HOOKS_JSON: Final = Path(".codex") / "hooks.json"
#: hooks.json's event names, as Codex's trust keys spell them.
EVENT_KEYS: Final = {"Stop": "stop", "SubagentStop": "subagent_stop"}
#: Codex's timeout of a command hook that sets none, in seconds.
DEFAULT_TIMEOUT_S: Final = 600
#: Bytes of config.toml read at most: a user's configuration is a few kilobytes.
MAX_CONFIG_BYTES: Final = 1 << 20


@dataclass(frozen=True, slots=True)
class HookTrust:
    """One postflightd hook of hooks.json and the entry that trusts it."""

    event: str
    key: str
    trusted_hash: str
    trusted: bool


def codex_home(env: Mapping[str, str] | None = None) -> Path:
    """Codex's home: ``$CODEX_HOME``, else ``~/.codex``."""
    env = os.environ if env is None else env
    given = env.get("CODEX_HOME")
    if given:
        return Path(given)
    return Path(env.get("HOME") or Path.home()) / ".codex"


def hook_hash(event_key: str, group: Mapping[str, Any], handler: Mapping[str, Any]) -> str:
    """Codex's hash of one command handler of a matcher group (the module docstring)."""
    normal: dict[str, Any] = {
        "type": "command",
        "command": handler.get("command"),
        "timeout": max(int(handler.get("timeout") or DEFAULT_TIMEOUT_S), 1),
        "async": bool(handler.get("async", False)),
    }
    if handler.get("statusMessage") is not None:
        normal["statusMessage"] = handler["statusMessage"]
    identity: dict[str, Any] = {"event_name": event_key, "hooks": [normal]}
    if group.get("matcher") is not None:
        identity["matcher"] = group["matcher"]
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def postflightd_hooks(root: Path, command_tail: str = "hook codex") -> list[HookTrust]:
    """Each postflightd handler of ``root``'s hooks.json with its trust key and hash
    (``trusted`` False: ``hook_trust`` reads the config); empty when the file is missing or not
    of hooks.json's shape."""
    path = root / HOOKS_JSON
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return []
    hooks = doc.get("hooks") if isinstance(doc, dict) else None
    if not isinstance(hooks, dict):
        return []
    found = []
    for event, event_key in EVENT_KEYS.items():
        groups = hooks.get(event)
        for g, group in enumerate(groups if isinstance(groups, list) else []):
            handlers = group.get("hooks") if isinstance(group, dict) else None
            for h, handler in enumerate(handlers if isinstance(handlers, list) else []):
                command = handler.get("command") if isinstance(handler, dict) else None
                if not isinstance(command, str) or not command.endswith(command_tail):
                    continue
                key = f"{path.absolute()}:{event_key}:{g}:{h}"
                found.append(HookTrust(event, key, hook_hash(event_key, group, handler), False))
    return found


def read_codex_config(home: Path) -> dict[str, Any] | None:
    """The user's config.toml, or None when it is missing, too large or not TOML."""
    try:
        with (home / "config.toml").open("rb") as fh:
            raw = fh.read(MAX_CONFIG_BYTES + 1)
    except OSError:
        return None
    if len(raw) > MAX_CONFIG_BYTES:
        return None
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None


def project_trusted(config: Mapping[str, Any], root: Path) -> bool:
    """Whether the config trusts ``root`` (its own entry, as Codex's trust prompt writes it)."""
    projects = config.get("projects")
    entry = projects.get(str(root)) if isinstance(projects, dict) else None
    return isinstance(entry, dict) and entry.get("trust_level") == "trusted"


def hook_trust(root: Path, home: Path) -> tuple[bool, list[HookTrust]]:
    """Whether Codex trusts the project, and each postflightd hook with whether it is trusted
    as it is now."""
    config = read_codex_config(home) or {}
    states = config.get("hooks", {}).get("state") if isinstance(config.get("hooks"), dict) else None
    states = states if isinstance(states, dict) else {}
    out = []
    for hook in postflightd_hooks(root):
        state = states.get(hook.key)
        trusted = (
            isinstance(state, dict)
            and state.get("trusted_hash") == hook.trusted_hash
            and state.get("enabled") is not False
        )
        out.append(HookTrust(hook.event, hook.key, hook.trusted_hash, trusted))
    return project_trusted(config, root), out


def trust_entries(root: Path, hooks: list[HookTrust]) -> str:
    """The config.toml lines that trust ``root`` and ``hooks``, as ``/hooks`` saves them."""
    lines = [f"[projects.{json.dumps(str(root))}]", 'trust_level = "trusted"', ""]
    for hook in hooks:
        lines += [
            f"[hooks.state.{json.dumps(hook.key)}]",
            f'trusted_hash = "{hook.trusted_hash}"',
            "",
        ]
    return "\n".join(lines)


def trust_report(root: Path, env: Mapping[str, str] | None = None) -> list[str]:
    """What init says about Codex's trust in the project and its stop hook: nothing to do, or
    what to run."""
    home = codex_home(env)
    project_ok, hooks = hook_trust(root, home)
    if not hooks:
        return []
    config = home / "config.toml"
    if project_ok and all(h.trusted for h in hooks):
        return [f"Codex trusts this project and its stop hook ({config})."]
    waiting = [h.event for h in hooks if not h.trusted]
    lines = []
    if not project_ok:
        lines.append(
            f"Codex does not trust this project yet ({config} has no trusted entry for it)."
        )
    if waiting:
        lines.append(
            f"Codex has not trusted the stop hook yet ({', '.join(waiting)}); until it does, "
            "Codex skips it without a word."
        )
    lines += [
        "  Interactive: start `codex` in the project, trust the folder when asked, then open "
        "`/hooks` and trust `postflightd hook codex`.",
        "  Non-interactive, one run: `codex exec --dangerously-bypass-hook-trust ...`.",
        f"  Or add to {config} (what `/hooks` saves; a changed hook needs its new hash):",
    ]
    trusted_all = [HookTrust(h.event, h.key, h.trusted_hash, True) for h in hooks]
    lines += ["    " + line for line in trust_entries(root, trusted_all).splitlines() if line]
    return lines
