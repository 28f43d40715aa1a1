"""The repository's behaviour, as one suite run against every backend (moto and dynalite).

A subclass provides the `dynamo` fixture (a fresh table built from the synthesised template).
"""

from __future__ import annotations

from typing import Any

import pytest

from saga_index.index import keys
from saga_index.index.errors import (
    EnumerationError,
    InvalidInputError,
    SagaAlreadyExistsError,
    SagaConflictError,
)
from saga_index.index.layout import LEGACY, Layout
from saga_index.index.shard import shard
from saga_index.layout_change.record.phase import Phase
from saga_index.layout_change.record.provider import ControlProvider
from saga_index.layout_change.record.routing import Routing
from saga_index.layout_change.record.store import ControlStore
from saga_index.layout_change.record.timing import ControlTiming
from saga_index.store.dynamo.client import attach_throttle_observer
from saga_index.store.repository import SagaRepository
from saga_index.store.writer import SagaWriter
from tests.support.backends import Backend
from tests.support.control_seed import seed_state
from tests.support.faults import ThrottleInjector, queries_partition

N = 16
S16, S32 = Layout.sharded(16), Layout.sharded(32)
SPLIT = Routing.between(S16, S32)
ROUTINGS = {
    "legacy": Routing.between(LEGACY),
    "migrating": Routing.between(LEGACY, S16),
    "sharded": Routing.between(S16),
    "rolling-back": Routing.between(S16, LEGACY),
    "resharding-16-32": SPLIT,
    "resharding-32-16": Routing.between(S32, S16),
}


def repo(dynamo: Backend, phase: str, **kwargs: Any) -> SagaRepository:
    return SagaRepository(
        dynamo.client, dynamo.table_name, plan=Routing.for_phase(phase, N), **kwargs
    )


def routed(dynamo: Backend, routing: Routing, **kwargs: Any) -> SagaRepository:
    return SagaRepository(dynamo.client, dynamo.table_name, plan=routing, **kwargs)


