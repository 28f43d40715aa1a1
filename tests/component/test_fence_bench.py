"""bench.fence: its command line, and the moto transaction copy it relies on. The figures of its
tiny run (tests/support/bench_figures.py) are asserted on the runner's tiny run in
test_benches.py, so the run is made once."""

from __future__ import annotations

from typing import Any

import pytest
from moto import mock_aws

from bench import fence
from devkit.semantics.moto_harness import cheap_transactions
from saga_index.store.dynamo.client import make_client


def test_tiny_runs_the_tiny_scale_renders_and_saves_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # `python -m bench.fence --tiny` is the runner's tiny run (whose figures test_benches.py
    # checks) started from the module's own command line.
    calls: list[tuple[Any, ...]] = []
    result = {"runs": []}

    def run(segments: Any, caps: Any, **kwargs: Any) -> dict[str, Any]:
        calls.append((list(segments), list(caps), kwargs))
        return result

    monkeypatch.setattr(fence, "run", run)
    monkeypatch.setattr(fence, "render", lambda shown: calls.append(("render", shown)))
    monkeypatch.setattr(fence, "save", lambda name, document: calls.append((name, document)))

    assert fence.main(["--tiny"]) == 0

    tiny = fence.TINY
    assert calls == [
        (
            tiny["segments"],
            tiny["caps"],
            {
                "seconds": tiny["seconds"],
                "max_rows": tiny["max_rows"],
                "fences": None,
                "on_engine": False,
            },
        ),
        ("render", result),
        (fence.NAME, result),
    ]


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
