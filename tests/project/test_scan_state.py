"""state.json read for a scan: decoded by msgspec, or parsed by the full reader, always
exactly what the full reader gives: the same scan fields, or the same problem.

``decode_tasks`` is msgspec's path alone: where json refuses a file (or might read it
otherwise) it must answer None, so that the full reader decides; where it answers, the fields
must be the full reader's, value and type.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.documents import SESSION, task_entry
from helpers.project import project
from postflightd.fs.directory import Directory
from postflightd.project.scan_state import (
    SCAN_FIELDS,
    WHOLE_MIN_BYTES,
    decode_tasks,
    load_state_for_scan,
)
from postflightd.project.state import StateView, load_state


def full_state(path: Path) -> StateView:
    """What postflight reads (``state.load_state``, through the tree layer)."""
    with Directory.anchor(path.parent) as specs:
        return load_state(specs, path.name)


def rows(tasks: Mapping[int, Mapping[str, Any]]) -> list[str]:
    """The scan fields of each task, in order, as text: True is not 1, 1.0 is not 1 here."""
    return [repr((n, {k: task[k] for k in SCAN_FIELDS if k in task})) for n, task in tasks.items()]


#: The file decoded by msgspec (by default for a file of WHOLE_MIN_BYTES or more), and parsed
#: by the full reader alone, whatever the file's size.
READERS: dict[str, dict[str, int]] = {"msgspec": {"whole_min": 0}, "full": {"whole_min": 1 << 62}}


def check_agrees(path: Path, raw: bytes) -> StateView:
    """Every reader of state.json for a scan agrees with the full reader on ``raw``."""
    path.write_bytes(raw)
    full = full_state(path)
    for reader in READERS.values():
        lean = load_state_for_scan(path, **reader)
        assert (lean.usable, lean.exists, lean.problem) == (full.usable, True, full.problem)
        assert rows(lean.tasks) == rows(full.tasks)
    fast = decode_tasks(raw)
    if fast is not None:
        assert full.usable, full.problem
        assert rows(fast) == rows(full.tasks)
    return full


TASK = b'{"active_projects": [{"project_number": 1, %s}]}'

#: json refuses each, or reads it otherwise than msgspec would: msgspec's path must say None.
NOT_FOR_MSGSPEC: list[bytes] = [
    TASK % b'"x": "\xff"',  # not UTF-8 in a value msgspec skips
    TASK % b'"\xff": 1',  # in a key it skips
    TASK % b'"x": "\xc0\xaf"',  # an overlong encoding
    TASK % b'"x": "\xed\xa0\x80"',  # an encoded surrogate
    TASK % b'"project_name": "\xf4\x90\x80\x80"',  # beyond U+10FFFF, in a kept field
    TASK % b'"x": "\xe2\x82"',  # a character cut short
    b"\xef\xbb\xbf" + b'{"active_projects": []}',  # a byte-order mark
    '{"active_projects": []}'.encode("utf-16"),
    '{"active_projects": []}'.encode("utf-16-le"),
    '{"active_projects": []}'.encode("utf-32"),
    TASK % b'"x": NaN',
    TASK % b'"x": -Infinity',
    TASK % b'"project_name": "\\ud800"',  # a lone surrogate escape: json keeps it, msgspec not
    TASK % b'"x": "\\udc00"',
    TASK % b'"project_name": "a\x01b"',  # a raw control character
    TASK % b'"x": "a\nb"',
    TASK % (b'"x": ' + b"7" * 4301),  # more digits than Python converts: json raises
    TASK % (b'"x": -' + b"7" * 5000),
    TASK % (b'"status": ' + b"7" * 5000),
    b'{"active_projects": [{"project_number": ' + b"7" * 4301 + b"}]}",
    TASK % b'"project_name": 5',  # a kept field that is not a string or null
    TASK % b'"status": 1.5',
    TASK % b'"language": ["x"]',
    TASK % b'"session_id": true',
    TASK % b'"status": 123456789012345678901234567890',
    b'{"active_projects": [{"project_number": 1.0}]}',
    b'{"active_projects": [{"project_number": 1e2}]}',
    b'{"active_projects": [{"project_number": true}]}',
    b'{"active_projects": [{"project_number": 1, "project_number": false}]}',
    b'{"active_projects": [{"project_number": null}]}',
    b'{"active_projects": [{"project_name": "no number"}]}',
    b'{"active_projects": [7]}',
    b'{"active_projects": [[]]}',
    b'{"active_projects": {}}',
    b'{"active_projects": null}',
    b'{"tasks": []}',
    b"{}",
    b"[]",
    b'"active_projects"',
    b"",
    b" \n",
    b'{"active_projects": []} trailing',
    b'{"active_projects": []}\x0c',
    b'{"active_projects": []}\xc2\xa0',
    b'{"active_projects": [{"project_number": 1}], "active_projects": 5}',
    b'{"active_projects": 5, "active_projects": [{"project_number": 1}]}',
    TASK % b'"x": [1,]',
    TASK % b'"x": 01',
    TASK % b'"x": 1.',
    TASK % b'"x": "\\x"',
    b'{"active_projects": [{"project_number": 1}]',
]


@pytest.mark.parametrize("raw", NOT_FOR_MSGSPEC, ids=range(len(NOT_FOR_MSGSPEC)))
def test_msgspec_is_not_taken_where_json_differs(tmp_path: Path, raw: bytes) -> None:
    assert decode_tasks(raw) is None
    check_agrees(tmp_path / "state.json", raw)


#: Read by msgspec's path, exactly as json reads them.
FOR_MSGSPEC: list[bytes] = [
    b'{"active_projects": []}',
    b' \t\r\n{"active_projects": []} \t\r\n',
    TASK % b'"project_name": "a", "project_name": "b"',  # a repeated key: the last wins
    TASK % b'"project_name": "a", "project_n\\u0061me": "b"',  # the same key, escaped
    b'{"active_projects": [{"project_number": 1, "project_number": 2}]}',
    b'{"active_projects": [{"project_number": 1}], '
    b'"active\\u005fprojects": [{"project_number": 2}]}',
    b'{"active_projects": [{"project_number": 1}, {"project_number": 1, "status": "b"}]}',
    b'{"active_projects": [{"project_number": 123456789012345678901234567890}]}',
    b'{"active_projects": [{"project_number": -18446744073709551617}]}',
    b'{"active_projects": [{"project_number": -0}]}',
    TASK % b'"project_name": "\\ud83d\\ude00 \\u00e9 \\u0000 \\/\\b\\f\\n\\r\\t\\"\\\\"',
    TASK % '"project_name": "né ✓ 😀", "x": "é"'.encode(),
    TASK % b'"project_name": null, "language": null, "session_id": null, "status": null',
    TASK % b'"x": 123456789012345678901234567890, "y": -1.5e300, "z": 1e999, "w": 0.1',
    TASK % (b'"x": ' + b"7" * 2000),  # fewer digits than Python's limit
    TASK % b'"x": "a\x7fb", "y": {"a": [true, false, null, {}, []]}',
    b'{"x": {"active_projects": 1}, "active_projects": [{"project_number": 12345}] ,"y":-1.5e3}',
]


@pytest.mark.parametrize("raw", FOR_MSGSPEC, ids=range(len(FOR_MSGSPEC)))
def test_msgspec_reads_what_json_reads(tmp_path: Path, raw: bytes) -> None:
    full = check_agrees(tmp_path / "state.json", raw)
    if full.usable:
        assert decode_tasks(raw) is not None
    else:
        assert decode_tasks(raw) is None


def test_digits_are_looked_for_at_every_offset_and_python_s_own_limit() -> None:
    """A run of more digits than Python converts is found wherever it starts, by the limit in
    force (here the lowest Python allows), in a value msgspec skips."""
    old = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(640)
    try:
        for pad in range(0, 700, 7):
            for digits in (318, 319, 320, 639, 640, 641, 700, 1500):
                raw = TASK % (b'"p": "' + b"x" * pad + b'", "x": ' + b"9" * digits)
                try:
                    json.loads(raw)
                    refused = False
                except ValueError:
                    refused = True
                assert refused == (digits > 640)
                fast = decode_tasks(raw)
                if refused:
                    assert fast is None
                elif digits <= 320:  # too short to be looked at (half the limit)
                    assert fast is not None
    finally:
        sys.set_int_max_str_digits(old)


def test_nesting_as_deep_as_json_reads_and_no_deeper(tmp_path: Path) -> None:
    """json runs out of recursion at a depth that depends on where it is called; msgspec
    counts against the same limit. Around that depth, the scan's readers answer as the full
    reader does at the very same call depth (this test's, as a scan's would be)."""
    path = tmp_path / "state.json"
    limit = sys.getrecursionlimit()
    seen = set()
    for depth in range(limit - 200, limit + 5):
        nested = b"[" * depth + b"]" * depth
        for raw in (
            TASK % (b'"x": ' + nested),
            b'{"x": ' + nested + b', "active_projects": [{"project_number": 1}]}',
        ):
            path.write_bytes(raw)
            full = full_state(path)
            seen.add(full.usable)
            for reader in READERS.values():
                lean = load_state_for_scan(path, **reader)
                assert (lean.usable, lean.problem) == (full.usable, full.problem), depth
    assert seen == {True, False}  # the window holds the depth where json gives up


def test_utf8_checked_across_its_pieces(tmp_path: Path) -> None:
    """A file that is not ASCII is checked 64 KiB at a time: characters cut by a piece's end
    read on, a bad byte far into the file is still found."""
    text = "é✓😀" * 30_000  # 270,000 bytes, cut at every kind of place
    good = json.dumps({"log": text, "active_projects": [task_entry(1, "a")]}, ensure_ascii=False)
    raw = good.encode()
    assert decode_tasks(raw) is not None
    check_agrees(tmp_path / "state.json", raw)
    for at in (70_000, len(raw) - 30):
        bad = raw[:at] + b"\xff" + raw[at:]
        assert decode_tasks(bad) is None
        check_agrees(tmp_path / "state.json", bad)


def test_msgspec_decodes_from_its_bound_up_and_the_full_reader_below(tmp_path: Path) -> None:
    """From ``whole_min`` bytes up msgspec decodes the file, below it the full reader parses
    it: the same tasks either way."""
    tasks = [task_entry(i, f"t{i}", description="d" * 200) for i in range(1, 200)]
    path = tmp_path / "state.json"
    path.write_text(json.dumps({"active_projects": tasks}))
    size = path.stat().st_size
    full = rows(full_state(path).tasks)
    for least in (0, size, size + 1, WHOLE_MIN_BYTES):
        assert rows(load_state_for_scan(path, whole_min=least).tasks) == full
    assert len(full) == 199


@pytest.mark.parametrize("reader", READERS)
def test_repeated_values_are_one_string(tmp_path: Path, reader: str) -> None:
    """language, session and status repeat from task to task: each is held once."""
    path = tmp_path / "state.json"
    path.write_text(json.dumps({"active_projects": [task_entry(i, f"t{i}") for i in (1, 2)]}))
    tasks = load_state_for_scan(path, **READERS[reader]).tasks
    for key in ("language", "session_id", "status"):
        assert tasks[1][key] is tasks[2][key]
    assert tasks[1]["session_id"] == SESSION


# -- any document -------------------------------------------------------------------------------

plain_leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=2**63 - 2, max_value=2**65)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
leaves = plain_leaves | st.floats()  # NaN and infinities: json writes NaN, Infinity


def nested(base: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.recursive(
        base,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
        max_leaves=8,
    )


KEYS = [*SCAN_FIELDS, "x", "description", "active_projects"]


@st.composite
def members(draw: st.DrawFn, task: bool, plain: bool) -> list[tuple[str, Any]]:
    """An object's members, in order, repeats allowed. ``plain``: kept fields strings or null,
    numbers ints, nothing json would refuse."""
    values = nested(plain_leaves if plain else leaves)
    kept = st.text(max_size=8) | st.none() | st.sampled_from(["a", "b"])
    number: st.SearchStrategy[Any] = st.integers(-3, 5) | st.integers()
    if not plain:
        kept, number = kept | values, number | values
    out: list[tuple[str, Any]] = []
    if task and (plain or draw(st.integers(0, 9))):
        out.append(("project_number", draw(number)))
    for _ in range(draw(st.integers(0, 5))):
        key = draw(st.sampled_from(KEYS) | st.text(max_size=5))
        if plain and not task and key == "active_projects":
            continue  # a repeat of it that is not a list of tasks: json refuses
        if not task:
            value = draw(values)
        elif key == "project_number":
            value = draw(number)
        else:
            value = draw(kept if key in SCAN_FIELDS else values)
        out.append((key, value))
    return out


@st.composite
def documents(draw: st.DrawFn, plain: bool = False) -> bytes:
    """state.json's text, written as people and tools write it: any whitespace, escaped or
    raw characters, keys repeated, tasks and the other keys in any order."""
    ascii_only = draw(st.booleans())
    space = draw(st.sampled_from(["", " ", "\n  ", "\t\r\n"]))

    def text(value: Any) -> str:
        return json.dumps(value, ensure_ascii=ascii_only)

    def obj(pairs: list[tuple[str, Any]]) -> str:
        inner = ("," + space).join(f"{text(k)}{space}:{space}{text(v)}" for k, v in pairs)
        return "{" + space + inner + space + "}"

    tasks = draw(st.lists(members(task=True, plain=plain), max_size=4))
    listed = "[" + ("," + space).join(obj(t) for t in tasks) + "]"
    if not plain and not draw(st.integers(0, 9)):
        listed = text(draw(nested(leaves)))  # not a list of tasks
    top = [*draw(members(task=False, plain=plain)), ("active_projects", None)]
    top += draw(members(task=False, plain=plain))
    document = obj(top).replace(f'"active_projects"{space}:{space}null', "\0", 1)
    return document.replace("\0", f'"active_projects"{space}:{space}{listed}').encode()


EDITS = [
    *(b"\xff", b"\xc3", b"\xe2\x82", b"\x00", b"\x01", b"\n", b'"', b"\\", b"\\u"),
    *(b"\\ud800", b"[", b"]", b"{", b"}", b",", b":", b"0", b"-", b"e", b".", b"NaN", b" "),
    *(b"\xef\xbb\xbf", b"9" * 4301, b"true", b"null"),
]


@st.composite
def edited(draw: st.DrawFn) -> bytes:
    raw = draw(documents())
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(raw)))
        cut = draw(st.integers(0, 2))
        raw = raw[:at] + draw(st.sampled_from(EDITS)) + raw[at + cut :]
    return raw


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as tmp:
        yield Path(tmp) / "state.json"


@settings(
    max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(raw=documents(plain=True))
def test_a_plain_document_goes_through_msgspec(scratch: Path, raw: bytes) -> None:
    """Kept fields strings or null, integer numbers: msgspec's path reads it, as json does."""
    assert check_agrees(scratch, raw).usable
    assert decode_tasks(raw) is not None


