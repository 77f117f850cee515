"""The rule toolkit shared by the metadata rules and the check-return rules: each parameter
that tells the two contracts apart does what it says, on plain data (no disk, no clock)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, model_validator

from postflightd.rules.findings import Finding, Severity, finding
from postflightd.rules.probe import ArtifactState
from postflightd.rules.toolkit import (
    ArtifactContract,
    artifact_rules,
    asked_fields,
    blank_fields,
    not_an_object,
    objects_of,
    outside_root,
    status_finding,
    structure,
    unknown_fields,
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True, frozen=True)
    status: str
    count: int
    flag: bool | None = None


def codes(findings: list[Finding]) -> list[tuple[str, str]]:
    return [(f.code, f.location) for f in findings]


# --- objects_of -----------------------------------------------------------------------------


def test_objects_of_names_the_document_an_object_and_each_object_of_a_list() -> None:
    doc = {"meta": {"a": 1}, "artifacts": [{"p": 1}, "plain", {"p": 2}], "error": "text"}
    assert list(objects_of(doc, "")) == [("", doc)]
    assert list(objects_of(doc, "meta")) == [("meta", {"a": 1})]
    # Non-objects are skipped, but the index stays the item's own.
    assert list(objects_of(doc, "artifacts[]")) == [
        ("artifacts[0]", {"p": 1}),
        ("artifacts[2]", {"p": 2}),
    ]
    assert list(objects_of(doc, "error")) == []
    assert list(objects_of(doc, "missing[]")) == []


# --- structure ------------------------------------------------------------------------------


def test_structure_returns_the_model_and_no_findings_for_a_valid_document() -> None:
    found, model = structure(_Strict.model_validate, {"status": "x", "count": 1}, "the return")
    assert found == []
    assert model is not None
    assert model.count == 1


def test_structure_puts_every_missing_field_before_every_wrong_type() -> None:
    found, model = structure(_Strict.model_validate, {"flag": "yes"}, "the return")
    assert model is None
    assert codes(found) == [("PF200", "status"), ("PF200", "count"), ("PF201", "flag")]


@pytest.mark.parametrize(
    ("quote_hint", "message"),
    [
        (False, "count must be an integer, not a string"),
        (True, "count must be an integer, not a string (write 5 without quotes)"),
    ],
)
def test_structure_quote_hint_suggests_writing_a_quoted_number_bare(
    quote_hint: bool, message: str
) -> None:
    found, _ = structure(
        _Strict.model_validate, {"status": "x", "count": " 5 "}, "the return", quote_hint=quote_hint
    )
    assert [f.message for f in found] == [message]


def test_structure_quote_hint_is_not_given_for_a_string_field() -> None:
    found, _ = structure(
        _Strict.model_validate, {"status": 5, "count": 1}, "the file", quote_hint=True
    )
    assert [f.message for f in found] == ["status must be a string, not a number"]


def test_structure_names_the_whole_document_when_an_error_has_no_location() -> None:
    class Checked(BaseModel):
        a: int | None = None

        @model_validator(mode="after")
        def refuse(self) -> Checked:
            raise ValueError("refused as a whole")

    for whole in ("the return", "the document"):
        found, _ = structure(Checked.model_validate, {}, whole)
        assert [(f.code, f.location) for f in found] == [("PF201", "")]
        assert found[0].message == f"{whole}: Value error, refused as a whole"


def test_structure_on_status_words_a_refused_status_string() -> None:
    class Enumerated(BaseModel):
        model_config = ConfigDict(strict=True)
        status: int

    said = finding("PF202", "status", "said by the caller")
    found, _ = structure(
        Enumerated.model_validate, {"status": "nope"}, "x", on_status=lambda raw: said
    )
    assert found == [said]
    # Without on_status the same error is an ordinary wrong type.
    found, _ = structure(Enumerated.model_validate, {"status": "nope"}, "x")
    assert codes(found) == [("PF201", "status")]
    # A status of another type is a wrong type either way.
    found, _ = structure(
        Enumerated.model_validate, {"status": 1.5}, "x", on_status=lambda raw: said
    )
    assert codes(found) == [("PF201", "status")]


# --- fields ---------------------------------------------------------------------------------


def test_unknown_fields_follow_the_order_of_the_kinds_and_say_what_is_kept() -> None:
    doc = {"z": 1, "meta": {"q": 1, "ok": 2}, "artifacts": [{"r": 1}]}
    known = {"artifacts[]": frozenset(), "meta": frozenset({"ok"}), "": frozenset({"meta"})}
    found = list(unknown_fields(doc, known, "kept as is"))
    assert codes(found) == [
        ("PF205", "artifacts[0].r"),
        ("PF205", "meta.q"),
        ("PF205", "z"),
        ("PF205", "artifacts"),
    ]
    assert found[1].message == "unknown field 'meta.q' (kept as is)"
    assert next(unknown_fields({"y": 1}, {"": frozenset()}, "kept")).message == (
        "unknown field 'y' (kept)"
    )


def test_blank_fields_report_needed_text_given_blank_where_the_kind_is_an_object() -> None:
    doc = {"summary": " ", "meta": {"agent_name": "\t"}, "artifacts": [{"path": ""}, {"path": "a"}]}
    needed = (("", "summary"), ("meta", "agent_name"), ("artifacts[]", "path"), ("error", "x"))
    found = list(blank_fields(doc, needed))
    assert codes(found) == [
        ("PF206", "summary"),
        ("PF206", "meta.agent_name"),
        ("PF206", "artifacts[0].path"),
    ]
    assert found[0].message == "summary is blank: fill it in"


def test_asked_fields_word_missing_and_report_blank_only_when_told() -> None:
    obj = {"type": None, "summary": " "}
    found = list(asked_fields(obj, ("type", "summary"), "artifacts[0]", "add it", "fill it in"))
    assert [(f.code, f.location, f.message) for f in found] == [
        ("PF207", "artifacts[0].type", "artifacts[0].type is missing; add it"),
        ("PF207", "artifacts[0].summary", "artifacts[0].summary is blank; fill it in"),
    ]
    found = list(asked_fields(obj, ("type", "summary"), "meta", "the contract asks for it"))
    assert [f.message for f in found] == ["meta.type is missing; the contract asks for it"]


# --- status ---------------------------------------------------------------------------------

STATUSES = ("complete", "partial", "error")


def test_status_finding_puts_the_note_between_the_list_and_the_guess() -> None:
    f = status_finding("Done", "meta.status", STATUSES, "complete", " (case-sensitive)")
    assert (f.code, f.location) == ("PF202", "meta.status")
    assert f.message == (
        "meta.status 'Done' is not one of complete, partial, error (case-sensitive); "
        'did you mean "complete"?'
    )
    f = status_finding("zzz", "status", STATUSES, None)
    assert f.message == "status 'zzz' is not one of complete, partial, error"


def test_not_an_object_names_the_holder_and_gives_the_advice() -> None:
    f = not_an_object([1], "the return", "return one object {...}")
    assert (f.code, f.location) == ("PF103", "")
    assert f.message == "the return holds an array, not a JSON object: return one object {...}"


# --- root escape ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "strict", "lenient"),
    [
        ("a/b.md", False, False),
        ("a/../b.md", False, False),
        ("../b.md", True, True),
        ("a/../../b", True, True),
        ("a\\..\\..\\b", True, True),
        ("~/b.md", True, True),
        ("/etc/passwd", True, False),
        ("/a/../../etc", True, False),
        ("\\server\\share", True, False),
        ("C:\\x", True, False),
        ("c:/x", True, False),
    ],
)
def test_outside_root_leaves_absolute_paths_to_the_probe_only_when_allowed(
    path: str, strict: bool, lenient: bool
) -> None:
    assert outside_root(path, absolute_allowed=False) is strict
    assert outside_root(path, absolute_allowed=True) is lenient


# --- artifacts ------------------------------------------------------------------------------


def _contract(**changes: Any) -> ArtifactContract:
    base: dict[str, Any] = {
        "types": ("report", "plan"),
        "path_problem": lambda p: "refused" if p.startswith("bad") else None,
        "phantom": "return",
        "outside": "(why)",
        "write_it": "write it now",
    }
    return ArtifactContract(**(base | changes))


def _probe(path: str) -> ArtifactState:
    return {
        "missing.md": ArtifactState.MISSING,
        "empty.md": ArtifactState.EMPTY,
        "dir": ArtifactState.NOT_A_FILE,
        "link.md": ArtifactState.OUTSIDE,
    }.get(path, ArtifactState.OK)


def test_artifact_rules_phantom_operation_only_where_the_contract_names_one() -> None:
    doc: dict[str, Any] = {"artifacts": []}
    found = list(artifact_rules(doc, "done", True, _contract(), _probe))
    assert [(f.code, f.message) for f in found] == [
        (
            "PF500",
            "status done with no artifacts: a phantom operation; list the files the run "
            "created, or return partial/failed",
        )
    ]
    assert list(artifact_rules(doc, "done", True, _contract(phantom=None), _probe)) == []
    assert list(artifact_rules(doc, "partial", False, _contract(), _probe)) == []
    assert list(artifact_rules({}, "done", True, _contract(), _probe)) == []


def test_artifact_rules_use_the_contracts_types_note_and_words() -> None:
    doc = {
        "artifacts": [
            {"path": "a.md", "type": "memo"},
            {"path": "missing.md"},
            {"path": "link.md"},
            {"path": "a.md"},
            {"path": "bad.md"},
        ]
    }
    contract = _contract(type_note=lambda kind: f" ({kind}?)")
    found = list(artifact_rules(doc, "done", True, contract, _probe))
    assert [(f.code, f.location, f.message) for f in found] == [
        ("PF204", "artifacts[0].type", "artifact type 'memo' is not one of report, plan (memo?)"),
        (
            "PF502",
            "artifacts[1].path",
            "artifact 'missing.md' does not exist: write it now, or fix the path "
            "(relative to the project root)",
        ),
        (
            "PF501",
            "artifacts[2].path",
            "artifact path 'link.md' resolves outside the project root (why)",
        ),
        ("PF504", "artifacts[3].path", "artifact 'a.md' is listed twice"),
        ("PF501", "artifacts[4].path", "refused"),
    ]


def test_artifact_rules_disk_findings_are_warnings_off_success_and_absent_without_a_probe() -> None:
    doc = {"artifacts": [{"path": "missing.md"}, {"path": "empty.md"}, {"path": "dir"}]}
    on_success = list(artifact_rules(doc, "done", True, _contract(), _probe))
    assert [(f.code, f.severity) for f in on_success] == [
        ("PF502", Severity.ERROR),
        ("PF503", Severity.ERROR),
        ("PF502", Severity.ERROR),
    ]
    off_success = list(artifact_rules(doc, "partial", False, _contract(), _probe))
    assert {f.severity for f in off_success} == {Severity.WARNING}
    assert list(artifact_rules(doc, "done", True, _contract(), None)) == []


def test_artifact_rules_plain_strings_are_skipped_unless_the_contract_reads_them() -> None:
    doc = {"artifacts": ["missing.md", 7, {"path": " "}]}
    assert list(artifact_rules(doc, "done", True, _contract(), _probe)) == []
    said = finding("PF208", "artifacts[0]", "a plain string")
    contract = _contract(plain_path=lambda loc, art: said)
    found = list(artifact_rules(doc, "done", True, contract, _probe))
    # Read as its path: the probe is asked, and the location is the item itself.
    assert [(f.code, f.location) for f in found] == [
        ("PF208", "artifacts[0]"),
        ("PF502", "artifacts[0]"),
    ]
