"""TODO.md edits: only the task's section changes, every other byte is kept."""

from __future__ import annotations

import difflib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from postflightd.postflight.todo_edit import _apply_one_by_one, apply_todo_edit, apply_todo_edits
from postflightd.postflight.transform import TodoEdit, TodoLink

TODO = """\
---
next_project_number: 261
# a YAML comment, not a heading
---

# TODO

## High Priority

### 259. Prove completeness
- **Effort**: 4 hours
- **Status**: [IMPLEMENTING]
- **Priority**: High
- **Language**: lean4
- **Research**: [research-001.md](specs/259_prove_completeness/reports/research-001.md)

**Description**: Prove the completeness theorem.

```bash
# build it first
lake build
```

### 25. Set up CI
- **Effort**: 1 hour
- **Status**: [NOT STARTED]
- **Language**: general

**Description**: Trailing spaces stay here.   \n\

## Medium Priority

### 014. Padded number
- **Status**: [PLANNED]
- **Language**: meta
- **Plan**: [implementation-001.md](specs/014_padded/plans/implementation-001.md)

**Description**: Zero-padded heading.
"""

RESEARCH = "specs/259_prove_completeness/reports/research-002.md"
RESEARCH_LINK = f"[research-002.md]({RESEARCH})"
SUMMARY = "specs/259_prove_completeness/summaries/s.md"
SUMMARY_LINK = f"[s.md]({SUMMARY})"
OLD_RESEARCH_LINK = "[research-001.md](specs/259_prove_completeness/reports/research-001.md)"


def links(*pairs: tuple[str, str]) -> tuple[TodoLink, ...]:
    return tuple(TodoLink(label, path) for label, path in pairs)


def changed_lines(before: str, after: str) -> list[str]:
    diff = difflib.unified_diff(before.splitlines(True), after.splitlines(True), n=0)
    return [line for line in diff if line[:1] in "+-" and not line.startswith(("+++", "---"))]


def test_completed_task_gets_marker_links_and_date() -> None:
    """Status marker replaced, Research added to, Summary and Completed inserted after it."""
    edit = TodoEdit(
        task=259,
        marker="COMPLETED",
        links=links(("Research", RESEARCH), ("Summary", SUMMARY)),
        completed="2026-01-08",
    )
    out = apply_todo_edit(TODO, edit)
    assert out is not None
    section = out.split("### 259.")[1].split("**Description**")[0]
    assert section == (
        " Prove completeness\n"
        "- **Effort**: 4 hours\n"
        "- **Status**: [COMPLETED]\n"
        "- **Priority**: High\n"
        "- **Language**: lean4\n"
        f"- **Research**: {OLD_RESEARCH_LINK}, {RESEARCH_LINK}\n"
        f"- **Summary**: {SUMMARY_LINK}\n"
        "- **Completed**: 2026-01-08\n"
        "\n"
    )
    assert sorted(changed_lines(TODO, out)) == sorted(
        [
            "-- **Status**: [IMPLEMENTING]\n",
            f"-- **Research**: {OLD_RESEARCH_LINK}\n",
            "+- **Status**: [COMPLETED]\n",
            f"+- **Research**: {OLD_RESEARCH_LINK}, {RESEARCH_LINK}\n",
            f"+- **Summary**: {SUMMARY_LINK}\n",
            "+- **Completed**: 2026-01-08\n",
        ]
    )


def test_number_prefix_of_another_is_not_confused() -> None:
    """Task 25 is not task 259, and editing it leaves 259 alone."""
    out = apply_todo_edit(TODO, TodoEdit(task=25, marker="RESEARCHED", completed=None))
    assert out is not None
    assert changed_lines(TODO, out) == [
        "-- **Status**: [NOT STARTED]\n",
        "+- **Status**: [RESEARCHED]\n",
    ]
    assert "Trailing spaces stay here.   \n" in out


def test_link_inserted_after_language_when_no_links() -> None:
    """A task without link lines gets the new one after its Language line."""
    edit = TodoEdit(task=25, marker=None, links=links(("Plan", "specs/25_ci/plans/p.md")))
    out = apply_todo_edit(TODO, edit)
    assert out is not None
    assert "- **Language**: general\n- **Plan**: [p.md](specs/25_ci/plans/p.md)\n\n" in out
    assert len(changed_lines(TODO, out)) == 1


