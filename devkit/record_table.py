"""Render the control record's attribute tables in docs/control-contract.md from the one
declaration of them (saga_index.layout_change.record.schema).

    python -m devkit.record_table            rewrite the tables in the doc
    python -m devkit.record_table --check    exit 1 if the doc's tables are not what this writes

Each table sits between two markers in the doc, `<!-- record-table:NAME -->` and
`<!-- /record-table:NAME -->`; the text around them is the doc's own.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from pathlib import Path

from devkit.doc_blocks import generator_main, render_blocks
from saga_index.layout_change.record import (
    COMPLETION,
    CONTROLS,
    HISTORY_FLAGS,
    LEASE,
    TRANSITION,
    Part,
)

DEFAULT_PATH = Path(__file__).resolve().parent.parent / "docs" / "control-contract.md"

# Table name in the doc -> the parts it shows, in order.
TABLES: dict[str, tuple[Part, ...]] = {
    "history": (HISTORY_FLAGS,),
    "transition": (TRANSITION,),
    "backfill": (LEASE, CONTROLS, COMPLETION),
}


def render_table(parts: Sequence[Part]) -> str:
    lines = ["| attribute | type | meaning |", "|---|---|---|"]
    for part in parts:
        for attribute in part.attributes:
            kind = attribute.doc_type(whole_part_optional=part.present_if is not None)
            lines.append(f"| `{attribute.name}` | {kind} | {attribute.meaning} |")
    return "\n".join(lines)


def render_doc(text: str) -> str:
    """`text` with every table between its markers replaced by the generated one."""
    return render_blocks(
        text,
        "record-table",
        {name: partial(render_table, parts) for name, parts in TABLES.items()},
    )


def main(argv: Sequence[str] | None = None) -> int:
    return generator_main(
        argv,
        module="devkit.record_table",
        description=__doc__,
        default_path=DEFAULT_PATH,
        render_doc=render_doc,
        what="record's attribute tables",
    )


if __name__ == "__main__":
    raise SystemExit(main())
