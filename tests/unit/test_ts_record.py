"""clients/typescript/src/record-schema.ts: what devkit.ts_record writes from the one declaration
of the control record (saga_index.layout_change.record: schema.py and grammar.py). The package's
parser reads items with that table, so a stale copy would parse another record than Python's."""

from __future__ import annotations

from pathlib import Path

import pytest

from devkit import ts_record
from saga_index.layout_change.record.grammar import MAX_INTEGER, TIME_PATTERN
from saga_index.layout_change.record.schema import PARTS


def test_given_the_committed_file_then_it_is_what_the_generator_writes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert ts_record.DEFAULT_PATH.read_text(encoding="utf-8") == ts_record.render()
    assert ts_record.main(["--check"]) == 0, capsys.readouterr().err


def test_given_the_generated_file_then_it_holds_every_attribute_and_the_grammar() -> None:
    text = ts_record.render()

    for part in PARTS:
        for attribute in part.attributes:
            assert f'{{ name: "{attribute.name}", value: "{attribute.value.value}",' in text
    assert f'"maxInteger": {MAX_INTEGER},' in text
    assert TIME_PATTERN.replace("\\", "\\\\") in text
    assert "export const PARTS: readonly PartSpec[] = [TRANSITION, LEASE, CONTROLS" in text


@pytest.mark.parametrize(
    "edit",
    [
        lambda t: t.replace('name: "reason", value: "string"', 'name: "reason", value: "integer"'),
        lambda t: t.replace('"maxInteger": 9007199254740991', '"maxInteger": 9007199254740992'),
        lambda t: t.replace('    { name: "changedBy"', '    // { name: "changedBy"'),
    ],
    ids=["a value kind", "the grammar", "an attribute dropped"],
)
def test_given_a_hand_edited_file_then_the_check_fails_and_a_run_restores_it(
    edit: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = tmp_path / "record-schema.ts"
    original = ts_record.render()
    edited = edit(original)  # type: ignore[operator]
    assert edited != original
    copy.write_text(edited, encoding="utf-8")

    assert ts_record.main(["--check", "--path", str(copy)]) == 1
    assert "python -m devkit.ts_record" in capsys.readouterr().err
    assert ts_record.main(["--check", "--path", str(tmp_path / "absent.ts")]) == 1
    assert ts_record.main(["--path", str(copy)]) == 0
    assert copy.read_text(encoding="utf-8") == original
