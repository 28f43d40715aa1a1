"""What a benchmark prints and writes: its table on stdout, progress on stderr, and its raw
numbers (with the parameters that produced them) in results/bench/<NAME>.json."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from devkit.dynalite import REPO_ROOT
from devkit.results import markdown_table, write_json

RESULTS = REPO_ROOT / "results" / "bench"


def pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f} %"


def num(value: float | None, digits: int = 1, suffix: str = "") -> str:
    return "-" if value is None else f"{value:,.{digits}f}{suffix}"


def emit(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Print one benchmark's table on stdout."""
    sys.stdout.write(f"\n{title}\n\n{markdown_table(headers, rows)}\n\n")
    sys.stdout.flush()


def save(name: str, document: dict[str, Any], directory: Path | None = None) -> Path:
    """The one writer of result files (atomic: a reader never sees half a result)."""
    path = write_json(document, (directory or RESULTS) / f"{name}.json")
    sys.stderr.write(f"bench: wrote {path}\n")
    return path


def progress(message: str) -> None:
    sys.stderr.write(f"bench: {message}\n")
    sys.stderr.flush()
