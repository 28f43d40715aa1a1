"""docs/control-contract.md's attribute tables: what devkit.record_table renders from the one
declaration of the record (saga_index.layout_change.record.schema)."""

from __future__ import annotations

from pathlib import Path

import pytest

from devkit import record_table
from saga_index.layout_change.record.schema import PARTS

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "control-contract.md"


def test_given_the_committed_doc_then_its_tables_are_the_generated_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = DOC.read_text(encoding="utf-8")

    assert record_table.render_doc(text) == text
    assert record_table.main(["--check"]) == 0, capsys.readouterr().err


def test_given_the_doc_then_every_declared_attribute_has_its_row() -> None:
    text = DOC.read_text(encoding="utf-8")

    for part in PARTS:
        for attribute in part.attributes:
            assert f"\n| `{attribute.name}` | " in text, attribute.name


def test_given_an_edited_table_then_the_check_fails_and_a_run_restores_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = tmp_path / "control-contract.md"
    original = DOC.read_text(encoding="utf-8")
    doc.write_text(original.replace("| `reason` | S |", "| `reason` | N |"), encoding="utf-8")

    assert record_table.main(["--check", "--path", str(doc)]) == 1
    assert "python -m devkit.record_table" in capsys.readouterr().err
    assert record_table.main(["--path", str(doc)]) == 0
    assert doc.read_text(encoding="utf-8") == original


def test_given_a_doc_without_the_markers_then_the_check_fails_naming_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = tmp_path / "control-contract.md"
    doc.write_text("# no tables here\n", encoding="utf-8")

    assert record_table.main(["--check", "--path", str(doc)]) == 1
    assert "record-table:history" in capsys.readouterr().err
