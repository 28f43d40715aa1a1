"""The requests the simulated table reads: which rows a write touches, names, error answers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from botocore.awsrequest import AWSResponse

TABLE = "sim-sagas"
TableKey = tuple[str, str]


def table_keys(operation: str, params: Mapping[str, Any]) -> list[TableKey]:
    def of(key: Mapping[str, Any]) -> TableKey:
        return (key["PK"]["S"], key["SK"]["S"])

    if operation == "PutItem":
        return [of(params["Item"])]
    if operation in ("UpdateItem", "DeleteItem"):
        return [of(params["Key"])]
    if operation == "TransactWriteItems":
        found = []
        for action in params["TransactItems"]:
            for kind, body in action.items():
                if body.get("TableName") == TABLE and kind != "ConditionCheck":
                    found.append(of(body["Item"] if kind == "Put" else body["Key"]))
        return found
    if operation == "BatchWriteItem":
        found = []
        for request in params["RequestItems"].get(TABLE, []):
            if "PutRequest" in request:
                found.append(of(request["PutRequest"]["Item"]))
            else:
                found.append(of(request["DeleteRequest"]["Key"]))
        return found
    return []


def snake(operation: str) -> str:
    out = []
    for n, char in enumerate(operation):
        if char.isupper() and n:
            out.append("_")
        out.append(char.lower())
    return "".join(out)


def error(status: int, code: str, message: str) -> tuple[AWSResponse, dict[str, Any]]:
    parsed = {
        "Error": {"Code": code, "Message": message},
        "ResponseMetadata": {"HTTPStatusCode": status},
    }
    return AWSResponse("https://sim", status, {}, None), parsed


def describe(params: Mapping[str, Any]) -> str:
    if "IndexName" in params:
        values = params.get("ExpressionAttributeValues", {})
        return f"index {values.get(':pk', {}).get('S', '?')}"
    key = params.get("Key") or params.get("Item")
    if isinstance(key, Mapping) and "PK" in key:
        return f"{key['PK'].get('S')}/{key.get('SK', {}).get('S')}"
    if "Segment" in params:
        return f"segment {params['Segment']}"
    return ""
