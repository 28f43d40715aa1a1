"""The option types and callbacks several commands share: the table's name, a shard count, a
finite float range, the completion checks' scan options, an argument naming a state. Each
refuses a bad value before any request (exit 2)."""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Callable
from typing import Any, TypeVar

import click

from saga_index.index import InvalidInputError, validate_shard_count
from saga_index.layout_change.transitions import CompletionCheckOptions

_Command = TypeVar("_Command", bound=Callable[..., Any])
_State = TypeVar("_State", bound=enum.Enum)

# DynamoDB's rule for a table name (CreateTable): 3-255 characters of these.
_TABLE_NAME = re.compile(r"[A-Za-z0-9_.-]{3,255}")


def validate_table_name(name: str) -> str:
    """`name` when DynamoDB would accept it as a table name; InvalidInputError naming it if not."""
    if _TABLE_NAME.fullmatch(name):
        return name
    shown = repr(name) if len(name) <= 64 else f"{name[:32]!r}... ({len(name)} characters)"
    raise InvalidInputError(
        f"table name {shown} is not one DynamoDB accepts: 3-255 characters of A-Z a-z 0-9 _ . -"
    )


def table_name_option(_: click.Context, __: click.Parameter, value: str | None) -> str | None:
    """click callback of --table: a name DynamoDB accepts, or absent (empty: absent too)."""
    if not value:
        return value
    try:
        return validate_table_name(value)
    except InvalidInputError as err:
        raise click.BadParameter(str(err)) from None


def shards_option(_: click.Context, __: click.Parameter, value: int | None) -> int | None:
    """click callback of every --shards: a power of two 1..1024, or absent."""
    if value is None:
        return None
    try:
        return validate_shard_count(value)
    except InvalidInputError as err:
        raise click.BadParameter(str(err)) from None


def enum_argument(
    name: str, kind: type[_State], parse: Callable[[object], _State]
) -> Callable[[_Command], _Command]:
    """A positional argument naming one of `kind`'s values (any case), handed to the command
    as the member `parse` (the domain's own parser, e.g. Phase.parse) gives; a value it refuses
    is a usage error with the domain's message (exit 2)."""

    def parsed(_: click.Context, __: click.Parameter, value: str) -> _State:
        try:
            return parse(value)
        except InvalidInputError as err:
            raise click.BadParameter(str(err)) from None

    return click.argument(
        name,
        type=click.Choice([member.value for member in kind], case_sensitive=False),
        callback=parsed,
    )


class FiniteFloatRange(click.FloatRange):
    """click.FloatRange that also refuses nan (which compares false with both bounds)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        converted = super().convert(value, param, ctx)
        if isinstance(converted, float) and math.isnan(converted):
            self.fail(
                f"{value!r} is not a number in the range {self._describe_range()}.", param, ctx
            )
        return converted


def completion_check_options(checks: str) -> Callable[[_Command], _Command]:
    """The scan options of a completing move's checks (`phase set`, `open-index set`): one
    spelling, range and default each, from CompletionCheckOptions; `checks` names them in the
    help ("Parity check", "Checks")."""

    def decorate(command: _Command) -> _Command:
        for option in reversed(
            (
                click.option(
                    "--recheck-delay",
                    type=click.FloatRange(0, 300),
                    default=CompletionCheckOptions.recheck_delay_seconds,
                    show_default=True,
                    help=f"{checks}: seconds before rows that differ are read again once "
                    "(GSI propagation).",
                ),
                click.option(
                    "--scan-rate",
                    type=click.FloatRange(min=1, max=40_000),
                    default=CompletionCheckOptions.scan_rate,
                    show_default=True,
                    help=f"{checks}: read units per second their base-table scan may use.",
                ),
                click.option(
                    "--segments",
                    type=click.IntRange(1, 64),
                    default=CompletionCheckOptions.segments,
                    show_default=True,
                    help="Scan segments.",
                ),
            )
        ):
            command = option(command)
        return command

    return decorate
