"""stdout is the data channel: one JSON value per line there (`emit`), and each command's --json
that asks for it. Logs, warnings and progress go to stderr. Files a command writes follow one
rule (`check_output_file`, `--overwrite`)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from saga_index.index import InvalidInputError
from saga_index.store.dynamo import to_plain_json

# Every command's --json: stdout then carries one JSON object, the same data as the human report.
json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON object on stdout instead."
)


def emit(obj: Any) -> None:
    """One JSON value per line on stdout: the data channel, nothing else goes there."""
    sys.stdout.write(json.dumps(to_plain_json(obj), ensure_ascii=False, sort_keys=True) + "\n")


# The one rule for every file a command writes (backfill --output, verify --snapshot): an
# existing FILE is never replaced without --overwrite, and the refusal (exit 2) comes before any
# call to any service, so a refused command has written nothing anywhere.
overwrite_option = click.option(
    "--overwrite",
    is_flag=True,
    help="Replace FILE if it exists (without it, an existing FILE is refused, exit 2, before "
    "any request).",
)


def check_output_file(path: Path, *, overwrite: bool, option: str) -> None:
    """Refuse (InvalidInputError, exit 2) a FILE that exists without --overwrite, or that
    cannot be written: a directory, a parent that is not an existing, writable directory."""
    path = path.expanduser()
    if path.is_dir():
        raise InvalidInputError(f"{option} {path} is a directory: name a file")
    if path.exists() and not overwrite:
        raise InvalidInputError(
            f"{option} {path} already exists: refusing to overwrite it; pass --overwrite to "
            "replace it, or choose another FILE"
        )
    if path.exists() and not os.access(path, os.W_OK):
        raise InvalidInputError(f"{option} {path} is not writable")
    # A directory is never created: a mistyped one is refused here, not filled.
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise InvalidInputError(f"cannot write {option} {path}: {parent} is not a directory")
    if not os.access(parent, os.W_OK):
        raise InvalidInputError(f"cannot write {option} {path}: {parent} is not writable")
