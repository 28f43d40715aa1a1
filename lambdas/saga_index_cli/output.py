"""stdout is the data channel: one JSON value per line there (`emit`) when a command's
`--output json` (or `--json`, its alias) asks for it, else the command's text for people.
Logs, warnings and progress go to stderr. Files a command writes follow one rule
(`check_output_file`, `--overwrite`), with one exception that makes "run the same command again"
work: a report this CLI wrote for the very same command (`invocation`, marked in the
report under WRITTEN_BY and COMMAND) is replaced without --overwrite."""

from __future__ import annotations

import functools
import json
import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import click

from saga_index.index import InvalidInputError
from saga_index.store.dynamo import to_plain_json

# The AWS CLI's convention: --output names the FORMAT of stdout, on every command.
TEXT, JSON = "text", "json"
FORMATS: Final = (TEXT, JSON)


class OutputFormat(click.Choice[str]):
    """`--output`'s type: a format, any case. A value that is not one (an old-style
    `--output report.json`) is refused (exit 2, before any request) with the option that takes
    a file, when the command has one, spelled so that following it literally works."""

    def __init__(self, file_option: str | None) -> None:
        super().__init__(FORMATS, case_sensitive=False)
        self.file_option = file_option

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter:
            hint = (
                f"; to write the report to a file, give `{self.file_option} {shlex.quote(value)}`"
                f" instead of `--output {shlex.quote(value)}`"
                if self.file_option
                else ""
            )
            self.fail(
                f"{value!r} is not an output format: --output takes the format of standard "
                f"output, {' or '.join(FORMATS)} (as in the AWS CLI){hint}",
                param,
                ctx,
            )


def _chosen_format(default: str, output_format: str | None, as_json: bool) -> str:
    if as_json and output_format not in (None, JSON):
        raise click.UsageError(
            f"--json is --output json: it contradicts --output {output_format}; give one of them"
        )
    return JSON if as_json else (output_format or default).lower()


def format_options(
    *, default: str = TEXT, file_option: str | None = None
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """`--output [text|json]` (default `default`) and `--json`, its alias for `--output json`,
    on a command whose function takes `as_json` (whether stdout carries JSON). `file_option`:
    the option of the command that writes a report to a file, named when `--output` is given
    a file name."""

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(command)
        def run(*args: Any, output_format: str | None, as_json: bool, **kwargs: Any) -> Any:
            chosen = _chosen_format(default, output_format, as_json)
            return command(*args, as_json=chosen == JSON, **kwargs)

        run = click.option("--json", "as_json", is_flag=True, help="Alias of --output json.")(run)
        return click.option(
            "--output",
            "output_format",
            type=OutputFormat(file_option),
            default=None,
            help=f"The format of standard output: {TEXT} (for people) or {JSON} (one JSON "
            f"object; a list prints one per line). Default: {default}.",
        )(run)

    return decorate


# The options of a command whose text form is for people and JSON form for scripts.
json_option = format_options()


def emit(obj: Any) -> None:
    """One JSON value per line on stdout: the data channel, nothing else goes there."""
    sys.stdout.write(json.dumps(to_plain_json(obj), ensure_ascii=False, sort_keys=True) + "\n")


# The one rule for every file a command writes (backfill --report-file, verify --snapshot): an
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
# it logs, the format of standard output (the report written to a file is the same).
_NOT_THE_COMMAND = frozenset({"overwrite", "log_level", "output_format", "as_json"})


def _camel(name: str) -> str:
    """A parameter's name as every JSON key this CLI writes spells it: max_writes_per_second
    -> maxWritesPerSecond."""
    first, *rest = name.split("_")
    return first + "".join(word.capitalize() for word in rest)


def invocation(ctx: click.Context | None = None) -> dict[str, Any]:
    """The command being run, as a report records it: its path (`saga-index backfill`) and
    every option's value under its name in camelCase, global ones included (--table,
    --endpoint-url, ...), --overwrite, --log-level and the output format (--output, --json)
    left out. Two runs with the same arguments in any order have the same invocation."""
    ctx = ctx or click.get_current_context()
    options: dict[str, Any] = {}
    path = ctx.command_path
    while ctx is not None:
        for name, value in ctx.params.items():
            key = _camel(name)
            if name not in _NOT_THE_COMMAND and key not in options:
                options[key] = str(value) if isinstance(value, Path | os.PathLike) else value
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