def test_zero_padded_heading_and_h2_level() -> None:
    """`### 014.` is task 14; its section ends at the next heading of the same or higher level."""
    edit = TodoEdit(task=14, marker="IMPLEMENTING", completed=None)
    out = apply_todo_edit(TODO, edit)
    assert out is not None
    assert "### 014. Padded number\n- **Status**: [IMPLEMENTING]\n" in out
    h2 = "## 7. An h2 task\n- **Status**: [PLANNED]\n## Next\n- **Status**: [PLANNED]\n"
    assert apply_todo_edit(h2, TodoEdit(task=7, marker="BLOCKED")) == h2.replace(
        "[PLANNED]", "[BLOCKED]", 1
    )


def test_missing_task_returns_none() -> None:
    """A TODO.md without the task's section gives None (state.json is the source of truth)."""
    assert apply_todo_edit(TODO, TodoEdit(task=26, marker="PLANNED")) is None
    assert apply_todo_edit("", TodoEdit(task=1, marker="PLANNED")) is None


def test_heading_in_code_fence_or_front_matter_is_not_a_section() -> None:
    """A `### 5.` line inside a fence is text; a `#` comment in a fence does not end a section."""
    text = "### 1. A\n- **Status**: [PLANNED]\n```\n### 5. not a task\n# comment\n```\n"
    assert apply_todo_edit(text, TodoEdit(task=5, marker="PLANNED")) is None
    out = apply_todo_edit(text, TodoEdit(task=1, marker=None, links=links(("Plan", "d/p"))))
    assert out == text.replace("[PLANNED]\n", "[PLANNED]\n- **Plan**: [p](d/p)\n")


def test_crlf_file_stays_crlf() -> None:
    """Every line of a CRLF file, inserted ones included, ends in CRLF."""
    crlf = TODO.replace("\n", "\r\n")
    edit = TodoEdit(task=259, marker="COMPLETED", links=links(("Summary", SUMMARY)), completed="x")
    out = apply_todo_edit(crlf, edit)
    assert out is not None
    assert "\n" not in out.replace("\r\n", "")
    assert f"- **Summary**: {SUMMARY_LINK}\r\n- **Completed**: x\r\n" in out


@pytest.mark.parametrize("cr", ["", "\r"])
def test_no_trailing_newline_is_kept(cr: str) -> None:
    """A file ending without a newline on the line a new line follows still has none."""
    text = f"# TODO{cr}\n{cr}\n### 3. Last{cr}\n- **Status**: [PLANNED]"
    edit = TodoEdit(task=3, marker="COMPLETED", completed="2026-01-08")
    out = apply_todo_edit(text, edit)
    assert out == f"# TODO{cr}\n{cr}\n### 3. Last{cr}\n- **Status**: [COMPLETED]{cr}\n" + (
        "- **Completed**: 2026-01-08"
    )


def test_section_without_fields_gets_status_under_heading() -> None:
    """A bare heading gets a Status line right under it."""
    text = "### 8. Bare\n\nSome text.\n"
    out = apply_todo_edit(text, TodoEdit(task=8, marker="PLANNED"))
    assert out == "### 8. Bare\n- **Status**: [PLANNED]\n\nSome text.\n"


def test_status_line_variants() -> None:
    """Extra text after the marker stays; `* **Status:**` style and missing markers work."""
    cases = {
        "- **Status**: [PLANNING] (since 2026-01-01)": "- **Status**: [PLANNED] (since 2026-01-01)",
        "* **Status:** [PLANNING]": "* **Status:** [PLANNED]",
        "- **Status**: planning": "- **Status**: [PLANNED] planning",
        "- **Status**:": "- **Status**: [PLANNED]",
    }
    for line, expected in cases.items():
        text = f"### 4. T\n{line}\n"
        assert (
            apply_todo_edit(text, TodoEdit(task=4, marker="PLANNED")) == f"### 4. T\n{expected}\n"
        )


