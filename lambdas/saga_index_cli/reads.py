"""`saga-index shard` and `saga-index sagas ...`: the contract and the repository, from a shell."""

from __future__ import annotations

import logging
from typing import Any

import click

from saga_index.index import keys
from saga_index.store import ReadResult
from saga_index_cli.context import CliContext, pass_cli
from saga_index_cli.output import JSON, emit, format_options

log = logging.getLogger("saga_index.cli")


@click.command("shard")
@click.argument("person_ids", metavar="PERSON_ID...", nargs=-1, required=True)
@format_options(default=JSON)
@pass_cli
def shard_command(cli: CliContext, person_ids: tuple[str, ...], as_json: bool) -> None:
    """Print the shard and sharded GSI4PK of each PERSON_ID: one JSON object per line
    ({personId, shard, gsi4pk}), or with --output text one line each.

    N: --shards; else, with a table, the control record's N; else 16.
    """
    # Every PERSON_ID is checked before the record is read: bad input is exit 2 whatever the
    # state of the table or the network.
    persons = [keys.Person.of(person_id) for person_id in person_ids]
    shard_count = cli.shard_count_for_keys()
    for person_id, person in zip(person_ids, persons, strict=True):
        number = person.shard_hash % shard_count
        gsi4pk = keys.sharded_gsi4pk(number)
        if as_json:
            emit({"personId": person_id, "shard": number, "gsi4pk": gsi4pk})
        else:
            click.echo(f"{person_id}  shard {number} of {shard_count}  GSI4PK {gsi4pk}")


@click.group("sagas")
def sagas_group() -> None:
    """Read sagas through the repository, as the control record routes readers (or as a
    reader in --phase/--shards would read)."""


def saga_line(item: dict[str, Any]) -> str:
    """One saga row for people: its id, person, state, when it opened and its index key."""

    def shown(name: str) -> str:
        value = item.get(name)
        return "-" if value is None else str(value)

    return (
        f"{shown('sagaId')}  person {shown('personId')}  state {shown('state')}  "
        f"opened {shown('openedAt')}  {shown('GSI4PK')}"
    )


def _print(result: ReadResult, what: str, as_json: bool) -> None:
    for item in result.items:
        if as_json:
            emit(item)
        else:
            click.echo(saga_line(item))
    log.info(
        "%s: %d saga(s), %d request(s) over %d partition(s), %d anomaly(ies)",
        what,
        len(result.items),
        result.requests,
        len(result.partitions),
        result.anomalies,
    )


@sagas_group.command("by-person")
@click.argument("person_id")
@format_options(default=JSON)
@pass_cli
def by_person(cli: CliContext, person_id: str, as_json: bool) -> None:
    """Every saga of PERSON_ID: one JSON object per saga per line (the row as stored), or
    with --output text one line each."""
    keys.Person.of(person_id)  # checked before any read (exit 2)
    _print(cli.repository().get_sagas_by_person(person_id), f"by-person {person_id}", as_json)


@sagas_group.command("open")
@format_options(default=JSON)
@pass_cli
def all_open(cli: CliContext, as_json: bool) -> None:
    """Every open saga (fan-out over the partitions the routing reads): one JSON object per
    line, or with --output text one line each."""
    _print(cli.repository().get_all_open_sagas(), "open", as_json)


@sagas_group.command("all")
@format_options(default=JSON)
@pass_cli
def all_sagas(cli: CliContext, as_json: bool) -> None:
    """Every saga, open and terminal: one JSON object per line, or with --output text one
    line each."""
    _print(cli.repository().get_all_sagas(), "all", as_json)
