"""Render the control record's attribute tables in docs/control-contract.md from the one
declaration of them (saga_index.layout_change.record.schema).

    python -m devkit.record_table            rewrite the tables in the doc
    python -m devkit.record_table --check    exit 1 if the doc's tables are not what this writes

Each table sits between two markers in the doc, `<!-- record-table:NAME -->` and
`<!-- /record-table:NAME -->`; the text around them is the doc's own.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path

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


def _block(name: str) -> re.Pattern[str]:
    return re.compile(
        rf"(<!-- record-table:{name} -->\n)(.*?)(\n<!-- /record-table:{name} -->)", re.DOTALL
    )


def render_doc(text: str) -> str:
    """`text` with every table between its markers replaced by the generated one."""
    for name, parts in TABLES.items():
        pattern = _block(name)
        if pattern.search(text) is None:
            raise ValueError(f"the doc has no <!-- record-table:{name} --> block")
        table = render_table(parts)

        def replaced(match: re.Match[str], table: str = table) -> str:
            return match.group(1) + table + match.group(3)

        text = pattern.sub(replaced, text)
    return text


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devkit.record_table", description=__doc__)
    parser.add_argument(
        "--check",
        action="store_true",
        help="do not write; exit 1 if the doc's tables differ from what would be generated",
    )
    parser.add_argument("--path", type=Path, default=DEFAULT_PATH, help="the contract doc")
    args = parser.parse_args(argv)
    path: Path = args.path
    try:
        text = path.read_text(encoding="utf-8")
        expected = render_doc(text)
    except (OSError, ValueError) as err:
        print(f"{path}: {err}", file=sys.stderr)
        return 1
    if args.check:
        if text != expected:
            print(
                f"{path}: the record's attribute tables are out of date: run "
                "`python -m devkit.record_table` and commit the result",
                file=sys.stderr,
            )
            return 1
        print(f"{path}: the record's attribute tables are current")
        return 0
    path.write_text(expected, encoding="utf-8")
    print(f"wrote the record's attribute tables into {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
