"""The DynamoDB semantics layer's core model (devkit.semantics): each documented rule, its
refusal as botocore parses it, and the units it charges."""

from __future__ import annotations

from typing import Any

import pytest

from devkit.capacity.pricing import Charge
from devkit.capacity.table_schema import IndexSchema, TableSchema
from devkit.semantics.model import DynamoSemantics, Refusal, Transaction
from devkit.semantics.requests import touched, write_cost
from devkit.semantics.wire import parsed_error
from saga_index.index.names import INDEX_NAME, INDEX_PARTITION_KEY, INDEX_SORT_KEY

TABLE = "sagas"
SCHEMA = TableSchema(
    TABLE, "PK", "SK", (IndexSchema(INDEX_NAME, INDEX_PARTITION_KEY, INDEX_SORT_KEY),)
)
STATE = (TABLE, ("RSAGA_INDEX#CONTROL", "STATE"))
ROW_A = (TABLE, ("RSAGA#a", "SAGA"))
ROW_B = (TABLE, ("RSAGA#b", "SAGA"))


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def model(clock: Clock) -> DynamoSemantics:
    return DynamoSemantics(TABLE, clock=clock, in_flight=0.010)


def _began(result: Transaction | Refusal) -> Transaction:
    assert isinstance(result, Transaction), result
    return result


# ---- conflicts -------------------------------------------------------------------------------


def test_a_single_write_to_an_item_an_ongoing_transaction_includes_conflicts(
    model: DynamoSemantics,
) -> None:
    _began(model.begin_transaction([STATE, ROW_A]))
    refusal = model.admit_write("UpdateItem", STATE)
    assert refusal is not None
    assert refusal.code == "TransactionConflictException"
    assert model.admit_write("UpdateItem", ROW_B) is None, "another item is not held"
    assert model.stats.conflicts["UpdateItem"] == 1


def test_a_condition_check_includes_its_item(model: DynamoSemantics) -> None:
    check = touched(
        SCHEMA,
        "TransactWriteItems",
        {
            "TransactItems": [
                {"ConditionCheck": {"TableName": TABLE, "Key": _key(STATE)}},
                {"Update": {"TableName": TABLE, "Key": _key(ROW_A)}},
            ]
        },
    )
    assert check.refs == [STATE, ROW_A]
    _began(model.begin_transaction([a.ref for a in check.actions]))
    assert model.admit_write("PutItem", STATE) is not None


def test_a_transaction_including_an_item_of_an_ongoing_one_is_cancelled(
    model: DynamoSemantics,
) -> None:
    _began(model.begin_transaction([STATE, ROW_A]))
    refusal = model.begin_transaction([STATE, ROW_B])
    assert isinstance(refusal, Refusal)
    parsed = parsed_error(refusal, "TransactWriteItems")
    assert parsed["Error"]["Code"] == "TransactionCanceledException"
    assert [r["Code"] for r in parsed["CancellationReasons"]] == ["TransactionConflict", "None"]
    assert model.stats.cancelled_transactions == 1
    # The cancelled one holds nothing: its own row is free.
    assert model.admit_write("UpdateItem", ROW_B) is None


def test_transactions_on_disjoint_items_do_not_conflict(model: DynamoSemantics) -> None:
    _began(model.begin_transaction([ROW_A]))
    _began(model.begin_transaction([ROW_B]))
    assert model.stats.transactions == 2


def test_a_transaction_is_ongoing_only_while_in_flight(
    model: DynamoSemantics, clock: Clock
) -> None:
    first = _began(model.begin_transaction([STATE]))
    clock.now += 0.009
    assert model.admit_write("UpdateItem", STATE) is not None
    clock.now += 0.002
    assert model.admit_write("UpdateItem", STATE) is None, "past its in-flight time"
    second = _began(model.begin_transaction([STATE]))
    model.finish(second)
    assert model.admit_write("UpdateItem", STATE) is None, "finished before its in-flight time"
    assert first.until == pytest.approx(100.010)


def test_a_transactional_read_of_a_held_item_is_cancelled_and_holds_nothing(
    model: DynamoSemantics,
) -> None:
    _began(model.begin_transaction([STATE]))
    assert isinstance(model.begin_transaction([STATE], operation="TransactGetItems"), Refusal)
    got = _began(model.begin_transaction([ROW_A], operation="TransactGetItems"))
    assert got.finished
    assert model.admit_write("PutItem", ROW_A) is None


