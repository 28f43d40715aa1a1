"""Reads during a half-finished re-shard, on moto: rows on both layouts, and prefix pairs (a
person `p` and persons `p#x` whose GSI4SK values begin with `p#`) spread across the keys of both.

A by-person read queries begins_with(GSI4SK, personId + "#") on the source key, then the target
key. A person p#x whose row sits on one of those keys in EITHER layout matches the prefix: the
read must still return only p's rows, on both keys, de-duplicated, and an enumeration every row
once.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws

from saga_index.index.layout import Layout
from saga_index.index.shard import shard
from saga_index.layout_change.record.routing import Routing
from saga_index.store.repository import SagaRepository
from tests.support.backends import Backend, make_backend

S16, S32 = Layout.sharded(16), Layout.sharded(32)
MOVES = {"split 16->32": Routing.between(S16, S32), "merge 32->16": Routing.between(S32, S16)}
PERSON = "p-1"  # shard 14 of 16, 30 of 32: its two keys differ in both moves


def prefix_pairs() -> list[str]:
    """Persons `p-1#x...` that share a key with p-1 in some layout, covering each way: on p-1's
    key of 16, on its key of 32, and one on neither (found by search: the hash decides)."""
    wanted = {
        "same key of 16": lambda q: shard(q, 16) == shard(PERSON, 16),
        "same key of 32": lambda q: shard(q, 32) == shard(PERSON, 32),
        "lower half, other key": lambda q: shard(q, 32) == shard(PERSON, 16),
        "no shared key": lambda q: shard(q, 16) != shard(PERSON, 16),
    }
    found: dict[str, str] = {}
    for n in range(10_000):
        candidate = f"{PERSON}#x{n}"
        for name, test in wanted.items():
            if name not in found and test(candidate):
                found[name] = candidate
        if len(found) == len(wanted):
            return sorted(set(found.values()))
    raise AssertionError(f"no prefix pair found for {sorted(set(wanted) - set(found))}")


@pytest.fixture
def dynamo(synthesized_template: dict[str, Any]) -> Iterator[Backend]:
    with mock_aws():
        yield make_backend("reshard-reads", synthesized_template, endpoint_url=None)


def half_moved(dynamo: Backend, persons: list[str]) -> dict[str, set[str]]:
    """Two sagas per person, one on its key of 16 (not yet moved) and one on its key of 32
    (moved, or written by a writer that stamps the target). The sagas of each person."""
    owned: dict[str, set[str]] = {}
    for number, person in enumerate(persons):
        for n in (16, 32):
            saga_id = f"s{number:02}-{n}"
            dynamo.put_saga(saga_id, person, gsi4pk="shard", shard_count=n)
            owned.setdefault(person, set()).add(saga_id)
    return owned


def ids(result: Any) -> list[str]:
    return sorted(item["sagaId"] for item in result)


@pytest.mark.parametrize("move", sorted(MOVES))
def test_a_by_person_read_mid_move_returns_only_that_persons_rows_from_both_layouts(
    dynamo: Backend, move: str
) -> None:
    persons = [PERSON, *prefix_pairs()]
    owned = half_moved(dynamo, persons)
    routing = MOVES[move]
    repo = SagaRepository(dynamo.client, dynamo.table_name, plan=routing)
    for person in persons:
        result = repo.get_sagas_by_person(person)
        assert ids(result) == sorted(owned[person]), person
        keys_read = routing.read_keys(person)
        assert result.requests == len(keys_read)
        assert result.partitions == keys_read
        assert routing.source.key_for(person) == keys_read[0]  # source first


@pytest.mark.parametrize("move", sorted(MOVES))
def test_an_enumeration_mid_move_returns_every_row_of_both_layouts_once(
    dynamo: Backend, move: str
) -> None:
    persons = [PERSON, *prefix_pairs()]
    owned = half_moved(dynamo, persons)
    result = SagaRepository(dynamo.client, dynamo.table_name, plan=MOVES[move]).get_all_sagas()
    every = sorted(s for sagas in owned.values() for s in sagas)
    assert ids(result) == every
    assert result.requests == 32  # each distinct key of the two layouts once


def test_a_person_whose_keys_agree_in_both_layouts_costs_one_request_mid_move(
    dynamo: Backend,
) -> None:
    # alice is shard 9 of both 16 and 32; alice#x... shares that key
    pair = next(f"alice#x{n}" for n in range(10_000) if shard(f"alice#x{n}", 32) == 9)
    dynamo.put_saga("a", "alice", gsi4pk="shard", shard_count=32)
    dynamo.put_saga("b", pair, gsi4pk="shard", shard_count=16)
    dynamo.put_saga("c", pair, gsi4pk="shard", shard_count=32)
    for routing in MOVES.values():
        repo = SagaRepository(dynamo.client, dynamo.table_name, plan=routing)
        alice = repo.get_sagas_by_person("alice")
        assert (ids(alice), alice.requests) == (["a"], 1)
