"""`saga-index shard` and `saga-index sagas ...`: the contract and the repository, from a shell."""

from __future__ import annotations

import logging

import click

from saga_index.index import keys
from saga_index.store import ReadResult
from saga_index_cli.context import CliContext, pass_cli
from saga_index_cli.output import emit

log = logging.getLogger("saga_index.cli")


@click.command("shard")
@click.argument("person_ids", metavar="PERSON_ID...", nargs=-1, required=True)
@pass_cli
def shard_command(cli: CliContext, person_ids: tuple[str, ...]) -> None:
    """Print the shard and sharded GSI4PK of each PERSON_ID (one JSON object per line).

    N: --shards; else, with a table, the control record's N; else 16.
    """
    # Every PERSON_ID is checked before the record is read: bad input is exit 2 whatever the
    # state of the table or the network.
    persons = [keys.Person.of(person_id) for person_id in person_ids]
    shard_count = cli.shard_count_for_keys()
    for person_id, person in zip(person_ids, persons, strict=True):
        number = person.shard_hash % shard_count
        emit({"personId": person_id, "shard": number, "gsi4pk": keys.sharded_gsi4pk(number)})


@click.group("sagas")
def sagas_group() -> None:
    """Read sagas through the repository, as the control record routes readers (or as a
    reader in --phase/--shards would read)."""


def _print(result: ReadResult, what: str) -> None:
    for item in result.items:
        emit(item)
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
@pass_cli
def by_person(cli: CliContext, person_id: str) -> None:
    """Every saga of PERSON_ID."""
    keys.Person.of(person_id)  # checked before any read (exit 2)
    _print(cli.repository().get_sagas_by_person(person_id), f"by-person {person_id}")


@sagas_group.command("open")
@pass_cli
def all_open(cli: CliContext) -> None:
    """Every open saga (fan-out over the partitions the routing reads)."""
    _print(cli.repository().get_all_open_sagas(), "open")


@sagas_group.command("all")
@pass_cli
def all_sagas(cli: CliContext) -> None:
    """Every saga, open and terminal."""
    _print(cli.repository().get_all_sagas(), "all")
