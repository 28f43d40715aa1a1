"""A committed file generated from the code (docs/shard-vectors.json, docs/contract-vectors.json,
docs/contract-corpus.json, the TypeScript package's record table): how it is written, and
`--check`, which fails when the committed file is missing or differs from what the code
generates now."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


def render(document: dict[str, Any]) -> str:
    return json.dumps(document, ensure_ascii=True, indent=2) + "\n"


def vectors_main(
    argv: Sequence[str] | None,
    *,
    module: str,
    description: str | None,
    default_path: Path,
    build: Callable[[], dict[str, Any]],
    summary: Callable[[dict[str, Any]], str],
    render: Callable[[dict[str, Any]], str] = render,
) -> int:
    """`python -m <module> [--check] [--path P]`: write the file, or check it is current."""
    document: dict[str, Any] = {}

    def text() -> str:
        document.update(build())
        return render(document)

    return generated_main(
        argv,
        module=module,
        description=description,
        default_path=default_path,
        text=text,
        summary=lambda: summary(document),
    )


def generated_main(
    argv: Sequence[str] | None,
    *,
    module: str,
    description: str | None,
    default_path: Path,
    text: Callable[[], str],
    summary: Callable[[], str],
) -> int:
    """`python -m <module> [--check] [--path P]` for any file generated from the code: write
    it, or exit 1 naming the command when the committed file is missing or differs."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=description)
    parser.add_argument(
        "--check",
        action="store_true",
        help="do not write; exit 1 if the file differs from what would be generated",
    )
    parser.add_argument("--path", type=Path, default=default_path, help="the generated file")
    args = parser.parse_args(argv)
    path: Path = args.path
    expected = text()
    if args.check:
        try:
            actual = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            actual = None
        if actual != expected:
            state = "is missing" if actual is None else "is out of date"
            print(
                f"{path} {state}: run `python -m {module}` and commit the result",
                file=sys.stderr,
            )
            return 1
        print(f"{path} is current ({summary()})")
        return 0
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(expected, encoding="utf-8")
    print(f"wrote {path}")
    return 0
