"""The open filter applies to the merged rows: a saga that closed while its row moved is not
returned as open from the key read first (docs/control-contract.md, "Routing")."""

from __future__ import annotations

from typing import Any

from saga_index.index.layout import Layout
from saga_index.layout_change.record.routing import Routing
from saga_index.store.repository import SagaRepository


def _row(gsi4pk: str, state: str) -> dict[str, Any]:
    return {
        "PK": {"S": "RSAGA#s-1"},
        "SK": {"S": "META"},
        "personId": {"S": "p-1"},
        "state": {"S": state},
        "GSI4PK": {"S": gsi4pk},
        "GSI4SK": {"S": "p-1#2026-03-01T10:00:00.000Z"},
    }


class _Pages:
    """An index whose legacy key still shows the saga open and whose shard key already shows it
    signed (the row moved and closed between the two stages' reads); honours FilterExpression
    the way DynamoDB does (after reading, before returning)."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def paginate(self, **request: Any) -> list[dict[str, Any]]:
        self.requests.append(request)
        key = request["ExpressionAttributeValues"][":pk"]["S"]
        rows = {"RenewalSaga": [_row(key, "OPENED")], "RenewalSaga#14": [_row(key, "SIGNED")]}
        items = rows.get(key, [])
        if "FilterExpression" in request:
            allowed = {
                v["S"] for k, v in request["ExpressionAttributeValues"].items() if k != ":pk"
            }
            items = [i for i in items if i["state"]["S"] in allowed]
        return [{"Items": items}]


class _Client:
    def __init__(self) -> None:
        self.pages = _Pages()

    def get_paginator(self, name: str) -> _Pages:
        assert name == "query"
        return self.pages


def test_given_a_saga_closed_while_moving_then_the_open_enumeration_does_not_return_it() -> None:
    client = _Client()
    migrating = Routing.between(Layout.legacy(), Layout.sharded(16))
    repository = SagaRepository(client, "sagas", plan=migrating)  # type: ignore[arg-type]

    assert repository.get_all_open_sagas().items == []
    assert [r["state"] for r in repository.get_all_sagas().items] == ["SIGNED"]
    assert not any("FilterExpression" in r for r in client.pages.requests)


def test_given_one_stage_then_the_open_filter_runs_on_the_server() -> None:
    client = _Client()
    repository = SagaRepository(client, "sagas", plan=Layout.legacy())  # type: ignore[arg-type]

    assert [r["state"] for r in repository.get_all_open_sagas().items] == ["OPENED"]
    assert all("FilterExpression" in r for r in client.pages.requests)