def test_existing_link_to_same_target_is_left_alone() -> None:
    """A Research line that already links the report (maybe among others) is not rewritten."""
    line = "- **Research**: [r1.md](specs/2/r1.md), [r2.md](specs/2/r2.md)"
    text = f"### 2. T\n- **Status**: [RESEARCHING]\n{line}\n"
    edit = TodoEdit(task=2, marker="RESEARCHED", links=links(("Research", "specs/2/r2.md")))
    out = apply_todo_edit(text, edit)
    assert out == text.replace("[RESEARCHING]", "[RESEARCHED]")


def test_same_edit_twice_is_idempotent() -> None:
    """Applying the same edit to its own output changes nothing."""
    edit = TodoEdit(
        task=259,
        marker="COMPLETED",
        links=links(("Research", RESEARCH), ("Plan", "specs/259/p.md"), ("Summary", SUMMARY)),
        completed="2026-01-08",
    )
    once = apply_todo_edit(TODO, edit)
    assert once is not None
    assert apply_todo_edit(once, edit) == once


def test_only_first_matching_section_is_edited() -> None:
    """A task listed twice (e.g. also under an archive heading) is edited in its first section."""
    text = "### 6. A\n- **Status**: [PLANNED]\n### 6. A again\n- **Status**: [PLANNED]\n"
    out = apply_todo_edit(text, TodoEdit(task=6, marker="COMPLETED"))
    assert out == "### 6. A\n- **Status**: [COMPLETED]\n### 6. A again\n- **Status**: [PLANNED]\n"


_line = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=20
)


@settings(max_examples=100, deadline=None, database=None)
@given(
    before=st.lists(_line, max_size=6),
    after=st.lists(_line, max_size=6),
    crlf=st.booleans(),
    final_newline=st.booleans(),
)
def test_bytes_outside_the_section_never_change(
    before: list[str], after: list[str], crlf: bool, final_newline: bool
) -> None:
    """Whatever surrounds the section, only lines inside it change."""
    prefix = [line for line in before if not line.lstrip().startswith(("#", "```", "~~~", "---"))]
    suffix = ["## Next", *after]
    lines = [*prefix, "### 9. Task", "- **Status**: [PLANNED]", *suffix]
    eol = "\r\n" if crlf else "\n"
    text = eol.join(lines) + (eol if final_newline else "")
    edit = TodoEdit(
        task=9, marker="COMPLETED", links=links(("Plan", "d/q")), completed="2026-01-08"
    )
    out = apply_todo_edit(text, edit)
    assert out is not None
    head = eol.join(prefix)
    tail = eol.join(suffix) + (eol if final_newline else "")
    assert out.startswith(head)
    assert out.endswith(tail)
    middle = eol.join(
        [
            "### 9. Task",
            "- **Status**: [COMPLETED]",
            "- **Plan**: [q](d/q)",
            "- **Completed**: 2026-01-08",
        ]
    )
    assert middle in out


# --- apply_todo_edits: one pass, the same bytes as one edit after the other ---------------------


def one_by_one(text: str, edits: list[TodoEdit]) -> tuple[str, list[int]]:
    """The reference: each edit finds its section again in the text the edits before it left."""
    return _apply_one_by_one(text, edits)


def test_batch_edits_several_tasks_and_reports_missing_ones() -> None:
    edits = [
        TodoEdit(task=25, marker="RESEARCHED", links=links(("Research", "specs/25/r.md"))),
        TodoEdit(task=7, marker="PLANNED"),
        TodoEdit(task=259, marker="COMPLETED", completed="2026-01-08"),
        TodoEdit(task=25, marker="PLANNED", links=links(("Plan", "specs/25/p.md"))),
        TodoEdit(task=7, marker="COMPLETED"),
        TodoEdit(task=14, marker="IMPLEMENTING"),
    ]
    out, missing = apply_todo_edits(TODO, edits)
    assert missing == [7, 7]
    assert (out, missing) == one_by_one(TODO, edits)
    section = out.split("### 25.")[1].split("**Description**")[0]
    assert section == (
        " Set up CI\n"
        "- **Effort**: 1 hour\n"
        "- **Status**: [PLANNED]\n"
        "- **Language**: general\n"
        "- **Research**: [r.md](specs/25/r.md)\n"
        "- **Plan**: [p.md](specs/25/p.md)\n\n"
    )
    assert "- **Status**: [IMPLEMENTING]" in out.split("### 014.")[1]
    assert apply_todo_edits(TODO, []) == (TODO, [])


