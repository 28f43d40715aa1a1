"""Sections of a doc generated from the code they describe, and the one entry point of their
generators (`python -m devkit.record_table`, `python -m devkit.cli_reference`): write them, or
with `--check` exit 1 when the doc differs from what would be written (the tests run it).

Each section sits between two markers, `<!-- KIND:NAME -->` and `<!-- /KIND:NAME -->`; the text
around them is the doc's own.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path


def render_blocks(text: str, kind: str, blocks: Mapping[str, Callable[[], str]]) -> str:
    """`text` with every block of `kind` replaced by what its renderer returns; ValueError
    naming a block the doc does not have."""
    for name, render in blocks.items():
        pattern = re.compile(
            rf"(<!-- {kind}:{name} -->\n)(.*?)\n?(<!-- /{kind}:{name} -->)", re.DOTALL
        )
        if pattern.search(text) is None:
            raise ValueError(f"the doc has no <!-- {kind}:{name} --> block")
        body = render()

        def replaced(match: re.Match[str], body: str = body) -> str:
            return match.group(1) + body + "\n" + match.group(3)

        text = pattern.sub(replaced, text)
    return text


def generator_main(
    argv: Sequence[str] | None,
    *,
    module: str,
    description: str | None,
    default_path: Path,
    render_doc: Callable[[str], str],
    what: str,
) -> int:
    """Write `what` into the doc (`--path`, default `default_path`), or `--check` it."""
    prog = f"python -m {module}"
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument(
        "--check",
        action="store_true",
        help=f"do not write; exit 1 if the doc's {what} differ from what would be generated",
    )
    parser.add_argument("--path", type=Path, default=default_path, help="the doc")
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
                f"{path}: the {what} are out of date: run `{prog}` and commit the result",
                file=sys.stderr,
            )
            return 1
        print(f"{path}: the {what} are current")
        return 0
    path.write_text(expected, encoding="utf-8")
    print(f"wrote the {what} into {path}")
    return 0
