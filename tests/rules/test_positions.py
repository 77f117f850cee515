"""Where findings point (``rules.positions``): walking only towards the findings' locations
places each finding exactly where walking the whole document does.

``with_positions`` asks ``field_offsets`` for the locations its findings name; every other
value is stepped over whole. A key may hold "." or "[", so what lies "on the way" is taken
generously; checked here against the whole walk on random documents, keys and locations.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.documents import json_paths
from postflightd.rules.findings import Finding, Severity
from postflightd.rules.positions import _line_col, _parent, field_offsets, with_positions


def _whole_walk(findings: list[Finding], raw: bytes) -> list[tuple[int | None, int | None]]:
    """Positions as found by walking the whole document (what the module did before)."""
    text = raw.decode("utf-8")
    offsets = field_offsets(text)
    out: list[tuple[int | None, int | None]] = []
    for f in findings:
        loc = f.location
        if not loc:  # about the file as a whole: no position
            out.append((None, None))
            continue
        while loc and loc not in offsets:
            loc = _parent(loc)
        out.append(_line_col(text, offsets[loc]) if loc else (1, 1))
    return out


def _location(path: tuple[Any, ...]) -> str:
    out = ""
    for part in path:
        out = f"{out}[{part}]" if isinstance(part, int) else (f"{out}.{part}" if out else part)
    return out


keys = st.one_of(
    st.sampled_from(("a", "b", "a.b", "x[1]", "m.x.y[2]z", "[", ".")), st.text(max_size=3)
)
documents = st.recursive(
    st.one_of(st.none(), st.integers(), st.text(max_size=3)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(keys, inner, max_size=4)),
    max_leaves=15,
).filter(lambda doc: isinstance(doc, dict))


@settings(max_examples=500, deadline=None, database=None)
@given(doc=documents, data=st.data(), indent=st.sampled_from((None, 2)))
def test_walking_towards_the_findings_places_them_as_the_whole_walk(
    doc: dict[str, Any], data: st.DataObject, indent: int | None
) -> None:
    raw = json.dumps(doc, indent=indent).encode("utf-8")
    real = [_location(p) for p in json_paths(doc)[1:]]
    locations = data.draw(
        st.lists(st.one_of(st.sampled_from(real or ["a"]), keys.map(lambda k: f"{k}.missing")))
    )
    findings = [Finding("PF205", Severity.WARNING, loc, "m") for loc in locations]
    got = [(f.line, f.col) for f in with_positions(findings, raw)]
    assert got == _whole_walk(findings, raw)


def test_a_value_off_the_way_is_stepped_over_not_walked() -> None:
    raw = json.dumps({"big": [{"k": i} for i in range(50)], "status": "x"}, indent=2).encode()
    text = raw.decode()
    near = field_offsets(text, ["status"])
    assert "status" in near and "big[0]" not in near
    assert near["status"] == field_offsets(text)["status"]


def test_a_positioned_finding_keeps_its_fix() -> None:
    """The github and sarif formats and ``postflightd mcp`` show positioned findings: the
    fix a rule built must survive the placing (it was dropped)."""
    raw = b'{\n  "status": "research-done"\n}\n'
    fix = '"status": "researched"'
    found = Finding("PF202", Severity.ERROR, "status", "not a status", fix=fix)
    (placed,) = with_positions([found], raw)
    assert (placed.line, placed.col, placed.fix) == (2, 3, fix)