class Ticks:
    """An injected monotonic clock: nothing sleeps for T."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class MovingRow:
    """Re-stamps one row from its N-layout key to its M-layout key right after the first Query
    (a concurrent re-shard), through a client of its own."""

    def __init__(self, dynamo: Backend, saga_id: str, person_id: str, n: int, m: int) -> None:
        self.moved = False
        self._mover = dynamo.new_client()
        self._table = dynamo.table_name
        self._saga_id = saga_id
        self._to = keys.shard_gsi4pk_for_person(person_id, m)
        dynamo.put_saga(saga_id, person_id, gsi4pk=keys.shard_gsi4pk_for_person(person_id, n))
        dynamo.client.meta.events.register("after-call.dynamodb.Query", self._move)

    def _move(self, http_response: Any, parsed: Any, model: Any, **kw: Any) -> None:
        if self.moved:
            return
        self.moved = True
        self._mover.update_item(
            TableName=self._table,
            Key={"PK": {"S": f"RSAGA#{self._saga_id}"}, "SK": {"S": "META"}},
            UpdateExpression="SET GSI4PK = :pk",
            ExpressionAttributeValues={":pk": {"S": self._to}},
        )


def moving_row(dynamo: Backend, saga_id: str, person_id: str, n: int, m: int) -> MovingRow:
    return MovingRow(dynamo, saga_id, person_id, n, m)


def ids(result: Any) -> list[str]:
    return [item["sagaId"] for item in result]


def seed_mixed(dynamo: Backend) -> None:
    """Six sagas over three persons, half still on the legacy key, plus a non-saga row."""
    dynamo.put_saga("s1", "p-1", gsi4pk=None, opened_at="2026-01-01T00:00:00.000Z")
    dynamo.put_saga("s2", "p-1", gsi4pk="shard", opened_at="2026-02-01T00:00:00.000Z")
    dynamo.put_saga("s3", "p-2", gsi4pk=None, state="SIGNED")
    dynamo.put_saga("s4", "p-2", gsi4pk="shard", state="PREPARE_FAILED")
    dynamo.put_saga("s5", "p-3", gsi4pk="shard", state="EXPIRED")
    dynamo.put_saga("s6", "p-3", gsi4pk=None, state="NEGOTIATING")
    dynamo.client.put_item(
        TableName=dynamo.table_name,
        Item={"PK": {"S": "PERSON#p-1"}, "SK": {"S": "PROFILE"}, "entityType": {"S": "Person"}},
    )


class RepositoryContract:
    # ---- by person ----------------------------------------------------------------------

    def test_sharded_by_person_is_one_query_on_the_persons_shard(self, dynamo: Backend) -> None:
        seed_mixed(dynamo)
        result = repo(dynamo, "sharded").get_sagas_by_person("p-1")
        assert ids(result) == ["s2"]
        assert result.requests == 1
        assert result.partitions == (f"RenewalSaga#{shard('p-1', N)}",)

    def test_migrating_by_person_reads_legacy_then_shard_in_two_queries(
        self, dynamo: Backend
    ) -> None:
        seed_mixed(dynamo)
        result = repo(dynamo, "migrating").get_sagas_by_person("p-1")
        assert ids(result) == ["s1", "s2"]
        assert result.requests == 2
        assert result.partitions == ("RenewalSaga", f"RenewalSaga#{shard('p-1', N)}")

    def test_legacy_by_person_reads_only_the_legacy_partition(self, dynamo: Backend) -> None:
        seed_mixed(dynamo)
        result = repo(dynamo, "legacy").get_sagas_by_person("p-1")
        assert ids(result) == ["s1"]
        assert result.requests == 1

    @pytest.mark.parametrize("phase", ["legacy", "migrating", "sharded"])
    def test_a_person_never_receives_the_sagas_of_a_person_whose_id_extends_theirs(
        self, dynamo: Backend, phase: str
    ) -> None:
        where = None if phase == "legacy" else "shard"
        dynamo.put_saga("a", "p-1", gsi4pk=where)
        dynamo.put_saga("b", "p-1#x", gsi4pk=where)
        dynamo.put_saga("c", "p-10", gsi4pk=where)
        r = repo(dynamo, phase)
        assert ids(r.get_sagas_by_person("p-1")) == ["a"]
        assert ids(r.get_sagas_by_person("p-1#x")) == ["b"]

    def test_by_person_reads_every_page(self, dynamo: Backend) -> None:
        for n in range(7):
            dynamo.put_saga(f"s{n}", "p-1", gsi4pk="shard", opened_at=f"2026-01-0{n + 1}T00:00:00Z")
        result = repo(dynamo, "sharded", page_size=2).get_sagas_by_person("p-1")
        assert len(result) == 7
        assert result.requests >= 4

    # ---- enumerations -------------------------------------------------------------------

    def test_sharded_enumeration_fans_out_over_every_shard(self, dynamo: Backend) -> None:
        seed_mixed(dynamo)
        result = repo(dynamo, "sharded").get_all_sagas()
        assert sorted(ids(result)) == ["s2", "s4", "s5"]
        assert result.partitions == tuple(keys.all_shard_gsi4pks(N))
        assert result.requests == N

    def test_migrating_enumeration_is_the_union_of_legacy_and_shards(self, dynamo: Backend) -> None:
        seed_mixed(dynamo)
        r = repo(dynamo, "migrating")
        assert sorted(ids(r.get_all_sagas())) == ["s1", "s2", "s3", "s4", "s5", "s6"]
        assert sorted(ids(r.get_all_open_sagas())) == ["s1", "s2", "s4", "s6"]
        assert r.get_all_sagas().partitions[0] == "RenewalSaga"

    def test_legacy_enumeration_is_one_partition(self, dynamo: Backend) -> None:
        seed_mixed(dynamo)
        result = repo(dynamo, "legacy").get_all_open_sagas()
        assert sorted(ids(result)) == ["s1", "s6"]
        assert result.requests == 1

    def test_enumeration_order_is_deterministic_by_sort_key(self, dynamo: Backend) -> None:
        for n, person in enumerate(["zed", "amy", "kim", "bob", "eve"]):
            dynamo.put_saga(f"s{n}", person, gsi4pk="shard" if n % 2 else None)
        r = repo(dynamo, "migrating")
        first, second = r.get_all_sagas(), r.get_all_sagas()
        assert first.items == second.items
        assert [i["personId"] for i in first] == ["amy", "bob", "eve", "kim", "zed"]

    def test_enumeration_reads_every_page_of_every_partition(self, dynamo: Backend) -> None:
        for n in range(30):
            dynamo.put_saga(f"s{n:02}", f"person-{n}", gsi4pk="shard" if n % 3 else None)
        paged = repo(dynamo, "migrating", page_size=1).get_all_sagas()
        unpaged = repo(dynamo, "migrating").get_all_sagas()
        assert paged.items == unpaged.items
        assert len(paged) == 30
        assert paged.requests > unpaged.requests

    def test_anomalous_rows_are_returned_as_stored_and_counted(self, dynamo: Backend) -> None:
        dynamo.put_saga("ok", "p-1")
        dynamo.put_saga("no-person", None, GSI4SK="#2026-01-01T00:00:00Z")
        dynamo.put_saga("numeric-person", 42)
        dynamo.put_saga("empty-person", "")
        result = repo(dynamo, "migrating").get_all_open_sagas()
        assert sorted(ids(result)) == ["empty-person", "no-person", "numeric-person", "ok"]
        assert result.anomalies == 3

    def test_a_row_restamped_between_the_two_reads_is_returned_exactly_once(
        self, dynamo: Backend
    ) -> None:
        # Given a legacy row that a concurrent backfill moves right after the legacy read
        dynamo.put_saga("moving", "p-7")
        dynamo.put_saga("other", "p-8", gsi4pk="shard")
        mover = dynamo.new_client()
        moved: list[str] = []

        def move_after_legacy_read(http_response: Any, parsed: Any, model: Any, **kw: Any) -> None:
            if moved or model.name != "Query":
                return
            moved.append("done")
            mover.update_item(
                TableName=dynamo.table_name,
                Key={"PK": {"S": "RSAGA#moving"}, "SK": {"S": "META"}},
                UpdateExpression="SET GSI4PK = :pk",
                ExpressionAttributeValues={":pk": {"S": keys.shard_gsi4pk_for_person("p-7", N)}},
            )

        dynamo.client.meta.events.register("after-call.dynamodb.Query", move_after_legacy_read)
        # When the migrating enumeration runs
        result = repo(dynamo, "migrating").get_all_sagas()
        # Then the row is present once, as its later (sharded) copy
        assert ids(result) == ["moving", "other"]
        assert result.items[0]["GSI4PK"] == keys.shard_gsi4pk_for_person("p-7", N)

    def test_a_row_restamped_between_by_person_reads_is_returned_once(
        self, dynamo: Backend
    ) -> None:
        dynamo.put_saga("moving", "p-7")
        mover = dynamo.new_client()

        def move(http_response: Any, parsed: Any, model: Any, **kw: Any) -> None:
            mover.update_item(
                TableName=dynamo.table_name,
                Key={"PK": {"S": "RSAGA#moving"}, "SK": {"S": "META"}},
                UpdateExpression="SET GSI4PK = :pk",
                ExpressionAttributeValues={":pk": {"S": keys.shard_gsi4pk_for_person("p-7", N)}},
            )

        dynamo.client.meta.events.register("after-call.dynamodb.Query", move)
        assert ids(repo(dynamo, "migrating").get_sagas_by_person("p-7")) == ["moving"]

    def test_rolling_back_reads_shards_first_and_keeps_a_row_moving_back_to_legacy(
        self, dynamo: Backend
    ) -> None:
        # Given a sharded row that a rollback moves to legacy right after the first shard read
        dynamo.put_saga("back", "p-5", gsi4pk="shard")
        mover = dynamo.new_client()

        def move_back(http_response: Any, parsed: Any, model: Any, **kw: Any) -> None:
            mover.update_item(
                TableName=dynamo.table_name,
                Key={"PK": {"S": "RSAGA#back"}, "SK": {"S": "META"}},
                UpdateExpression="SET GSI4PK = :pk",
                ExpressionAttributeValues={":pk": {"S": keys.LEGACY_GSI4PK}},
            )

        dynamo.client.meta.events.register("after-call.dynamodb.Query", move_back)
        result = repo(dynamo, "rolling-back").get_sagas_by_person("p-5")
        assert result.partitions == (keys.shard_gsi4pk_for_person("p-5", N), "RenewalSaga")
        assert ids(result) == ["back"]
        assert result.items[0]["GSI4PK"] == keys.LEGACY_GSI4PK
        everything = repo(dynamo, "rolling-back").get_all_sagas()
        assert everything.partitions[-1] == "RenewalSaga"
        assert ids(everything) == ["back"]

    # ---- throttles ----------------------------------------------------------------------

    def test_transient_throttles_are_retried_by_botocore(self, dynamo: Backend) -> None:
        seed_mixed(dynamo)
        counter = attach_throttle_observer(dynamo.client)
        reasons = [{"reason": "IndexReadKeyRangeThroughputExceeded", "resource": "idx"}]
        injector = ThrottleInjector(dynamo.client, "Query", times=2, reasons=reasons)
        result = repo(dynamo, "sharded").get_all_sagas()
        assert sorted(ids(result)) == ["s2", "s4", "s5"]
        assert injector.injected == 2
        assert counter.count == 2
        assert counter.reasons == {"IndexReadKeyRangeThroughputExceeded": 2}

    @pytest.mark.parametrize(
        "code", ["ThrottlingException", "ProvisionedThroughputExceededException"]
    )
    def test_a_shard_that_stays_throttled_fails_the_enumeration_naming_it(
        self, dynamo: Backend, code: str
    ) -> None:
        seed_mixed(dynamo)
        hot = keys.shard_gsi4pk_for_person("p-2", N)
        injector = ThrottleInjector(
            dynamo.client, "Query", times=None, match=queries_partition(hot), code=code
        )
        with pytest.raises(EnumerationError) as caught:
            repo(dynamo, "migrating").get_all_open_sagas()
        # The backend's client allows 3 attempts in all: botocore retried, then gave up.
        assert injector.injected == 3
        assert caught.value.partitions == [hot]
        assert hot in str(caught.value)
        assert code in str(caught.value)

    def test_a_throttled_legacy_partition_fails_the_enumeration(self, dynamo: Backend) -> None:
        seed_mixed(dynamo)
        ThrottleInjector(dynamo.client, "Query", times=None, match=queries_partition("RenewalSaga"))
        with pytest.raises(EnumerationError, match="RenewalSaga:"):
            repo(dynamo, "migrating").get_all_sagas()

    # ---- writer -------------------------------------------------------------------------

    @pytest.mark.parametrize(
        ("phase", "expected"),
        [
            ("legacy", "RenewalSaga"),
            ("migrating", "shard"),
            ("sharded", "shard"),
            ("rolling-back", "RenewalSaga"),
        ],
    )
    def test_create_stamps_the_key_of_the_phase(
        self, dynamo: Backend, phase: str, expected: str
    ) -> None:
        writer = SagaWriter(
            dynamo.client,
            dynamo.table_name,
            plan=Routing.for_phase(phase, N),
        )
        writer.create_saga(
            saga_id="new", person_id="p-9", lease_id="L-1", opened_at="2026-03-01T10:00:00.000Z"
        )
        stored = dynamo.get("RSAGA#new", "META")
        assert stored is not None
        want = keys.shard_gsi4pk_for_person("p-9", N) if expected == "shard" else expected
        assert stored["GSI4PK"] == {"S": want}
        assert stored["GSI4SK"] == {"S": "p-9#2026-03-01T10:00:00.000Z"}
        assert ids(repo(dynamo, Phase(phase)).get_sagas_by_person("p-9")) == ["new"]

    def test_create_never_overwrites(self, dynamo: Backend) -> None:
        writer = SagaWriter(
            dynamo.client,
            dynamo.table_name,
            plan=Routing.for_phase("sharded", N),
        )
        args = {
            "saga_id": "dup",
            "person_id": "p",
            "lease_id": "L",
            "opened_at": "2026-01-01T00:00:00Z",
        }
        writer.create_saga(**args)
        with pytest.raises(SagaAlreadyExistsError, match="dup"):
            writer.create_saga(**args)

    def test_transition_restamps_and_never_recreates_a_deleted_row(self, dynamo: Backend) -> None:
        dynamo.put_saga("t", "p-4", state="OPENED", note="kept")
        writer = SagaWriter(
            dynamo.client,
            dynamo.table_name,
            plan=Routing.for_phase("migrating", N),
        )
        row = writer.transition(
            saga_id="t",
            person_id="p-4",
            to_state="PREPARING",
            updated_at="2026-01-02T00:00:00Z",
            expected_state="OPENED",
        )
        assert row["state"] == "PREPARING"
        assert row["GSI4PK"] == keys.shard_gsi4pk_for_person("p-4", N)
        assert row["note"] == "kept"
        with pytest.raises(SagaConflictError):
            writer.transition(
                saga_id="t",
                person_id="p-4",
                to_state="OFFER_SENT",
                updated_at="2026-01-03T00:00:00Z",
                expected_state="OPENED",
            )
        dynamo.client.delete_item(
            TableName=dynamo.table_name, Key={"PK": {"S": "RSAGA#t"}, "SK": {"S": "META"}}
        )
        with pytest.raises(SagaConflictError):
            writer.transition(
                saga_id="t",
                person_id="p-4",
                to_state="OFFER_SENT",
                updated_at="2026-01-03T00:00:00Z",
            )
        assert dynamo.get("RSAGA#t", "META") is None

    # ---- following a routing (the control record's state) -------------------------------

    def test_resharding_by_person_reads_both_layouts_source_first(self, dynamo: Backend) -> None:
        # p-1 is shard 14 of 16 and 30 of 32: one row not yet moved, one already moved
        dynamo.put_saga("old", "p-1", gsi4pk=keys.shard_gsi4pk_for_person("p-1", 16))
        dynamo.put_saga("new", "p-1", gsi4pk=keys.shard_gsi4pk_for_person("p-1", 32))
        dynamo.put_saga("other", "p-2", gsi4pk=keys.shard_gsi4pk_for_person("p-2", 32))
        result = routed(dynamo, SPLIT).get_sagas_by_person("p-1")
        assert ids(result) == ["new", "old"]
        assert result.requests == 2
        assert result.partitions == ("RenewalSaga#14", "RenewalSaga#30")

    def test_resharding_by_person_is_one_request_when_both_layouts_agree(
        self, dynamo: Backend
    ) -> None:
        # alice is shard 9 of both 16 and 32
        dynamo.put_saga("a", "alice", gsi4pk="RenewalSaga#9")
        result = routed(dynamo, SPLIT).get_sagas_by_person("alice")
        assert (ids(result), result.requests, result.partitions) == (["a"], 1, ("RenewalSaga#9",))

    def test_resharding_enumeration_reads_stage_by_stage_complete_and_deduplicated(
        self, dynamo: Backend
    ) -> None:
        # Given rows on both layouts, and one that moves from 16 to 32 during the first stage
        for n in range(12):
            person = f"person-{n}"
            count = 16 if n % 2 else 32
            dynamo.put_saga(f"s{n:02}", person, gsi4pk=keys.shard_gsi4pk_for_person(person, count))
        mover = moving_row(dynamo, "moving", "p-1", 16, 32)
        # When the split's enumeration runs
        result = routed(dynamo, SPLIT).get_all_sagas()
        # Then it read keys 0..15 (a stage), then 16..31, every row once
        assert result.partitions == tuple(keys.all_shard_gsi4pks(32))
        assert result.requests == 32
        assert sorted(ids(result)) == sorted(["moving", *(f"s{n:02}" for n in range(12))])
        assert mover.moved
        moved = next(i for i in result.items if i["sagaId"] == "moving")
        assert moved["GSI4PK"] == keys.shard_gsi4pk_for_person("p-1", 32)

    def test_a_merge_reads_the_keys_rows_leave_before_the_keys_they_enter(
        self, dynamo: Backend
    ) -> None:
        merge = Routing.between(S32, S16)
        dynamo.put_saga("far", "p-1", gsi4pk=keys.shard_gsi4pk_for_person("p-1", 32))
        dynamo.put_saga("near", "p-2", gsi4pk=keys.shard_gsi4pk_for_person("p-2", 16))
        result = routed(dynamo, merge).get_all_sagas()
        assert result.partitions[:16] == tuple(keys.all_shard_gsi4pks(32))[16:]
        assert sorted(ids(result)) == ["far", "near"]

    @pytest.mark.parametrize("state", sorted(ROUTINGS))
    def test_every_state_finds_every_row_its_layouts_hold(
        self, dynamo: Backend, state: str
    ) -> None:
        routing = ROUTINGS[state]
        layouts = {routing.source, routing.target}
        for n, layout in enumerate(sorted(layouts, key=str)):
            dynamo.put_saga(f"s{n}", "p-1", gsi4pk=layout.key_for("p-1"))
        r = routed(dynamo, routing)
        assert len(r.get_sagas_by_person("p-1")) == len(layouts)
        assert len(r.get_all_sagas()) == len(layouts)
        assert r.get_sagas_by_person("p-1").requests == len(routing.read_keys("p-1"))

    def test_the_writer_stamps_the_routing_target(self, dynamo: Backend) -> None:
        writer = SagaWriter(dynamo.client, dynamo.table_name, plan=SPLIT)
        row = writer.create_saga(
            saga_id="w", person_id="p-1", lease_id="L", opened_at="2026-03-01T10:00:00.000Z"
        )
        assert row["GSI4PK"] == "RenewalSaga#30"
        assert ids(routed(dynamo, SPLIT).get_sagas_by_person("p-1")) == ["w"]

    def test_a_following_writer_stamps_the_new_key_within_t_of_a_record_change(
        self, dynamo: Backend
    ) -> None:
        # Given a writer following the record through a provider (T = 30 s, injected clock)
        seed_state(dynamo.client, dynamo.table_name, LEGACY, S16)
        ticks = Ticks()
        provider = ControlProvider(
            ControlStore(dynamo.client, dynamo.table_name), timing=ControlTiming(), clock=ticks
        )
        writer = SagaWriter(dynamo.client, dynamo.table_name, follow=provider.routing)
        assert writer.gsi4pk_for("p-1") == "RenewalSaga#14"
        # When the record moves on to rolling-back (writers stamp legacy)
        seed_state(dynamo.client, dynamo.table_name, S16, LEGACY, version=2)
        # Then within T the writer may still stamp the old key, and from T on it stamps the new
        ticks.now += 29.999
        stale = writer.create_saga(
            saga_id="a", person_id="p-1", lease_id="L", opened_at="2026-03-01T10:00:00.000Z"
        )
        ticks.now += 0.001
        fresh = writer.create_saga(
            saga_id="b", person_id="p-1", lease_id="L", opened_at="2026-03-01T10:00:01.000Z"
        )
        assert stale["GSI4PK"] == "RenewalSaga#14"
        assert fresh["GSI4PK"] == keys.LEGACY_GSI4PK

    def test_writer_takes_exactly_one_of_plan_and_follow(self, dynamo: Backend) -> None:
        with pytest.raises(InvalidInputError, match="exactly one"):
            SagaWriter(dynamo.client, dynamo.table_name)
        with pytest.raises(InvalidInputError, match="exactly one"):
            SagaWriter(dynamo.client, dynamo.table_name, plan=SPLIT, follow=lambda: SPLIT)
        assert repo(dynamo, "migrating").plan == Routing.between(LEGACY, S16)
