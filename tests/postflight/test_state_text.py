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
from postflightd.postflight.json_layout import (
    LAYOUT_FACTOR,
    LAYOUT_SLACK,
    LayoutBudget,
    layout_limit,
)
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


@settings(max_examples=100, deadline=None, database=None)
@given(doc=_state_docs, indent=st.sampled_from([2, 4, "\t"]), ascii_only=st.booleans())
def test_render_unchanged_doc_is_byte_identical(
    doc: dict[str, Any], indent: int | str, ascii_only: bool
) -> None:
    """render_state(text, doc, doc) == text for any document dumped with indent 2/4/tab."""
    text = json.dumps(doc, indent=indent, ensure_ascii=ascii_only) + "\n"
    assert render_state(text, doc, doc) == text


@settings(max_examples=100, deadline=None, database=None)
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


def _all_changed(doc: dict[str, Any]) -> dict[str, Any]:
    """Every task of ``doc`` post-flighted: more than the changed-task splice takes."""
    new = copy.deepcopy(doc)
    for task in new["active_projects"]:
        task["status"] = "researched"
        task["artifacts"].append({"type": "summary", "path": "s.md", "summary": "ü ✓"})
    return new


@pytest.mark.parametrize("indent", [2, 4])
def test_render_many_tasks_of_a_dumped_file_is_the_dump_of_the_new_document(indent: int) -> None:
    """Hundreds of tasks changed in a file laid out as jq and json.dumps write it: the new
    document in the same layout, byte for byte what the full walk writes."""
    doc = big_state(300)
    text = json.dumps(doc, indent=indent, ensure_ascii=False) + "\n"
    new = _all_changed(doc)
    body = text.rstrip("\n")
    out = statetext._canonical(body, doc, new, statetext._detect_style(text, body, LayoutBudget()))
    assert out == json.dumps(new, indent=indent, ensure_ascii=False)
    assert render_state(text, doc, new) == out + "\n"
    walked = statetext._splice_document(
        text, 0, len(body), new, statetext._detect_style(text, body, LayoutBudget())
    )
    assert walked == out


@pytest.mark.parametrize(
    ("why", "edit"),
    [
        ("a float spelled as json.dumps does", lambda d: d.update(ratio=1.5e16)),
        ("a key listed twice", None),
        ("escaped non-ASCII text", "ascii"),
        ("tabs", "tabs"),
        ("CRLF line ends", "crlf"),
    ],
)
def test_render_many_tasks_of_another_layout_keeps_that_layout(why: str, edit: Any) -> None:
    """A file not exactly in the dumped layout (its numbers, duplicate keys, escapes, tabs,
    line ends) is spliced as before: its own spelling kept."""
    doc = big_state(40)
    doc["active_projects"][0]["project_name"] = "café"
    if callable(edit):
        edit(doc)
    text = json.dumps(
        doc, indent="\t" if edit == "tabs" else 2, ensure_ascii=edit == "ascii"
    ).replace("\n", "\r\n" if edit == "crlf" else "\n")
    if edit is None:
        text = text.replace('"meta": {', '"meta": {"v": 0, ', 1)
    new = _all_changed(json.loads(text))
    body = text.strip()
    assert statetext._canonical(body, json.loads(text), new, _style(text)) is None, why
    out = render_state(text, json.loads(text), new)
    assert json.loads(out) == new
    if callable(edit):
        assert '"ratio": 1.5e+16' in out
    if edit == "ascii":
        assert "\\u00fc" in out
    if edit == "tabs":
        assert '\n\t"active_projects"' in out


@pytest.mark.parametrize("value", [float("nan"), "\ud800"], ids=["nan", "lone-surrogate"])
def test_render_many_tasks_with_a_value_msgspec_cannot_write_falls_back(value: Any) -> None:
    """NaN (msgspec writes null), a lone surrogate (it refuses it): the walk writes them as
    json.dumps does, never a different value."""
    doc = big_state(40)
    text = json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    new = _all_changed(doc)
    new["active_projects"][3]["odd"] = value
    body = text.rstrip("\n")
    assert statetext._canonical(body, doc, new, _style(text)) is None
    out = render_state(text, doc, new)
    assert '"odd": ' + json.dumps(value, ensure_ascii=False) in out


