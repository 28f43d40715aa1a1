"""A control write whose answer is lost may still have landed: through the lost-answers layer
(devkit.semantics.lost, in front of moto), the first request of a write is APPLIED, its answer
replaced by a read timeout, and botocore's resends throttled. What the CLI and the executor then
report is what the record holds, read back, never "nothing was written" over a write that
landed; and the history stays truthful."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from devkit.semantics.lost import LostAnswers, keyed, matches
from saga_index.index import CONTROL_PK
from saga_index.layout_change.lease.errors import LeaseOutcomeUnknownError
from saga_index.layout_change.lease.grant import acquire_lease, new_lease_token
from saga_index.layout_change.record.items import STATE_SK, history_key
from saga_index.layout_change.record.phase import Phase
from saga_index.layout_change.record.store import ControlStore
from saga_index.layout_change.transitions import change_phase
from saga_index.layout_change.transitions.errors import MoveOutcomeUnknownError
from saga_index.store.dynamo.codec import serialize
from saga_index.store.dynamo.retry import RetryPolicy
from saga_index_cli import context as cli_context
from saga_index_cli.context import CliHooks
from saga_index_cli.main import main
from tests.support.backends import Backend
from tests.support.backfill_contract import AFTER_EFFECTIVE, plant, seed
from tests.support.backfill_contract import Clock as ContractClock
from tests.support.control_fixtures import Clock, moto_backend, probe_64_shard_keys

FAST = RetryPolicy(attempts=6, base_delay=0.0, max_delay=0.0)


@pytest.fixture
def dynamo(synthesized_template: dict[str, Any]) -> Iterator[Backend]:
    with moto_backend("lost-answers", synthesized_template) as backend:
        yield backend


@pytest.fixture(autouse=True)
def no_botocore_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore's standard mode sleeps up to seconds between its attempts: not in tests."""

    class _Time:
        @staticmethod
        def sleep(_seconds: float) -> None:
            return None

    import botocore.endpoint

    monkeypatch.setattr(botocore.endpoint, "time", _Time)


def lose_the_state_write() -> LostAnswers:
    """The STATE UpdateItem lands, its answer is lost, every resend of it is throttled."""
    return LostAnswers(lose=matches("UpdateItem", keyed(CONTROL_PK, STATE_SK)))


class Cli:
    def __init__(
        self,
        capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
        dynamo: Backend,
        clock: Clock | ContractClock,
    ) -> None:
        self.capsys, self.table = capsys, dynamo.table_name
        self.hooks = CliHooks(
            identity=lambda _: "tester@host",
            clock=clock,
            shard_key_probe=probe_64_shard_keys,
            control_retry=FAST,
        )
        self.layer: LostAnswers | None = None
        made = cli_context.make_client

        def make_client(**kwargs: Any) -> Any:
            client = made(**kwargs)
            return client if self.layer is None else self.layer.attach(client)

        monkeypatch.setattr(cli_context, "make_client", make_client)

    def __call__(self, *argv: str) -> tuple[int, str, str]:
        with pytest.raises(SystemExit) as exited:
            main(["--table", self.table, "--max-attempts", "3", *argv], hooks=self.hooks)
        out, err = self.capsys.readouterr()
        return int(exited.value.code or 0), out, err


@pytest.fixture
def cli(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, dynamo: Backend
) -> Cli:
    return Cli(capsys, monkeypatch, dynamo, Clock())


def test_the_layer_applies_the_request_loses_its_answer_and_throttles_the_resends(
    dynamo: Backend,
) -> None:
    layer = LostAnswers(lose=matches("PutItem"), throttle_resends=None)
    client = layer.attach(dynamo.new_client(max_attempts=3))
    item = {"PK": {"S": "lost#1"}, "SK": {"S": "x"}}

    with pytest.raises(ClientError, match="ThrottlingException"):
        client.put_item(TableName=dynamo.table_name, Item=item)

    assert (layer.stats.lost, layer.stats.throttled, layer.stats.delivered) == (1, 2, 0)
    assert dynamo.get("lost#1", "x") is not None  # it landed
    # A different request passes: only the lost one's resends are refused.
    client.put_item(TableName=dynamo.table_name, Item={**item, "SK": {"S": "y"}})
    assert dynamo.get("lost#1", "y") is not None