def test_reads_are_not_affected_by_an_ongoing_transaction(model: DynamoSemantics) -> None:
    _began(model.begin_transaction([STATE, ROW_A]))
    # A read consults only the ceilings: nothing about the held items refuses it.
    assert model.admit([Charge(TABLE, STATE[1][0], rcu=1.0)]) is None
    assert touched(SCHEMA, "GetItem", {"TableName": TABLE, "Key": _key(STATE)}).refs == []
    assert touched(SCHEMA, "Query", {"TableName": TABLE}).refs == []


def test_conflicts_switched_off_refuse_nothing(clock: Clock) -> None:
    model = DynamoSemantics(TABLE, clock=clock, conflicts=False)
    _began(model.begin_transaction([STATE]))
    assert model.admit_write("UpdateItem", STATE) is None
    _began(model.begin_transaction([STATE]))


# ---- ceilings --------------------------------------------------------------------------------


def test_a_key_past_its_write_ceiling_this_second_is_throttled(
    model: DynamoSemantics, clock: Clock
) -> None:
    model.charge([Charge(TABLE, "RSAGA#hot", wcu=999.0)])
    assert model.admit([Charge(TABLE, "RSAGA#hot", wcu=1.0)]) is None, "exactly at the ceiling"
    refusal = model.admit([Charge(TABLE, "RSAGA#hot", wcu=2.0)])
    assert refusal is not None
    parsed = parsed_error(refusal, "UpdateItem")
    assert parsed["Error"]["Code"] == "ThrottlingException"
    assert parsed["throttlingReasons"] == [
        {
            "reason": "TableWriteKeyRangeThroughputExceeded",
            "resource": f"arn:aws:dynamodb:us-east-1:123456789012:table/{TABLE}",
        }
    ]
    assert model.admit([Charge(TABLE, "RSAGA#cold", wcu=2.0)]) is None, "another key"
    clock.now += 1.0
    assert model.admit([Charge(TABLE, "RSAGA#hot", wcu=2.0)]) is None, "the next second"


def test_the_read_ceiling_is_three_thousand_per_key_and_apart_from_writes(
    model: DynamoSemantics,
) -> None:
    model.charge([Charge(INDEX_NAME, "LEGACY", rcu=2999.5)])
    assert model.admit([Charge(INDEX_NAME, "LEGACY", wcu=500.0)]) is None
    refusal = model.admit([Charge(INDEX_NAME, "LEGACY", rcu=1.0)])
    assert refusal is not None
    reasons = parsed_error(refusal, "Query")["throttlingReasons"]
    assert reasons[0]["reason"] == "IndexReadKeyRangeThroughputExceeded"
    assert reasons[0]["resource"].endswith(f"table/{TABLE}/index/{INDEX_NAME}")


def test_an_index_write_ceiling_names_the_index(model: DynamoSemantics) -> None:
    model.charge([Charge(INDEX_NAME, "LEGACY", wcu=1000.0)])
    refusal = model.admit([Charge(INDEX_NAME, "LEGACY", wcu=1.0)])
    assert refusal is not None
    reason = parsed_error(refusal, "PutItem")["throttlingReasons"][0]["reason"]
    assert reason == "IndexWriteKeyRangeThroughputExceeded"


def test_the_provisioned_answer_is_an_option(clock: Clock) -> None:
    model = DynamoSemantics(
        TABLE, clock=clock, throttle_code="ProvisionedThroughputExceededException"
    )
    model.charge([Charge(TABLE, "k", wcu=1000.0)])
    refusal = model.admit([Charge(TABLE, "k", wcu=1.0)])
    assert refusal is not None
    parsed = parsed_error(refusal, "PutItem")
    assert parsed["Error"]["Code"] == "ProvisionedThroughputExceededException"
    assert parsed["ThrottlingReasons"][0]["reason"] == "TableWriteKeyRangeThroughputExceeded"


def test_ceilings_switched_off_refuse_nothing(clock: Clock) -> None:
    model = DynamoSemantics(TABLE, clock=clock, ceilings=False)
    model.charge([Charge(TABLE, "k", wcu=5000.0)])
    assert model.admit([Charge(TABLE, "k", wcu=1.0)]) is None


