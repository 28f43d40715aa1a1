"""tests/support/moto_validators.py gives moto's own answers to UpdateItem: for valid updates the
same item after, for invalid ones (two SET, ADD or REMOVE clauses, the same or overlapping paths,
through names or not, a key attribute) the same error code and message, as moto's own walk."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from tests.support import moto_validators

_VALUES = {
    ":v": {"S": "v"},
    ":w": {"S": "w"},
    ":one": {"N": "1"},
    ":set": {"SS": ["x"]},
    ":list": {"L": [{"S": "e"}]},
}
_MANY = "SET " + ", ".join(f"#a{n} = :v" for n in range(25))

# (update expression, names): every one the table's seeded item is updated with.
_UPDATES: list[tuple[str, dict[str, str]]] = [
    ("SET a = :v", {}),
    (_MANY, {f"#a{n}": f"attr{n}" for n in range(25)}),
    ("SET a = :v ADD n :one REMOVE c DELETE s :set", {}),
    ("SET m.b = :v, l[0] = :w", {}),
    ("SET l = list_append(l, :list), a = if_not_exists(a, :v)", {}),
    ("SET n = n + :one", {}),
    # DynamoDB refuses this overlap; moto does not see it (it compares dotted paths only), and
    # moto's verdict is what the walk must keep.
    ("SET l[0] = :v, l = :w", {}),
    ("SET a = :v, a = :w", {}),
    ("SET a = :v, m.b = :w, m = :v", {}),
    ("SET m.b = :v, m.b.c = :w", {}),
    ("SET #x = :v, #y = :w", {"#x": "a", "#y": "a"}),
    ("SET #x = :v REMOVE #y", {"#x": "a", "#y": "a"}),
    ("SET a = :v REMOVE a", {}),
    ("SET a = :v SET b = :w", {}),
    ("ADD n :one ADD k :one", {}),
    ("REMOVE a REMOVE b", {}),
    ("SET a = :v ADD n :one SET b = :w ADD k :one", {}),
    ("REMOVE a, b ADD n :one REMOVE c", {}),
    ("SET a = :v, a = :w SET b = :v", {}),
    ("SET pk = :v", {}),
    ("SET #k = :v", {"#k": "pk"}),
    ("SET a = :v, " * 3 + "a = :v", {}),
]

_ITEM = {
    "pk": {"S": "row"},
    "a": {"S": "old"},
    "c": {"S": "gone"},
    "n": {"N": "5"},
    "s": {"SS": ["x", "y"]},
    "m": {"M": {"b": {"S": "inner"}}},
    "l": {"L": [{"S": "first"}]},
}


@pytest.fixture
def client() -> Iterator[Any]:
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        dynamodb.create_table(
            TableName="t",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        yield dynamodb
    moto_validators.install()


def _update(client: Any, expression: str, names: dict[str, str]) -> tuple[Any, ...]:
    client.put_item(TableName="t", Item=_ITEM)
    used = {key: value for key, value in _VALUES.items() if key in expression}
    request: dict[str, Any] = {
        "TableName": "t",
        "Key": {"pk": {"S": "row"}},
        "UpdateExpression": expression,
    }
    if used:
        request["ExpressionAttributeValues"] = used
    if names:
        request["ExpressionAttributeNames"] = names
    try:
        client.update_item(**request)
    except ClientError as error:
        return ("error", error.response["Error"]["Code"], error.response["Error"]["Message"])
    return ("ok", client.get_item(TableName="t", Key={"pk": {"S": "row"}})["Item"])


@pytest.mark.parametrize(("expression", "names"), _UPDATES, ids=[u[0][:40] for u in _UPDATES])
def test_an_update_is_answered_as_moto_s_own_walk_answers_it(
    client: Any, expression: str, names: dict[str, str]
) -> None:
    moto_validators.uninstall()
    own = _update(client, expression, names)
    moto_validators.install()

    assert _update(client, expression, names) == own


def test_the_invalid_updates_above_are_refused(client: Any) -> None:
    """The comparison is worth something only if moto refuses some of the updates: it does."""
    moto_validators.install()
    verdicts = [_update(client, expression, names)[0] for expression, names in _UPDATES]

    assert verdicts[:7] == ["ok"] * 7
    assert verdicts[7:] == ["error"] * (len(_UPDATES) - 7)
