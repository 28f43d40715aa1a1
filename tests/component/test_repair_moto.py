"""The anomaly repair (store.repair) against moto: what it writes, and when it refuses."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws

from saga_index.index import Layout, keys, names
from saga_index.index.errors import InvalidInputError, InvalidKeyError, InvalidPersonIdError
from saga_index.layout_change.backfill import BackfillRequest
from saga_index.layout_change.backfill.local import backfill_locally
from saga_index.layout_change.record.open_index import OpenIndex
from saga_index.layout_change.record.routing import Routing, routing_for
from saga_index.layout_change.record.state import BackfillDirection as Direction
from saga_index.layout_change.record.store import ControlStore
from saga_index.store.dynamo.codec import deserialize, serialize
from saga_index.store.plan import KeyPlan
from saga_index.store.repair import (
    PersonSource,
    RepairError,
    RepairResult,
    RepairStatus,
    repair_anomaly,
    tenancy_key,
)
from saga_index_cli.main import main
from tests.support.backends import Backend, make_backend
from tests.support.backfill_contract import Clock, plant

N = 16
OPENED_AT = "2026-01-01T00:00:00.000Z"


@pytest.fixture
def dynamo(synthesized_template: dict[str, Any]) -> Iterator[Backend]:
    with mock_aws():
        yield make_backend("repair", synthesized_template, endpoint_url=None)


def put_lease(dynamo: Backend, saga_id: str, tenant: Any) -> None:
    item: dict[str, Any] = {**tenancy_key(f"lease-{saga_id}"), "entityType": "Lease"}
    if tenant is not None:
        item["personId"] = tenant
    dynamo.client.put_item(TableName=dynamo.table_name, Item=serialize(item))


def row(dynamo: Backend, saga_id: str) -> dict[str, Any] | None:
    raw = dynamo.get(f"RSAGA#{saga_id}", "META")
    return None if raw is None else deserialize(raw)


def key(saga_id: str) -> dict[str, str]:
    return keys.saga_table_key(saga_id)


# The write rule of a table never migrated: every person's rows on the legacy key.
LEGACY_PLAN = Routing.for_phase("legacy", N)


def repair(
    dynamo: Backend, table_key: dict[str, str], *, plan: KeyPlan = LEGACY_PLAN, **kw: Any
) -> RepairResult:
    return repair_anomaly(dynamo.client, dynamo.table_name, table_key, plan=plan, **kw)


def test_given_a_row_without_person_when_repaired_by_default_then_it_is_a_dry_run(
    dynamo: Backend,
) -> None:
    # Given a saga row without personId whose lease names its tenant
    dynamo.put_saga("no-person", None, GSI4SK=f"#{OPENED_AT}")
    put_lease(dynamo, "no-person", "p-7")
    before = dynamo.scan_all()

    # When it is repaired without saying to write
    result = repair(dynamo, key("no-person"))

    # Then it says what it would write, and writes nothing
    assert result.status is RepairStatus.WOULD_REPAIR
    assert result.status.done
    assert result.dry_run is True
    assert result.person_source is PersonSource.TENANCY
    assert result.write == {
        "personId": "p-7",
        "GSI4SK": keys.gsi4sk("p-7", OPENED_AT),
        "GSI4PK": keys.LEGACY_GSI4PK,
    }
    assert result.anomaly is not None
    assert dynamo.scan_all() == before


def test_given_a_row_without_person_when_repaired_from_its_lease_then_person_and_sort_key_are_set(
    dynamo: Backend,
) -> None:
    # Given a saga row without personId on the legacy key, with other attributes
    dynamo.put_saga("no-person", None, GSI4SK=f"#{OPENED_AT}", note="kept")
    put_lease(dynamo, "no-person", "p-7")

    # When it is repaired for real, the person taken from its lease
    result = repair(dynamo, key("no-person"), dry_run=False)

    # Then personId AND GSI4SK are rebuilt, it is no anomaly any more, and nothing else changed
    assert result.status is RepairStatus.REPAIRED
    assert result.person_id == "p-7"
    repaired = row(dynamo, "no-person")
    assert repaired is not None
    assert repaired["personId"] == "p-7"
    assert repaired["GSI4SK"] == keys.gsi4sk("p-7", OPENED_AT)
    assert keys.person_anomaly(repaired) is None
    assert repaired["GSI4PK"] == keys.LEGACY_GSI4PK  # the legacy write rule's key
    assert repaired["note"] == "kept"


@pytest.mark.parametrize(
    ("saga_id", "person", "sort_key"),
    [
        ("foreign-sort-key", "p-a", f"p-b#{OPENED_AT}"),
        ("numeric-person", 42, None),
        ("empty-person", "", None),
    ],
)
def test_given_an_anomaly_when_repaired_with_a_given_person_then_the_sort_key_follows_it(
    dynamo: Backend, saga_id: str, person: Any, sort_key: str | None
) -> None:
    extra: dict[str, Any] = {"GSI4SK": sort_key} if sort_key else {}
    dynamo.put_saga(saga_id, person, **extra)
    assert keys.person_anomaly(row(dynamo, saga_id) or {}) is not None

    result = repair(dynamo, key(saga_id), person_id="p-a", dry_run=False)

    assert (result.status, result.person_source) == (RepairStatus.REPAIRED, PersonSource.GIVEN)
    repaired = row(dynamo, saga_id)
    assert repaired is not None
    assert (repaired["personId"], repaired["GSI4SK"]) == ("p-a", keys.gsi4sk("p-a", OPENED_AT))


def test_given_a_repaired_row_in_migrating_then_it_is_on_its_shard_at_once(
    dynamo: Backend,
) -> None:
    # Given an anomaly the backfill left on the legacy key
    plant(dynamo, "migrating")
    clock = Clock()
    dynamo.put_saga("no-person", None, GSI4SK=f"#{OPENED_AT}")
    put_lease(dynamo, "no-person", "p-7")
    request = BackfillRequest(
        direction=Direction.FORWARD, max_writes_per_second=1000.0, dry_run=False
    )
    first = backfill_locally(dynamo.client, dynamo.table_name, request, holder="test", clock=clock)
    assert [{"PK": a["PK"], "SK": a["SK"]} for a in first.summary.anomaly_keys] == [
        key("no-person")
    ]
    assert first.summary.anomaly_keys[0]["reason"].startswith("personId must be a string")

    # When it is repaired from the key the backfill reported, by the record's write rule
    plan = routing_for(ControlStore(dynamo.client, dynamo.table_name).read())
    for anomaly in first.summary.anomaly_keys:
        repaired = repair(dynamo, anomaly, plan=plan, dry_run=False)
        assert repaired.write is not None
        assert repaired.write["GSI4PK"] == keys.shard_gsi4pk_for_person("p-7", N)
    second = backfill_locally(dynamo.client, dynamo.table_name, request, holder="test", clock=clock)

    # Then it is on its shard already: the next run has nothing to move and nothing is left
    assert (second.summary.restamped, second.summary.anomalies) == (0, 0)
    assert second.summary.verification is not None
    assert second.summary.verification.remaining == 0
    assert (row(dynamo, "no-person") or {})["GSI4PK"] == keys.shard_gsi4pk_for_person("p-7", N)


def test_given_a_healthy_row_then_there_is_nothing_to_repair_and_it_is_never_given_away(
    dynamo: Backend,
) -> None:
    dynamo.put_saga("healthy", "p-1")
    before = dynamo.scan_all()

    same = repair(dynamo, key("healthy"), person_id="p-1", dry_run=False)
    other = repair(dynamo, key("healthy"), person_id="p-2", dry_run=False)
    from_lease = repair(dynamo, key("healthy"), dry_run=False)

    assert same.status is RepairStatus.NOTHING_TO_REPAIR
    assert same.status.done
    assert other.status is RepairStatus.BELONGS_TO_ANOTHER_PERSON
    assert not other.status.done
    assert "'p-1'" in other.message
    assert from_lease.status is RepairStatus.NOTHING_TO_REPAIR  # no lease needed to say so
    assert dynamo.scan_all() == before


def test_given_no_row_at_the_key_then_not_found_and_nothing_is_created(dynamo: Backend) -> None:
    result = repair(dynamo, key("gone"), person_id="p-1", dry_run=False)

    assert result.status is RepairStatus.NOT_FOUND
    assert not result.status.done
    assert dynamo.scan_all() == []


@pytest.mark.parametrize("change", ["person", "sort-key", "opened-at", "delete"])
def test_given_the_row_changes_between_read_and_write_then_the_other_writer_wins(
    dynamo: Backend, change: str
) -> None:
    # Given an anomaly, and another writer that changes (or deletes) it just before our write
    dynamo.put_saga("no-person", None, GSI4SK=f"#{OPENED_AT}")
    other = dynamo.new_client()
    table_key = {"PK": {"S": "RSAGA#no-person"}, "SK": {"S": "META"}}
    updates = {
        "person": ("SET personId = :v", "p-9"),
        "sort-key": ("SET GSI4SK = :v", f"p-9#{OPENED_AT}"),
        "opened-at": ("SET openedAt = :v", "2026-02-02T00:00:00.000Z"),
    }

    def concurrent_writer(**_: Any) -> None:
        if change == "delete":
            other.delete_item(TableName=dynamo.table_name, Key=table_key)
            return
        expression, value = updates[change]
        other.update_item(
            TableName=dynamo.table_name,
            Key=table_key,
            UpdateExpression=expression,
            ExpressionAttributeValues={":v": {"S": value}},
        )

    dynamo.client.meta.events.register("before-call.dynamodb.UpdateItem", concurrent_writer)
    try:
        # When the repair writes
        result = repair(dynamo, key("no-person"), person_id="p-1", dry_run=False)
    finally:
        dynamo.client.meta.events.unregister("before-call.dynamodb.UpdateItem", concurrent_writer)

    # Then its condition fails: the other writer's change stands, a deleted row stays deleted
    assert result.status is RepairStatus.CHANGED
    assert "run the same command again" in result.message
    after = row(dynamo, "no-person")
    if change == "delete":
        assert after is None
    else:
        assert after is not None
        assert after.get("personId") != "p-1"
        assert not str(after.get("GSI4SK", "")).startswith("p-1#")


@pytest.mark.parametrize(
    ("lease", "expected"),
    [(None, "which is gone"), ("no-tenant", "names no usable tenant")],
)
def test_given_no_usable_lease_tenant_then_the_repair_refuses_and_asks_for_the_person(
    dynamo: Backend, lease: str | None, expected: str
) -> None:
    dynamo.put_saga("no-person", None, GSI4SK=f"#{OPENED_AT}")
    if lease == "no-tenant":
        put_lease(dynamo, "no-person", None)
    before = dynamo.scan_all()

    with pytest.raises(RepairError, match=expected) as refused:
        repair(dynamo, key("no-person"), dry_run=False)

    assert "--person-id" in str(refused.value)
    assert dynamo.scan_all() == before


def test_given_a_row_without_opened_at_then_its_sort_key_cannot_be_rebuilt(
    dynamo: Backend,
) -> None:
    dynamo.put_saga("no-opened-at", None, GSI4SK="#x", openedAt=None)

    with pytest.raises(RepairError, match="openedAt"):
        repair(dynamo, key("no-opened-at"), person_id="p-1", dry_run=False)


def test_given_bad_input_then_it_is_refused_before_anything_is_read(dynamo: Backend) -> None:
    with pytest.raises(InvalidKeyError):
        repair(dynamo, {"PK": "LEASE#l-1", "SK": "META"})
    with pytest.raises(InvalidPersonIdError):
        repair(dynamo, key("s-1"), person_id="")


def test_given_a_row_at_a_saga_key_that_is_not_a_saga_then_it_is_refused(
    dynamo: Backend,
) -> None:
    dynamo.client.put_item(
        TableName=dynamo.table_name,
        Item={"PK": {"S": "RSAGA#odd"}, "SK": {"S": "META"}, "entityType": {"S": "Other"}},
    )

    with pytest.raises(InvalidInputError, match="not a saga row"):
        repair(dynamo, key("odd"), person_id="p-1")


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[Any]]:
    with pytest.raises(SystemExit) as exited:
        main([*argv])
    out = capsys.readouterr().out
    lines = [json.loads(line) for line in out.splitlines() if line.strip()]
    return int(exited.value.code or 0), lines


def test_given_an_anomaly_on_a_wrong_shard_in_sharded_when_repaired_then_by_person_finds_it(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the record in sharded(16), and an anomaly stamped on #8 (no personId) whose lease
    # names a person who belongs on #3
    plant(dynamo, "sharded")
    wrong = keys.sharded_gsi4pk(8)
    person = next(
        f"p-{n}"
        for n in range(1000)
        if keys.shard_gsi4pk_for_person(f"p-{n}", N) == keys.sharded_gsi4pk(3)
    )
    dynamo.put_saga("stray", None, gsi4pk=wrong, GSI4SK=f"#{OPENED_AT}")
    put_lease(dynamo, "stray", person)
    table = ["--table", dynamo.table_name]
    assert _cli(capsys, *table, "sagas", "by-person", person) == (0, [])

    # When `repair-anomaly --apply` repairs it from its lease
    code, lines = _cli(
        capsys, *table, "repair-anomaly", "--saga-id", "stray", "--from-lease", "--apply"
    )

    # Then it stamps the state's write key, and `sagas by-person` finds the saga at once
    assert code == 0
    assert lines[0]["write"]["GSI4PK"] == keys.sharded_gsi4pk(3)
    code, lines = _cli(capsys, *table, "sagas", "by-person", person)
    assert (code, [line["sagaId"] for line in lines]) == (0, ["stray"])


def test_given_a_stale_partition_key_when_repairing_then_a_writer_that_re_stamped_it_wins(
    dynamo: Backend,
) -> None:
    # Given an anomaly on the legacy key, re-stamped by another writer just before our write
    dynamo.put_saga("no-person", None, GSI4SK=f"#{OPENED_AT}")
    other = dynamo.new_client()

    def concurrent_restamp(**_: Any) -> None:
        other.update_item(
            TableName=dynamo.table_name,
            Key={"PK": {"S": "RSAGA#no-person"}, "SK": {"S": "META"}},
            UpdateExpression="SET GSI4PK = :v",
            ExpressionAttributeValues={":v": {"S": keys.sharded_gsi4pk(2)}},
        )

    dynamo.client.meta.events.register("before-call.dynamodb.UpdateItem", concurrent_restamp)
    try:
        result = repair(dynamo, key("no-person"), person_id="p-1", dry_run=False)
    finally:
        dynamo.client.meta.events.unregister("before-call.dynamodb.UpdateItem", concurrent_restamp)

    # Then the repair's condition on GSI4PK fails and the other writer's key stands
    assert result.status is RepairStatus.CHANGED
    assert (row(dynamo, "no-person") or {})["GSI4PK"] == keys.sharded_gsi4pk(2)


# ---- the open-saga index's key: the drift guard's OpenIndexMissingRows / OpenIndexStrayRows ---

OPEN = OpenIndex.of("open", N)
OPEN_PLAN = Routing.between(Layout.sharded(N), open_writes=OPEN, open_reads=OPEN)
OPEN_KEY = names.OPEN_INDEX_PARTITION_KEY


def test_given_an_open_saga_left_unstamped_then_only_its_open_key_is_set(dynamo: Backend) -> None:
    dynamo.put_saga("unstamped", "p-1", gsi4pk="shard")
    before = row(dynamo, "unstamped")

    dry = repair(dynamo, key("unstamped"), plan=OPEN_PLAN, person_id="p-1")
    assert dry.status is RepairStatus.WOULD_REPAIR
    assert row(dynamo, "unstamped") == before
    result = repair(dynamo, key("unstamped"), plan=OPEN_PLAN, person_id="p-1", dry_run=False)

    assert result.status is RepairStatus.REPAIRED
    assert result.anomaly is None
    stamp = OPEN.key_for("p-1")
    assert result.write == {OPEN_KEY: stamp}
    assert row(dynamo, "unstamped") == {**before, OPEN_KEY: stamp}  # nothing else changed
    # Run again: it is as the state's writers write it now
    again = repair(dynamo, key("unstamped"), plan=OPEN_PLAN, person_id="p-1", dry_run=False)
    assert again.status is RepairStatus.NOTHING_TO_REPAIR


def test_given_a_closed_saga_left_stamped_then_its_open_key_is_removed(dynamo: Backend) -> None:
    dynamo.put_saga("closed", "p-2", gsi4pk="shard", state="SIGNED", **{OPEN_KEY: "x"})

    result = repair(dynamo, key("closed"), plan=OPEN_PLAN, person_id="p-2", dry_run=False)

    assert result.status is RepairStatus.REPAIRED
    assert result.write == {OPEN_KEY: None}
    assert result.to_json()["write"] == {OPEN_KEY: None}
    assert OPEN_KEY not in (row(dynamo, "closed") or {})


def test_given_an_open_saga_closed_since_the_read_then_the_stamp_is_not_written(
    dynamo: Backend,
) -> None:
    # Given a writer that closes the saga between the repair's read and its write
    dynamo.put_saga("racing", "p-3", gsi4pk="shard")

    def close_first(**_: Any) -> None:
        dynamo.put_saga("racing", "p-3", gsi4pk="shard", state="DECLINED")

    dynamo.client.meta.events.register_first("before-call.dynamodb.UpdateItem", close_first)
    result = repair(dynamo, key("racing"), plan=OPEN_PLAN, person_id="p-3", dry_run=False)

    # Then the condition on the state as read refuses the stamp: a closed saga never gets one
    assert result.status is RepairStatus.CHANGED
    assert OPEN_KEY not in (row(dynamo, "racing") or {})


def test_given_an_anomalous_open_saga_then_its_repair_stamps_the_open_key_too(
    dynamo: Backend,
) -> None:
    dynamo.put_saga("no-person", None, GSI4SK=f"#{OPENED_AT}")
    put_lease(dynamo, "no-person", "p-7")

    result = repair(dynamo, key("no-person"), plan=OPEN_PLAN, dry_run=False)

    assert result.status is RepairStatus.REPAIRED
    assert result.write is not None
    assert result.write[OPEN_KEY] == OPEN.key_for("p-7")
    assert result.write["GSI4PK"] == keys.shard_gsi4pk_for_person("p-7", N)
    assert (row(dynamo, "no-person") or {})[OPEN_KEY] == OPEN.key_for("p-7")