def test_nested_sections_apply_in_order() -> None:
    """A task section holding another task's: the outer one's fields may be the inner's lines."""
    text = "## 1. Epic\nintro\n### 2. Sub\n- **Status**: [PLANNED]\n### 3. Sub\n## 4. Next\n"
    edits = [
        TodoEdit(task=2, marker="RESEARCHED", links=links(("Research", "d/r"))),
        TodoEdit(task=1, marker="COMPLETED", links=links(("Plan", "d/p"))),
        TodoEdit(task=3, marker="PLANNED", completed="2026-01-08"),
        TodoEdit(task=2, links=links(("Summary", "d/s")), marker=None),
    ]
    assert apply_todo_edits(text, edits) == one_by_one(text, edits)


def test_a_line_break_in_a_value_never_makes_a_heading() -> None:
    """Defence in depth: a path with a line break is never linked; a marker or date with one
    is written on one line. No edit can create a heading or change the line endings."""
    edits = [
        TodoEdit(task=25, marker=None, links=links(("Plan", "specs/25/a\n### 99. New.md"))),
        TodoEdit(task=25, marker="PLAN\r\nNED", completed="2026-01-08\n### 98. X"),
        TodoEdit(task=99, marker="PLANNED"),
    ]
    out, missing = apply_todo_edits(TODO, edits)
    assert (out, missing) == one_by_one(TODO, edits)
    assert missing == [99]
    assert "99. New" not in out
    assert "\n### 98" not in out
    assert [line for line in changed_lines(TODO, out) if line.startswith("+")] == [
        "+- **Status**: [PLAN  NED]\n",
        "+- **Completed**: 2026-01-08 ### 98. X\n",
    ]


_TITLE = st.sampled_from(["Task", "Fix it", "", "Add `x`"])
_FIELD_LINE = st.sampled_from(
    [
        "- **Status**: [PLANNED]",
        "- **Status**: [RESEARCHING] (started)",
        "* **Status:** ",
        "- **Status**: no marker",
        "- **Effort**: 2 hours",
        "- **Language**: lean4",
        "  - **Research**: [r.md](specs/r.md)",
        "- **Plan**: [p.md](specs/p.md)",
        "- **Research**:",
        "  - [r.md](7_x/reports/r.md) \u2014 a report",
        "- **Artifacts**:",
        "  - reports/r.md",
        "  - plans/p.md \u2014 a plan",
        "- **Research Report**: [specs/p2.md]",
        "- **Summaries**: [s.md](specs/s.md), [t.md](t.md)",
        "- **Plan**: TBD",
        "- **Summary**: [s.md](specs/s.md)",
        "- **Completed**: 2025-12-31",
        "- **Priority**: High",
        "**Description**: text",
        "",
        "plain text with a # hash",
    ]
)
_NUMBER = st.integers(1, 8)


@st.composite
def todo_files(draw: st.DrawFn) -> str:
    """TODO.md files: front matter, levels 1-4, duplicate and padded numbers, code fences."""
    lines: list[str] = []
    if draw(st.booleans()):
        lines += ["---", "next_project_number: 9", "# not a heading", "---", ""]
    if draw(st.booleans()):
        lines.append("# TODO")
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["task", "task", "task", "heading", "fence"]))
        if kind == "heading":
            lines.append(draw(st.sampled_from(["# Title", "## High Priority", "### Notes"])))
        elif kind == "fence":
            fence = draw(st.sampled_from(["```", "~~~", "````"]))
            body = draw(st.lists(st.sampled_from(["# comment", "### 3. fake", "x"]), max_size=3))
            lines += [fence + "bash", *body, fence]
        else:
            hashes = "#" * draw(st.integers(1, 4))
            number = draw(_NUMBER)
            padded = f"{number:03d}" if draw(st.booleans()) else str(number)
            lines.append(f"{hashes} {padded}. {draw(_TITLE)}".rstrip())
            lines += draw(st.lists(_FIELD_LINE, max_size=5))
    eol = draw(st.sampled_from(["\n", "\r\n"]))
    return eol.join(lines) + (eol if draw(st.booleans()) else "")


