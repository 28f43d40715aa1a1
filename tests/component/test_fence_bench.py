"""bench.fence end to end at its tiny size (seconds), and the moto transaction copy it relies on.

The figures asserted are the ones that do not depend on the machine's speed: what each re-stamp
consumes per kind of partition, and that nothing refuses a heartbeat or an operator write when
no re-stamp is a transaction."""

from __future__ import annotations

from typing import Any

import pytest
from moto import mock_aws

from bench import fence
from devkit.semantics.moto_harness import cheap_transactions
from saga_index.store.dynamo.client import make_client


def test_the_tiny_run_sets_the_fences_side_by_side(monkeypatch: pytest.MonkeyPatch) -> None:
    saved: dict[str, Any] = {}
    monkeypatch.setattr(fence, "save", lambda name, document: saved.update(document))

    assert fence.main(["--tiny"]) == 0

    runs = {(r["fence"], r["segments"]): r for r in saved["runs"]}
    assert set(runs) == {(f, s) for f in fence.FENCES for s in (2, 4)}
    for segments in (2, 4):
        unfenced, shared = runs[("unfenced", segments)], runs[("shared-state", segments)]
        assert unfenced["vs_unfenced"] == pytest.approx(1.0)
        assert unfenced["restamped"] == unfenced["rows"]
        # A plain UpdateItem: 1 WCU on its row, a delete and a put on the index, no control.
        assert unfenced["wcu_per_restamp"] == {"index": 2.0, "rows": 1.0}
        assert unfenced["heartbeat_success"] == 1.0
        assert unfenced["operator_success"] == 1.0
        assert unfenced["cancelled_transactions"] == 0
        # Today's fence: every item doubled, and the STATE item checked by every re-stamp.
        wcu = shared["wcu_per_restamp"]
        assert wcu["rows"] == pytest.approx(2.0)
        assert wcu["index"] == pytest.approx(4.0)
        assert wcu["control"] >= 2.0


def test_bad_arguments_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        fence.main(["--fences", "per-row"])
    assert exited.value.code == 2
    assert "unknown fence(s) ['per-row']" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        fence.main(["--caps", "fast"])


def test_the_cheap_transaction_copy_still_rolls_a_cancelled_transaction_back() -> None:
    key = {"PK": {"S": "row"}, "SK": {"S": "META"}}
    with mock_aws(), cheap_transactions():
        client = make_client(region="us-east-1", endpoint_url=None, max_attempts=1)
        client.create_table(
            TableName="t",
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[
                {"AttributeName": "PK", "AttributeType": "S"},
                {"AttributeName": "SK", "AttributeType": "S"},
            ],
            KeySchema=[
                {"AttributeName": "PK", "KeyType": "HASH"},
                {"AttributeName": "SK", "KeyType": "RANGE"},
            ],
        )
        client.put_item(TableName="t", Item={**key, "n": {"N": "1"}})
        client.put_item(TableName="t", Item={"PK": {"S": "state"}, "SK": {"S": "S"}})
        with pytest.raises(client.exceptions.TransactionCanceledException):
            client.transact_write_items(
                TransactItems=[
                    {
                        "Update": {
                            "TableName": "t",
                            "Key": key,
                            "UpdateExpression": "SET n = :v",
                            "ExpressionAttributeValues": {":v": {"N": "2"}},
                        }
                    },
                    {
                        "ConditionCheck": {
                            "TableName": "t",
                            "Key": {"PK": {"S": "state"}, "SK": {"S": "S"}},
                            "ConditionExpression": "attribute_exists(lease)",
                        }
                    },
                ]
            )
        assert client.get_item(TableName="t", Key=key)["Item"]["n"] == {"N": "1"}
        client.transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": "t",
                        "Key": key,
                        "UpdateExpression": "SET n = :v",
                        "ExpressionAttributeValues": {":v": {"N": "3"}},
                    }
                }
            ]
        )
        assert client.get_item(TableName="t", Key=key)["Item"]["n"] == {"N": "3"}
