"""stdout is the data channel: one JSON value per line there (`emit`), and each command's --json
that asks for it. Logs, warnings and progress go to stderr. Files a command writes follow one
rule (`check_output_file`, `--overwrite`), with one exception that makes "run the same command
again" work: a report this CLI wrote for the very same command (`invocation`, marked in the
report under WRITTEN_BY and COMMAND) is replaced without --overwrite."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Final

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


# The marker of a report this CLI wrote: who wrote it, and for which command.
WRITTEN_BY: Final = "writtenBy"
COMMAND: Final = "command"
WRITER: Final = "saga-index"
# Options that do not change what a command does: whether a file may be replaced, how much
# it logs.
_NOT_THE_COMMAND = frozenset({"overwrite", "log_level"})


def invocation(ctx: click.Context | None = None) -> dict[str, Any]:
    """The command being run, as a report records it: its path (`saga-index backfill`) and
    every option's value, global ones included (--table, --endpoint-url, ...), --overwrite
    and --log-level left out. Two runs with the same arguments in any order have the same
    invocation."""
    ctx = ctx or click.get_current_context()
    options: dict[str, Any] = {}
    path = ctx.command_path
    while ctx is not None:
        for name, value in ctx.params.items():
            if name not in _NOT_THE_COMMAND and name not in options:
                options[name] = str(value) if isinstance(value, Path | os.PathLike) else value
        ctx = ctx.parent
    return {"path": path, "options": to_plain_json(options)}


def report_marker(ctx: click.Context | None = None) -> dict[str, Any]:
    """The keys every report this CLI writes carries: WRITTEN_BY and COMMAND."""
    return {WRITTEN_BY: WRITER, COMMAND: invocation(ctx)}


def written_for_this_command(path: Path, ctx: click.Context | None = None) -> bool:
    """Is `path` a report this CLI wrote for the command now being run (the same path and
    options)? Anything else (another command's report, a file of the operator's) is not."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    if not isinstance(document, dict) or document.get(WRITTEN_BY) != WRITER:
        return False
    return bool(document.get(COMMAND) == json.loads(json.dumps(invocation(ctx))))


def check_output_file(
    path: Path, *, overwrite: bool, option: str, same_command_replaces: bool = False
) -> None:
    """Refuse (InvalidInputError, exit 2) a FILE that exists without --overwrite, or that
    cannot be written: a directory, a parent that is not an existing, writable directory.
    same_command_replaces: a FILE that is this CLI's report of the very same command is
    replaced without --overwrite (running the same command again writes its new report)."""
    path = path.expanduser()
    if path.is_dir():
        raise InvalidInputError(f"{option} {path} is a directory: name a file")
    if (
        path.exists()
        and not overwrite
        and not (same_command_replaces and written_for_this_command(path))
    ):
        whose = " and is not this command's own report" if same_command_replaces else ""
        raise InvalidInputError(
            f"{option} {path} already exists{whose}: refusing to overwrite it; pass "
            "--overwrite to replace it, or choose another FILE"
        )
    if path.exists() and not os.access(path, os.W_OK):
        raise InvalidInputError(f"{option} {path} is not writable")
    # A directory is never created: a mistyped one is refused here, not filled.
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise InvalidInputError(f"cannot write {option} {path}: {parent} is not a directory")
    if not os.access(parent, os.W_OK):
        raise InvalidInputError(f"cannot write {option} {path}: {parent} is not writable")
