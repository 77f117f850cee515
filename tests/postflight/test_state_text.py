"""state.json text with its formatting kept: ``render_state`` against json.dumps, by example
and by property, and its fast splice of changed tasks against the full walk."""

from __future__ import annotations

import copy
import difflib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.documents import task_entry
from postflightd.postflight import state_text as statetext
from postflightd.postflight.state_text import render_state


def task_of(state: dict[str, Any], number: int) -> dict[str, Any]:
    task: dict[str, Any] = next(
        t for t in state["active_projects"] if t["project_number"] == number
    )
    return task


def big_state(n: int = 1000) -> dict[str, Any]:
    tasks = [
        task_entry(
            i,
            f"task_{i}",
            artifacts=[{"type": "research", "path": f"specs/{i}_task_{i}/reports/r.md"}],
        )
        for i in range(1, n + 1)
    ]
    return {"next_project_number": n + 1, "active_projects": tasks, "meta": {"v": 1}}


def _changed_copy(doc: dict[str, Any], number: int) -> dict[str, Any]:
    new = copy.deepcopy(doc)
    task = task_of(new, number)
    task["status"] = "completed"
    task["artifacts"].append({"type": "summary", "path": "s.md", "summary": "Zusammenfassung ü"})
    task["completion_summary"] = "Done — ✓"
    return new


@pytest.mark.parametrize("indent", [2, 4, "\t", None])
@pytest.mark.parametrize("newline", [True, False])
def test_render_regular_file_equals_dump(indent: int | str | None, newline: bool) -> None:
    """A file json.dumps would write is rewritten exactly as json.dumps writes the new doc."""
    doc = big_state(5)
    doc["active_projects"][0]["project_name"] = "café_naïve"
    end = "\n" if newline else ""
    text = json.dumps(doc, indent=indent, ensure_ascii=False) + end
    new = _changed_copy(doc, 3)
    out = render_state(text, doc, new)
    assert out == json.dumps(new, indent=indent, ensure_ascii=False) + end
    assert render_state(text, doc, doc) == text


def test_render_keeps_ascii_escapes_when_file_uses_them() -> None:
    """A file written with \\u escapes gets escapes for new non-ASCII text too."""
    doc = big_state(2)
    doc["active_projects"][0]["project_name"] = "café"
    text = json.dumps(doc, indent=2) + "\n"
    new = _changed_copy(doc, 2)
    assert render_state(text, doc, new) == json.dumps(new, indent=2) + "\n"


def test_render_1000_tasks_diff_touches_only_the_changed_task() -> None:
    """On a 1,000-task file, only lines inside the changed task's entry differ."""
    doc = big_state(1000)
    text = json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    new = _changed_copy(doc, 500)
    out = render_state(text, doc, new)
    assert json.loads(out) == new
    old_lines, new_lines = text.splitlines(), out.splitlines()
    # The entry of task 500 spans from the "{" before its first key to the "}," before 501's.
    first = old_lines.index('      "project_number": 500,') - 1
    last = old_lines.index('      "project_number": 501,') - 2
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    edits = [op for op in matcher.get_opcodes() if op[0] != "equal"]
    assert edits, "the task did change"
    for _, old_start, old_end, _, _ in edits:
        assert first <= old_start <= old_end <= last + 1
    assert len(new_lines) - len(old_lines) == 6  # 5 lines of artifact + completion_summary


def test_render_compact_one_line_file() -> None:
    """A one-line file stays one line, with its separators."""
    doc = big_state(3)
    for separators in ((",", ":"), (", ", ": ")):
        text = json.dumps(doc, separators=separators, ensure_ascii=False)
        new = _changed_copy(doc, 2)
        out = render_state(text, doc, new)
        assert out == json.dumps(new, separators=separators, ensure_ascii=False)


def test_render_crlf_file() -> None:
    """CRLF line endings are kept on new lines too."""
    doc = big_state(2)
    text = json.dumps(doc, indent=2).replace("\n", "\r\n") + "\r\n"
    new = _changed_copy(doc, 1)
    out = render_state(text, doc, new)
    assert out == json.dumps(new, indent=2, ensure_ascii=False).replace("\n", "\r\n") + "\r\n"