_LINKS = st.lists(
    st.builds(
        TodoLink,
        label=st.sampled_from(["Research", "Plan", "Summary"]),
        path=st.sampled_from(
            ["specs/r.md", "specs/p2.md", "a b.md", "specs/7_x/reports/r.md", "r.md", "s/x\ny"]
        ),
        summary=st.sampled_from([None, "", "a summary", "x\r\n### 5. y", "see [x](y)"]),
    ),
    max_size=3,
).map(tuple)

_EDIT = st.builds(
    TodoEdit,
    task=_NUMBER,
    marker=st.sampled_from([None, "COMPLETED", "PLANNED", "RESEARCHED"]),
    links=_LINKS,
    completed=st.sampled_from([None, "2026-01-08"]),
    task_dir=st.sampled_from([None, "specs/7_x", "specs"]),
)


@settings(max_examples=400, deadline=None, database=None)
@given(text=todo_files(), edits=st.lists(_EDIT, max_size=8))
def test_batch_equals_one_edit_after_the_other(text: str, edits: list[TodoEdit]) -> None:
    """Byte for byte what the edits give one by one, with the same tasks reported missing;
    and applying the same edits again changes nothing (no link is ever added twice)."""
    once = apply_todo_edits(text, edits)
    assert once == one_by_one(text, edits)
    assert apply_todo_edits(once[0], edits)[0] == once[0]
    for edit in edits[:1]:
        single = one_by_one(text, [edit])
        assert apply_todo_edit(text, edit) == (None if single[1] else single[0])


# --- real forms, one behaviour each (the full tables are in test_todo_forms.py) ---------------


def _add(section_lines: str, *pairs: tuple[str, str], summary: str | None = None) -> str:
    text = f"### 7. T\n- **Status**: [PLANNED]\n{section_lines}\nText.\n"
    edit = TodoEdit(
        task=7,
        marker=None,
        links=tuple(TodoLink(label, path, summary) for label, path in pairs),
        task_dir="specs/7_t",
    )
    out = apply_todo_edit(text, edit)
    assert out is not None
    assert out.endswith("\nText.\n")
    return out.split("[PLANNED]\n", 1)[1].rsplit("\nText.\n", 1)[0]


def test_placeholder_value_is_replaced_other_text_is_kept() -> None:
    """`TBD` stands for no link yet; any other text stays, the link follows it."""
    assert _add("- **Plan**: TBD\n", ("Plan", "specs/7_t/plans/p.md")) == (
        "- **Plan**: [p.md](specs/7_t/plans/p.md)\n"
    )
    assert _add("- **Plan**: see the wiki\n", ("Plan", "specs/7_t/plans/p.md")) == (
        "- **Plan**: see the wiki, [p.md](specs/7_t/plans/p.md)\n"
    )


def test_text_after_the_last_link_on_the_line_stays_after_it() -> None:
    out = _add("- **Research**: [a.md](specs/7_t/reports/a.md) (draft)\n", ("Research", "x/b.md"))
    assert out == "- **Research**: [a.md](specs/7_t/reports/a.md), [b.md](x/b.md) (draft)\n"


def test_sub_list_summary_is_one_escaped_line_and_capped() -> None:
    """An item's `` — summary`` is inert text: no line break, no markup, at most 200 chars."""
    lines = "- **Research**:\n  * [a.md](7_t/reports/a.md) \u2014 first\n"
    out = _add(lines, ("Research", "specs/7_t/reports/b.md"), summary="x\n### 9. [y](javascript:z)")
    assert (
        out
        == lines + "  * [b.md](7_t/reports/b.md) \u2014 " + r"x ### 9. \[y\](javascript:z)" + "\n"
    )
    out = _add(lines, ("Research", "specs/7_t/reports/b.md"), summary="w " * 300)
    item = out.splitlines()[-1]
    assert item.endswith("\u2026")
    assert len(item) < 260
    plain = "- **Research**:\n  - [a.md](7_t/reports/a.md)\n"
    assert _add(plain, ("Research", "specs/7_t/reports/b.md"), summary="s") == (
        plain + "  - [b.md](7_t/reports/b.md)\n"
    ), "no summary where the items have none"


