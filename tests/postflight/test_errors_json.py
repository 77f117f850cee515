"""errors.json records: their shape, the de-duplicating merge, the text written."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from helpers.documents import SESSION
from postflightd.postflight.errors_json import error_record, errors_text, merge_errors

NOW = datetime(2026, 1, 8, 14, 30, 5, 123456, tzinfo=UTC)


def test_error_record_depth_and_defaults() -> None:
    """failed_at_depth is len(path) - 2, or null without a usable path."""
    kwargs: dict[str, Any] = {
        "session": SESSION,
        "task": 3,
        "agent_type": None,
        "file": "f",
        "now": NOW,
        "n": 7,
    }
    rec = error_record("timeout", "stuck", delegation_path=["o", "i", "a", "b"], **kwargs)
    assert rec["trajectory"]["failed_at_depth"] == 2
    assert rec["id"] == f"err_{int(NOW.timestamp())}_7"
    assert rec["recovery"] == {"suggested_action": "", "auto_recoverable": True}
    for path in (None, ["orchestrator"]):
        rec = error_record("timeout", "stuck", delegation_path=path, **kwargs)
        assert rec["trajectory"]["failed_at_depth"] is None


def _record(session: str, kind: str, message: str, n: int = 1) -> dict[str, Any]:
    return error_record(
        kind,
        message,
        session=session,
        task=1,
        agent_type="a",
        file="f",
        delegation_path=None,
        now=NOW,
        n=n,
    )


def test_merge_errors_dedupes_on_session_type_message() -> None:
    """The same record is never written twice; a differing field makes a new record."""
    existing = [_record("s1", "timeout", "m")]
    new = [
        _record("s1", "timeout", "m", n=5),
        _record("s2", "timeout", "m"),
        _record("s1", "other", "m"),
        _record("s1", "timeout", "m2"),
        _record("s1", "timeout", "m2"),
    ]
    merged, added = merge_errors(existing, new)
    assert added == 3
    assert merged[0] == existing[0]
    assert [(r["context"]["session_id"], r["type"], r["message"]) for r in merged] == [
        ("s1", "timeout", "m"),
        ("s2", "timeout", "m"),
        ("s1", "other", "m"),
        ("s1", "timeout", "m2"),
    ]
    assert len({r["id"] for r in merged}) == len(merged), "colliding ids are renumbered"
    again, added_again = merge_errors(merged, new)
    assert (again, added_again) == (merged, 0)


def test_merge_errors_tolerates_hand_written_records() -> None:
    """Records without context or id (written by other tools) do not break the merge."""
    merged, added = merge_errors([{"message": "x", "id": []}, "junk"], [_record("s", "t", "x")])  # type: ignore[list-item]
    assert added == 1
    assert merged[:2] == [{"message": "x", "id": []}, "junk"]
    assert merged[-1]["type"] == "t"


def test_errors_text_escapes_a_lone_surrogate() -> None:
    """A lone surrogate an agent sent is written as its JSON escape; the text stays valid."""
    record = _record("s", "t", "half \ud800 pair")
    text = errors_text([record])
    assert "\\ud800" in text
    text.encode("utf-8")
    assert json.loads(text)[0]["message"] == "half \ud800 pair"