def test_render_new_task_and_removed_key() -> None:
    """Structural changes (a task added, a key removed) still render the new document."""
    doc = big_state(2)
    text = json.dumps(doc, indent=4) + "\n"
    added = copy.deepcopy(doc)
    added["active_projects"].append(task_entry(3, "third"))
    assert render_state(text, doc, added) == json.dumps(added, indent=4) + "\n"
    removed = copy.deepcopy(doc)
    del removed["meta"]
    assert render_state(text, doc, removed) == json.dumps(removed, indent=4) + "\n"
    del removed["active_projects"][0]["language"]
    assert render_state(text, doc, removed) == json.dumps(removed, indent=4) + "\n"


def test_render_garbage_text_falls_back_to_full_dump() -> None:
    """Text that is not one JSON object gives a clean 2-space dump of the new document."""
    new = big_state(1)
    for text in ("", "[]\n", "{}\n"):
        assert render_state(text, {}, new) == json.dumps(new, indent=2) + "\n"
    assert json.loads(render_state('{"a": 1} trailing', {}, new)) == new


def test_render_numbers_keep_their_spelling() -> None:
    """Unchanged numbers keep their text (1.50 stays 1.50), changed ones are JSON numbers."""
    text = '{"a": 1.50, "b": 1e3, "c": 1, "active_projects": []}\n'
    doc = json.loads(text)
    new = {**doc, "c": True}
    assert (
        render_state(text, doc, new) == '{"a": 1.50, "b": 1e3, "c": true, "active_projects": []}\n'
    )


_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)


_json_leaf = st.none() | st.booleans() | st.integers(-(10**6), 10**6) | _text


_json = st.recursive(
    _json_leaf,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=12,
)


_state_docs = st.builds(
    lambda extra, tasks: {**extra, "active_projects": tasks},
    st.dictionaries(_text.filter(lambda k: k != "active_projects"), _json, max_size=3),
    st.lists(st.dictionaries(_text, _json, max_size=4), max_size=4),
)


@settings(max_examples=100, deadline=None)
@given(doc=_state_docs, indent=st.sampled_from([2, 4, "\t"]), ascii_only=st.booleans())
def test_render_unchanged_doc_is_byte_identical(
    doc: dict[str, Any], indent: int | str, ascii_only: bool
) -> None:
    """render_state(text, doc, doc) == text for any document dumped with indent 2/4/tab."""
    text = json.dumps(doc, indent=indent, ensure_ascii=ascii_only) + "\n"
    assert render_state(text, doc, doc) == text


@settings(max_examples=100, deadline=None)
@given(doc=_state_docs, indent=st.sampled_from([2, 4, "\t", None]), value=_json)
def test_render_round_trips_any_change(
    doc: dict[str, Any], indent: int | str | None, value: Any
) -> None:
    """Whatever changed, the rendered text parses back to the new document."""
    text = json.dumps(doc, indent=indent, ensure_ascii=False)
    new = copy.deepcopy(doc)
    if new["active_projects"]:
        new["active_projects"][-1]["postflight"] = value
    else:
        new["x"] = value
    assert json.loads(render_state(text, doc, new)) == new


@pytest.mark.parametrize("first_key", [True, False], ids=["number-first", "number-later"])
def test_render_fast_task_splice_equals_the_full_walk(
    first_key: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Splicing only the changed tasks gives byte for byte what walking the document gives."""

    tasks = []
    for n in range(1, 301):
        task = {"project_number": n, "project_name": f"t{n}", "status": "planned", "n": [n, "é"]}
        if not first_key:
            task = {"project_name": task.pop("project_name"), **task}
        tasks.append(task)
    original = {"next_project_number": 301, "active_projects": tasks}
    text = json.dumps(original, indent=2, ensure_ascii=False) + "\n"
    new = {**original, "active_projects": list(tasks)}
    new["active_projects"][149] = {**tasks[149], "status": "completed", "artifacts": [{"a": 1}]}
    new["active_projects"][7] = {**tasks[7], "session_id": "sess_1_abcdef"}
    fast = statetext.render_state(text, original, new)
    monkeypatch.setattr(statetext, "_FAST_SPLICE_MAX", 0)
    assert fast == statetext.render_state(text, original, new)
    assert json.loads(fast) == new
    changed = [
        line
        for line in difflib.unified_diff(text.splitlines(), fast.splitlines(), lineterm="")
        if line.startswith(("+", "-")) and not line.startswith(("+++", "---"))
    ]
    # Two tasks changed: a handful of lines, nothing else of the 300 tasks.
    assert 0 < len(changed) < 20