def _style(text: str) -> Any:
    body = text.strip()
    return statetext._detect_style(text, body, LayoutBudget(layout_limit(len(text))))


# --- output in proportion to input -------------------------------------------------------------


def _deep_list(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


@st.composite
def _hostile_files(draw: st.DrawFn) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(text, the document it holds, a new document) as an agent can lay the text out: a wide
    indent unit, lines indented further still, values nested deep, before and after."""
    doc = draw(_state_docs)
    if draw(st.booleans()):
        doc["deep"] = _deep_list(draw(st.integers(1, 60)))
    unit = draw(st.sampled_from(["  ", "\t", " " * 8, " " * 9, " " * 3000, "\t" * 50]))
    lines = json.dumps(doc, indent=unit, ensure_ascii=draw(st.booleans())).split("\n")
    # Whitespace at the start of a line is still JSON: an agent can indent any line more.
    for i, width in draw(st.lists(st.tuples(st.integers(0), st.integers(0, 5000)), max_size=3)):
        lines[i % len(lines)] = " " * width + lines[i % len(lines)]
    text = "\n".join(lines) + draw(st.sampled_from(["", "\n"]))
    new = copy.deepcopy(doc)
    value = draw(_json | st.integers(1, 60).map(_deep_list))
    if new["active_projects"] and draw(st.booleans()):
        new["active_projects"][-1][draw(_text)] = value
    else:
        new[draw(_text)] = value
    return text, doc, new


@settings(max_examples=200, deadline=None, database=None)
@given(case=_hostile_files())
def test_render_output_stays_in_proportion_to_input(
    case: tuple[str, dict[str, Any], dict[str, Any]],
) -> None:
    """However the file is laid out and however deep the values, the rendering is at most
    the text, its layout limit, and twice the new document's compact size (its separators
    with a space): never the indent unit times the depth squared."""
    text, doc, new = case
    out = render_state(text, doc, new)
    compact = len(json.dumps(new, separators=(",", ":")))
    assert len(out) <= (1 + LAYOUT_FACTOR) * len(text) + LAYOUT_SLACK + 2 * compact + 2
    assert json.loads(out) == new


def test_render_of_a_wide_deep_file_is_not_quadratic() -> None:
    """2,000 spaces as the indent unit and a list 100 deep added: json.dumps in that layout
    is ~20 MB for a file of a few KB; the rendering stays within the layout limit."""
    doc = {"active_projects": [task_entry(1, "t1")]}
    text = json.dumps(doc, indent=2)
    text = text.replace('\n  "active_projects"', "\n" + " " * 2000 + '"active_projects"', 1)
    new = _changed_copy(doc, 1)
    new["deep"] = _deep_list(100)
    out = render_state(text, doc, new)
    assert json.loads(out) == new
    assert len(out) <= (1 + LAYOUT_FACTOR) * len(text) + LAYOUT_SLACK + 2 * len(json.dumps(new))


def test_render_nested_beyond_the_stack_falls_back_without_recursion_error() -> None:
    """A change at the bottom of a list 600 deep: the splice, which follows the nesting, runs
    out of stack; the document is then written whole, without recursion."""
    old: list[Any] = []
    new_value: list[Any] = [1]
    for _ in range(599):
        old, new_value = [old], [new_value]
    text = json.dumps({"active_projects": [], "deep": old}, indent=2) + "\n"
    doc = json.loads(text)
    new = {**doc, "deep": new_value}
    out = render_state(text, doc, new)
    assert json.loads(out) == new
    assert len(out) <= (1 + LAYOUT_FACTOR) * len(text) + LAYOUT_SLACK + 2 * len(json.dumps(new))


def test_render_of_a_value_50000_deep_is_one_line() -> None:
    """json.dumps raises RecursionError on it; its indentation would be ~2.5 GB."""
    depth = 50_000
    text = '{"active_projects": [], "deep": [[]]}\n'
    doc = json.loads(text)
    new = {**doc, "deep": _deep_list(depth)}
    out = render_state(text, doc, new)
    assert out == '{"active_projects": [], "deep": ' + "[" * depth + "]" * depth + "}\n"