@settings(
    max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(raw=documents())
def test_any_document_reads_as_the_full_reader_reads_it(scratch: Path, raw: bytes) -> None:
    """Any value anywhere (a kept field a number, a list; a number a bool, a float, big
    integers, NaN), keys repeated, the tasks not a list."""
    check_agrees(scratch, raw)


@settings(
    max_examples=500, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(raw=edited())
def test_any_edited_document_reads_as_the_full_reader_reads_it(scratch: Path, raw: bytes) -> None:
    """Bytes that are not UTF-8, control characters, cut escapes, stray brackets, a BOM, long
    digit runs, anywhere."""
    check_agrees(scratch, raw)


# -- imports ------------------------------------------------------------------------------------


def _modules(*args: str, stdin: str = "") -> set[str]:
    code = (
        "import json, sys\nfrom postflightd.cli import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
        "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    return set(json.loads(done.stderr.splitlines()[-1]))


def test_msgspec_is_imported_by_a_scan_of_a_large_state_json_alone(tmp_path: Path) -> None:
    """A fresh process each: a plain scan reads a state.json of WHOLE_MIN_BYTES or more with
    msgspec, a smaller one without importing it; a stop of the hook (it reads state.json
    whole, to apply) and ``--version`` never import it."""
    root = project(tmp_path / "proj", 2)
    assert "msgspec" not in _modules("scan", str(root))
    stop = {"cwd": str(root), "hook_event_name": "Stop", "stop_hook_active": False}
    assert "msgspec" not in _modules("--version")
    state = root / "specs" / "state.json"
    doc = json.loads(state.read_text())
    doc["log"] = "x" * WHOLE_MIN_BYTES
    state.write_text(json.dumps(doc))
    assert "msgspec" in _modules("scan", str(root))
    assert "msgspec" not in _modules("hook", "claude", stdin=json.dumps(stop))
