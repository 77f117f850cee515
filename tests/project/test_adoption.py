"""What counts as a hand postflight in a workflow's text: a read or a delete of the metadata
file, not the subagent's instruction to write it."""

from __future__ import annotations

import pytest

from postflightd.project.adoption import hand_postflight_in


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # A shell variable given the path, read and deleted through it.
        (
            b'meta="specs/${t}_${s}/.return-meta.json"\nstatus=$(jq -r .status "$meta")\n'
            b'rm -f "$meta"\n',
            (2, True, True),
        ),
        (b"for f in specs/*/.return-meta.json; do cat $f; done\n", (1, True, False)),
        (b"rm -f specs/1_x/.return-meta.json\n", (1, False, True)),
        # The Read tool a prompt names; the verb on the line above the path, ending in ':'.
        (b"Read specs/{N}_{SLUG}/.return-meta.json and record its status.\n", (1, True, False)),
        (
            b"Then delete the metadata file:\n\nspecs/{N}_{SLUG}/.return-meta.json\n",
            (3, False, True),
        ),
        (b"const meta = join(dir, '.return-meta.json')\nawait fs.unlink(meta)\n", (2, False, True)),
        # Bytes that are not UTF-8 are still read.
        (b"\xff\xfe jq . specs/1_x/.return-meta.json\n", (1, True, False)),
    ],
)
def test_reads_and_deletes_of_the_file_are_found(
    text: bytes, expected: tuple[int, bool, bool]
) -> None:
    assert hand_postflight_in(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        b"",
        b"jq -r .status specs/state.json\nrm -f /tmp/x\n",
        # A subagent's instructions: it writes the file; "Read" elsewhere is about the task.
        b"Read the task in TODO.md.\nWrite specs/{N}_{SLUG}/.return-meta.json when done.\n",
        b"Read the plan.\nThen write .return-meta.json.\n",
    ],
)
def test_writing_or_merely_naming_the_file_is_not_a_postflight(text: bytes) -> None:
    assert hand_postflight_in(text) is None