def test_the_first_move_whose_answer_is_lost_is_reported_applied_and_its_history_settled(
    cli: Cli, dynamo: Backend
) -> None:
    cli.layer = lose_the_state_write()

    code, out, err = cli("phase", "set", "migrating", "--shards", "16", "--reason", "go", "--json")

    assert cli.layer.stats.lost == 1
    assert cli.layer.stats.throttled > 0
    assert "nothing was written" not in out + err
    assert code == 0, err
    assert json.loads(out.splitlines()[0])["phase"] == "migrating"
    store = ControlStore(dynamo.client, dynamo.table_name)
    assert store.read().phase is Phase.MIGRATING
    [entry] = store.history_entries()
    assert (entry.applied, entry.abandoned) == (True, False)


def test_an_open_index_move_whose_answer_is_lost_is_reported_applied_and_settled(
    cli: Cli, dynamo: Backend
) -> None:
    cli.layer = lose_the_state_write()

    code, out, err = cli("open-index", "set", "adding", "--reason", "go", "--output", "json")

    assert cli.layer.stats.lost == 1
    assert "nothing was written" not in out + err
    assert code == 0, err
    doc = json.loads(out.splitlines()[0])
    assert (doc["openIndex"], doc["changed"]) == ("adding", True)
    assert any("answer was lost" in warning for warning in doc["warnings"])
    store = ControlStore(dynamo.client, dynamo.table_name)
    assert store.read().open_index.state.value == "adding"
    [entry] = store.history_entries()
    assert (entry.applied, entry.abandoned) == (True, False)


def test_the_executor_reads_back_after_a_retry_later_on_its_state_write(dynamo: Backend) -> None:
    layer = lose_the_state_write()
    store = ControlStore(
        layer.attach(dynamo.new_client(max_attempts=3)), dynamo.table_name, retry=FAST
    )

    change = change_phase(
        store,
        Phase.MIGRATING,
        shard_count=16,
        changed_by="ops",
        reason="go",
        probe=probe_64_shard_keys,
        clock=Clock(),
    )

    assert change.state.phase is Phase.MIGRATING
    assert change.history_written
    assert any("answer was lost" in w for w in change.warnings)


def test_a_state_write_whose_answer_and_read_back_are_both_lost_says_unknown(
    dynamo: Backend,
) -> None:
    seen: list[str] = []

    def lose(operation: str, body: Any) -> bool:
        on_state = keyed(CONTROL_PK, STATE_SK)(body)
        if operation == "UpdateItem" and on_state:
            seen.append(operation)
            return True
        return operation == "GetItem" and on_state and bool(seen)

    layer = LostAnswers(lose=lose, times=None)
    store = ControlStore(
        layer.attach(dynamo.new_client(max_attempts=2)), dynamo.table_name, retry=FAST
    )

    with pytest.raises(MoveOutcomeUnknownError) as raised:
        change_phase(
            store,
            Phase.MIGRATING,
            shard_count=16,
            changed_by="ops",
            reason="go",
            probe=probe_64_shard_keys,
            clock=Clock(),
        )

    message = str(raised.value)
    assert "unknown whether the move was applied" in message
    assert "saga-index phase show" in message
    assert "nothing was written" not in message


