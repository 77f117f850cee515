"""errors.json records: their shape, the de-duplicating merge, the text written."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from helpers.documents import SESSION
from helpers.paths import FIXTURES
from postflightd.postflight.errors_json import (
    document_text,
    error_list,
    error_record,
    errors_text,
    mark_fixed,
    merge_errors,
)

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


ENVELOPE = (FIXTURES / "errors_json" / "envelope.json").read_text("utf-8")


@pytest.mark.parametrize(
    ("doc", "why"),
    [
        ({"_schema_version": "2.0.0"}, 'an object without an "errors" key'),
        ({"errors": {}}, 'an object whose "errors" is an object, not an array'),
        ({"errors": None}, 'an object whose "errors" is null, not an array'),
        ("errors", "a string"),
        (3, "a number"),
        (True, "true"),
        (None, "null"),
    ],
)
def test_error_list_says_what_a_file_of_neither_form_is(doc: Any, why: str) -> None:
    assert error_list(doc) == why


def test_error_list_reads_both_forms() -> None:
    records = [{"id": "a"}]
    assert error_list(records) is records
    assert error_list({"_comment": "x", "errors": records}) is records


def test_an_envelope_keeps_every_byte_but_its_errors_and_last_updated() -> None:
    """The new record is appended in the file's layout; nothing else of the text moves."""
    doc = json.loads(ENVELOPE)
    record = _record("s9", "build_error", "lake build failed", n=0)
    text = document_text(ENVELOPE, doc, [*doc["errors"], record], NOW)
    new = json.loads(text)
    assert list(new) == list(doc)
    assert new["_last_updated"] == "2026-01-08T14:30:05Z"
    assert new["errors"] == [*doc["errors"], record]
    assert {k: v for k, v in new.items() if k not in ("errors", "_last_updated")} == {
        k: v for k, v in doc.items() if k not in ("errors", "_last_updated")
    }
    # Byte for byte: the text up to the last old record's end, and from aggregations on.
    last_old = ENVELOPE.index('      "fix_status": "resolved"\n    }') + len(
        '      "fix_status": "resolved"\n    }'
    )
    old_head = ENVELOPE[:last_old].replace(
        '"_last_updated": "2026-01-15T18:35:00Z"', '"_last_updated": "2026-01-08T14:30:05Z"'
    )
    assert text.startswith(old_head)
    assert text.endswith(ENVELOPE[ENVELOPE.index('\n  ],\n  "aggregations"') :])
    appended = text[len(old_head) : text.index('\n  ],\n  "aggregations"')]
    assert appended.startswith(',\n    {\n      "id": "err_')  # the records' own indentation


def test_an_envelope_without_last_updated_does_not_get_one() -> None:
    text = '{"errors": []}\n'
    new = document_text(text, json.loads(text), [_record("s", "t", "m")], NOW)
    assert list(json.loads(new)) == ["errors"]
    assert new.endswith("\n")


def test_an_envelope_escapes_a_lone_surrogate_as_the_bare_array_does() -> None:
    doc = json.loads(ENVELOPE)
    text = document_text(ENVELOPE, doc, [_record("s", "t", "half \ud800 pair")], NOW)
    text.encode("utf-8")
    assert json.loads(text)["errors"][0]["message"] == "half \ud800 pair"


def _invalid(task: Any, *, file: str = "specs/7_x/.return-meta.json", **extra: Any) -> Any:
    record: dict[str, Any] = {
        "id": "err_1_0",
        "type": "validation_failed",
        "context": {"task": task, "file": file},
        "fix_status": "unfixed",
        "after": 1,
    }
    record.update(extra)
    return record


def test_mark_fixed_sets_only_unfixed_metadata_file_records_of_the_tasks() -> None:
    """The record's key keeps its place; others of the task, of other tasks, of other
    statuses or not about a metadata file are the very same objects as before."""
    records = [
        _invalid(7),
        _invalid(8),
        _invalid(7, fix_status="investigating"),
        _invalid(7, fix_status="resolved"),
        _invalid(7, type="timeout"),
        _invalid(7, file="specs/7_x/plans/plan-001.md"),
        {"type": "validation_failed", "context": {"task": 7}, "fix_status": "unfixed"},
        _invalid(True),
        "junk",
    ]
    new, fixed = mark_fixed(records, {7}, ".return-meta.json")
    assert fixed == {7}
    assert new[0] == {**records[0], "fix_status": "fixed"}
    assert list(new[0]) == list(records[0])
    assert records[0]["fix_status"] == "unfixed"  # the input is not changed
    assert all(a is b for a, b in zip(new[1:], records[1:], strict=True))
    again, fixed_again = mark_fixed(new, {7}, ".return-meta.json")
    assert (again, fixed_again) == (new, frozenset())