def test_bad_settings_are_refused(clock: Clock) -> None:
    with pytest.raises(ValueError, match="in_flight"):
        DynamoSemantics(TABLE, clock=clock, in_flight=-1)
    with pytest.raises(ValueError, match="throttle_code"):
        DynamoSemantics(TABLE, clock=clock, throttle_code="SlowDown")  # type: ignore[arg-type]


# ---- units -----------------------------------------------------------------------------------


def _saga(gsi4pk: str, padding: int = 0) -> dict[str, Any]:
    return {
        "PK": {"S": "RSAGA#a"},
        "SK": {"S": "SAGA"},
        INDEX_PARTITION_KEY: {"S": gsi4pk},
        INDEX_SORT_KEY: {"S": "p#t"},
        "pad": {"S": "x" * padding},
    }


def test_an_item_in_a_transaction_costs_double_and_its_index_writes_cost_as_a_single_writes() -> (
    None
):
    old, new = _saga("LEGACY"), _saga("SHARD#3")
    update = {"TableName": TABLE, "Key": _key(ROW_A)}
    single = touched(SCHEMA, "UpdateItem", update)
    alone = write_cost(SCHEMA, single, {ROW_A: old}, {ROW_A: new})
    assert _units(alone) == {
        (TABLE, "RSAGA#a"): 1,
        (INDEX_NAME, "LEGACY"): 1,
        (INDEX_NAME, "SHARD#3"): 1,
    }
    fenced = touched(
        SCHEMA,
        "TransactWriteItems",
        {
            "TransactItems": [
                {"ConditionCheck": {"TableName": TABLE, "Key": _key(STATE)}},
                {"Update": update},
            ]
        },
    )
    state = {"PK": {"S": STATE[1][0]}, "SK": {"S": "STATE"}, "pad": {"S": "y" * 1500}}
    units = _units(
        write_cost(SCHEMA, fenced, {STATE: state, ROW_A: old}, {STATE: state, ROW_A: new})
    )
    # The table's items twice (prepare and commit); the index's delete under the old key and
    # put under the new one once each, as the single UpdateItem's above
    # (docs/control-contract.md, "Cost").
    assert units == {
        (TABLE, STATE[1][0]): 4,  # 2 KB of STATE, twice
        (TABLE, "RSAGA#a"): 2,
        (INDEX_NAME, "LEGACY"): 1,
        (INDEX_NAME, "SHARD#3"): 1,
    }
    # Estimated before it runs (its SET of the index key applied), the same.
    restamp = touched(
        SCHEMA,
        "TransactWriteItems",
        {
            "TransactItems": [
                {
                    "Update": {
                        **update,
                        "UpdateExpression": "SET #k = :k",
                        "ExpressionAttributeNames": {"#k": INDEX_PARTITION_KEY},
                        "ExpressionAttributeValues": {":k": {"S": "SHARD#3"}},
                    }
                }
            ]
        },
    )
    assert _units(write_cost(SCHEMA, restamp, {ROW_A: old})) == {
        (TABLE, "RSAGA#a"): 2,
        (INDEX_NAME, "LEGACY"): 1,
        (INDEX_NAME, "SHARD#3"): 1,
    }


def test_an_update_is_estimated_before_it_runs_as_the_item_it_finds() -> None:
    big = _saga("LEGACY", padding=3100)
    touch = touched(SCHEMA, "UpdateItem", {"TableName": TABLE, "Key": _key(ROW_A)})
    # Its own 4 KB; an index entry it may change is charged once it ran.
    assert _units(write_cost(SCHEMA, touch, {ROW_A: big})) == {(TABLE, "RSAGA#a"): 4}


def _units(charges: list[Charge]) -> dict[tuple[str, str], float]:
    out: dict[tuple[str, str], float] = {}
    for charge in charges:
        out[(charge.target, charge.partition_key)] = (
            out.get((charge.target, charge.partition_key), 0) + charge.wcu
        )
    return out


def _key(ref: tuple[str, tuple[str, ...]]) -> dict[str, Any]:
    pk, sk = ref[1]
    return {"PK": {"S": pk}, "SK": {"S": sk}}