def abandon_history(dynamo: Backend, version: int) -> None:
    """What the executor used to leave after a lost answer: the applied move's intent marked
    abandoned (and not applied)."""
    dynamo.client.update_item(
        TableName=dynamo.table_name,
        Key=serialize(history_key(version)),
        UpdateExpression="SET #a = :no, #b = :yes",
        ExpressionAttributeNames={"#a": "applied", "#b": "abandoned"},
        ExpressionAttributeValues={":no": {"BOOL": False}, ":yes": {"BOOL": True}},
    )


def test_history_shows_the_stored_flags_and_the_same_phase_set_repairs_the_intent(
    cli: Cli, dynamo: Backend
) -> None:
    code, _, err = cli("phase", "set", "migrating", "--shards", "16", "--reason", "go")
    assert code == 0, err
    abandon_history(dynamo, 1)

    code, out, _ = cli("phase", "show", "--history", "--json")
    [item] = json.loads(out)["history"]
    assert (item["applied"], item["storedApplied"], item["storedAbandoned"]) == (
        True,
        False,
        True,
    )
    code, text, _ = cli("phase", "show", "--history")
    assert "stored as ABANDONED" in text

    code, out, err = cli("phase", "set", "migrating", "--shards", "16", "--reason", "re", "--json")

    assert code == 0, err
    doc = json.loads(out)
    assert (doc["changed"], doc["historySettled"]) == (False, True)
    assert "settled from the STATE item" in err
    [entry] = ControlStore(dynamo.client, dynamo.table_name).history_entries()
    assert (entry.applied, entry.abandoned) == (True, False)
    # Run once more: nothing left to settle, nothing written.
    code, out, err = cli("phase", "set", "migrating", "--shards", "16", "--reason", "re", "--json")
    assert json.loads(out)["historySettled"] is False
    assert "nothing written" in err


def is_the_lease_acquire(operation: str, body: Any) -> bool:
    """The acquire: the STATE UpdateItem that hands out a fencing epoch."""
    names = body.get("ExpressionAttributeNames", {}).values()
    return operation == "UpdateItem" and keyed(CONTROL_PK, STATE_SK)(body) and "leaseEpoch" in names


def test_a_lease_acquire_whose_answer_is_lost_runs_with_the_lease_it_took_and_frees_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, dynamo: Backend
) -> None:
    plant(dynamo, "migrating")
    seed(dynamo)
    cli = Cli(capsys, monkeypatch, dynamo, ContractClock(AFTER_EFFECTIVE))
    cli.layer = LostAnswers(lose=is_the_lease_acquire)

    code, out, err = cli("backfill", "--max-writes-per-second", "1000", "--segments", "2")

    assert cli.layer.stats.lost == 1
    assert cli.layer.stats.throttled > 0
    assert "nothing was written" not in out + err
    assert code in (0, 3), err  # 3: the seeded anomaly rows
    state = ControlStore(dynamo.client, dynamo.table_name).read()
    assert state.lease is None  # released with the completion: no orphan lease
    assert state.last_backfill is not None


def test_a_lease_acquire_lost_with_its_read_back_is_unknown_never_nothing_written(
    dynamo: Backend,
) -> None:
    plant(dynamo, "migrating")
    lost: list[str] = []

    def lose(operation: str, body: Any) -> bool:
        if is_the_lease_acquire(operation, body):
            lost.append(operation)
            return True
        return operation == "GetItem" and keyed(CONTROL_PK, STATE_SK)(body) and bool(lost)

    layer = LostAnswers(lose=lose, times=None)
    store = ControlStore(
        layer.attach(dynamo.new_client(max_attempts=2)), dynamo.table_name, retry=FAST
    )
    token = new_lease_token()

    with pytest.raises(LeaseOutcomeUnknownError) as raised:
        acquire_lease(
            store,
            holder="t",
            token=token,
            direction="forward",
            clock=ContractClock(AFTER_EFFECTIVE),
            state=ControlStore(dynamo.client, dynamo.table_name).read(),
        )

    message = str(raised.value)
    assert token in message
    assert "saga-index backfill --stop" in message
    assert "nothing was written" not in message