def test_sub_list_of_bare_links_and_of_plain_paths() -> None:
    bare = "- **Research**:\n  - [specs/7_t/reports/a.md]\n"
    assert _add(bare, ("Research", "specs/7_t/reports/b.md")) == (
        bare + "  - [specs/7_t/reports/b.md]\n"
    )
    plain = "- **Artifacts**:\n  - reports/a.md\n"
    assert _add(plain, ("Plan", "specs/7_t/plans/p.md"), ("Summary", "src/s.md")) == (
        plain + "  - plans/p.md\n  - src/s.md\n"
    )


def test_same_artifact_in_any_form_is_not_linked_again() -> None:
    """Root-relative, specs-relative, task-relative, bare or `./`: one artifact."""
    for lines in (
        "- **Research**: [a.md](specs/7_t/reports/a.md)\n",
        "- **Research**: [a.md](7_t/reports/a.md)\n",
        "- **Research**: [specs/7_t/reports/a.md]\n",
        "- **Research**: [a.md](./specs/7_t/reports/a.md)\n",
        "- **Artifacts**:\n  - reports/a.md\n",
        "- **Plan**: [a.md](<specs/7_t/reports/a.md>)\n",
    ):
        assert _add(lines, ("Research", "specs/7_t/reports/a.md")) == lines


def test_links_in_the_description_do_not_count() -> None:
    """Only link fields hold the task's links: a report quoted in prose is still linked."""
    text = "### 7. T\n- **Status**: [PLANNED]\n\nSee [a.md](specs/7_t/reports/a.md).\n"
    edit = TodoEdit(task=7, marker=None, links=(TodoLink("Research", "specs/7_t/reports/a.md"),))
    assert apply_todo_edit(text, edit) == text.replace(
        "[PLANNED]\n", "[PLANNED]\n- **Research**: [a.md](specs/7_t/reports/a.md)\n"
    )


def test_new_label_line_goes_after_the_last_sub_list() -> None:
    lines = "- **Research**:\n  - [a.md](7_t/reports/a.md)\n    continued\n"
    assert _add(lines, ("Summary", "specs/7_t/summaries/s.md")) == (
        lines + "- **Summary**: [s.md](7_t/summaries/s.md)\n"
    )


@pytest.mark.parametrize(
    "path", ["specs/7_t/a\rb.md", "specs/7_t/a\x00.md", "x/\u2028y.md", "", "d/" + "x" * 2100]
)
def test_unsafe_paths_are_never_written(path: str) -> None:
    """Defence in depth behind PF501: such a link is skipped, the rest still applies."""
    out = _add("", ("Research", path), ("Plan", "specs/7_t/plans/p.md"))
    assert out == "- **Plan**: [p.md](specs/7_t/plans/p.md)\n"


def test_plain_item_with_a_bracketed_summary_is_still_read_as_linked() -> None:
    """An escaped ``[`` in a plain item's summary does not hide the item's path."""
    lines = "- **Artifacts**:\n  - reports/a.md \u2014 notes\n"
    once = _add(lines, ("Research", "specs/7_t/reports/b.md"), summary="see [x]")
    assert once == lines + "  - reports/b.md \u2014 see \\[x\\]\n"
    assert _add(once, ("Research", "specs/7_t/reports/b.md"), summary="see [x]") == once


def test_an_outer_section_never_edits_a_nested_tasks_lines() -> None:
    """`## 3.` holding `### 1.` and `### 2.`: task 3's marker goes on a Status line of its own,
    never onto task 2's; and the same edits applied twice change nothing (a hypothesis find)."""
    text = "## 3. Task\n### 1. Task\n### 2. Task"
    edits = [
        TodoEdit(task=2, marker="PLANNED"),
        TodoEdit(task=3, marker="COMPLETED"),
        TodoEdit(task=1, marker="COMPLETED"),
    ]
    once, missing = apply_todo_edits(text, edits)
    assert missing == []
    assert once == (
        "## 3. Task\n- **Status**: [COMPLETED]\n"
        "### 1. Task\n- **Status**: [COMPLETED]\n"
        "### 2. Task\n- **Status**: [PLANNED]"
    )
    assert (once, []) == one_by_one(text, edits)
    assert apply_todo_edits(once, edits)[0] == once
