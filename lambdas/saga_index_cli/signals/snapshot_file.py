"""`verify`'s snapshot file: read and checked before any read; written whole or not at all, and
never over an existing file (it may be the pre-migration baseline) unless --overwrite."""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path

from saga_index.index import InvalidInputError, SagaIndexError, names
from saga_index.layout_change.checks.parity import Snapshot
from saga_index_cli.output import check_output_file

log = logging.getLogger("saga_index.cli")


def load_snapshot(path: Path, table_name: str) -> Snapshot:
    """The snapshot at `path`, refused (exit 2) before any read unless it parses and was taken
    of this table and index."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise InvalidInputError(f"cannot read snapshot {path}: {err.strerror or err}") from None
    except UnicodeDecodeError as err:
        raise InvalidInputError(f"snapshot {path} is not UTF-8 text: {err}") from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as err:
        raise InvalidInputError(f"snapshot {path} is not valid JSON: {err}") from None
    try:
        return Snapshot.from_document(document).require_taken_of(table_name, names.INDEX_NAME)
    except InvalidInputError as err:
        raise InvalidInputError(f"snapshot {path}: {err}") from None


def check_writable(path: Path, *, overwrite: bool = False) -> None:
    """Fail before any read: never replace a snapshot (it may be the pre-migration baseline)
    unless --overwrite says so (the rule of every file a command writes: output.py)."""
    check_output_file(path, overwrite=overwrite, option="--snapshot")


def write_snapshot(path: Path, snapshot: Snapshot, *, overwrite: bool = False) -> None:
    """Written whole or not at all: a temporary file in the same directory, linked into place
    (link fails instead of replacing a file that appeared meanwhile), or with --overwrite
    renamed over it."""
    path = path.expanduser()
    parent = path.parent if str(path.parent) else Path(".")
    data = json.dumps(snapshot.to_document(), indent=2, sort_keys=True, ensure_ascii=False)
    try:
        handle = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed below, before the link
            "w", encoding="utf-8", dir=parent, prefix=f".{path.name}.", suffix=".tmp", delete=False
        )
    except OSError as err:
        raise SagaIndexError(f"cannot write snapshot {path}: {err}") from None
    try:
        with handle:
            handle.write(data + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        if overwrite:
            os.replace(handle.name, path)
        else:
            os.link(handle.name, path)
    except FileExistsError:
        raise InvalidInputError(
            f"snapshot {path} appeared while verifying: refusing to overwrite it"
        ) from None
    except OSError as err:
        raise SagaIndexError(f"cannot write snapshot {path}: {err}; nothing was written") from None
    finally:
        Path(handle.name).unlink(missing_ok=True)
    log.info("snapshot written to %s", path)
