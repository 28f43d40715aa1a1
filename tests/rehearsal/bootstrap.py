"""An in-process stand-in for the Lambda Python runtime, run as a FRESH interpreter:

    python -I -S -B bootstrap.py RESPONSE_FD PATH [PATH ...]

-I -S: no PYTHON* variables, no script directory, no site-packages, so nothing of the project's
.venv is importable. sys.path becomes the given paths (the asset, the layer, the runtime's
boto3, in Lambda's order) in front of the standard library; nothing else is added.

It then serves invocations like Lambda's runtime loop: one JSON request per stdin line,
{"handler": "module.function", "event": ..., "context": {...}}, one JSON response per line on
RESPONSE_FD (stdout is the function's log, as in Lambda: EMF and JSON log lines). Before each
invocation it prints a marker line so the caller can split the log per invocation. The first
request must be {"probe": [module names]}: it reports which of them import (they must not).

Every AWS call the function makes is recorded with a botocore 'provide-client-params' hook on
boto3's default session (every client of the code under test is made with boto3.client), and
returned with the invocation's response: service, operation, the parameters naming its resources
and, for a DynamoDB call on the table that names its partition, that partition key value (what an
IAM `dynamodb:LeadingKeys` condition is evaluated against).
"""

from __future__ import annotations

import importlib
import json
import os
import re
import sys
import time
import traceback
import uuid
from typing import Any

MARKER = "@@rehearsal-invocation@@"
# Request parameters that name the resource an AWS call acts on.
RESOURCE_PARAMS = ("TableName", "IndexName", "EventBusName", "TopicArn", "Namespace", "QueueUrl")
# The table's partition key attribute (the rehearsal's table is the template's: PK / SK).
PARTITION_KEY = "PK"
_EQUALS = re.compile(r"(#?[A-Za-z0-9_]+)\s*=\s*(:[A-Za-z0-9_]+)")


def _leading_keys(params: dict[str, Any]) -> list[str] | None:
    """The partition key values a DynamoDB request names (GetItem/UpdateItem/DeleteItem: Key,
    PutItem: Item, a table Query: the `PK = :v` of its key condition); None when it names none
    (Scan, an index Query)."""
    for container in ("Key", "Item"):
        value = params.get(container, {}).get(PARTITION_KEY)
        if isinstance(value, dict) and "S" in value:
            return [value["S"]]
    condition = params.get("KeyConditionExpression")
    if condition and "IndexName" not in params:
        names = params.get("ExpressionAttributeNames", {})
        values = params.get("ExpressionAttributeValues", {})
        for name, placeholder in _EQUALS.findall(condition):
            if names.get(name, name) == PARTITION_KEY and "S" in values.get(placeholder, {}):
                return [values[placeholder]["S"]]
    return None


class LambdaContext:
    """The attributes Powertools and the handlers read from Lambda's context object."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.function_name: str = spec["function_name"]
        self.function_version = "$LATEST"
        self.invoked_function_arn: str = spec["invoked_function_arn"]
        self.memory_limit_in_mb: int = int(spec["memory_limit_in_mb"])
        self.aws_request_id: str = spec.get("aws_request_id") or str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{self.function_name}"
        self.log_stream_name = "rehearsal"
        self._deadline = time.monotonic() + float(spec["timeout_seconds"])

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def _record_calls(calls: list[dict[str, Any]]) -> None:
    import boto3

    boto3.setup_default_session()
    session = boto3.DEFAULT_SESSION
    assert session is not None

    def before_call(model: Any, params: dict[str, Any], **_: Any) -> None:
        resources: dict[str, Any] = {k: params[k] for k in RESOURCE_PARAMS if k in params}
        if "Entries" in params:  # events:PutEvents names a bus per entry
            resources["EventBusNames"] = sorted(
                {str(e.get("EventBusName", "default")) for e in params["Entries"]}
            )
        call: dict[str, Any] = {
            "service": model.service_model.service_name,
            "signingName": model.service_model.signing_name,
            "operation": model.name,
            "resources": resources,
        }
        if model.service_model.service_name == "dynamodb":
            call["leadingKeys"] = _leading_keys(params)
        if model.name == "TransactWriteItems":
            # IAM authorises a transaction per action: ConditionCheck as ConditionCheckItem,
            # Update/Put/Delete as UpdateItem/PutItem/DeleteItem.
            for entry in params.get("TransactItems", []):
                for kind, action in entry.items():
                    operation = "ConditionCheckItem" if kind == "ConditionCheck" else kind + "Item"
                    calls.append(
                        {
                            **call,
                            "operation": operation,
                            "resources": {k: action[k] for k in RESOURCE_PARAMS if k in action},
                            "leadingKeys": _leading_keys(action),
                        }
                    )
            return
        calls.append(call)

    session.events.register("provide-client-params", before_call)


def _probe(names: list[str]) -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for name in names:
        try:
            module = importlib.import_module(name)
        except ImportError:
            found[name] = None
        else:
            found[name] = str(getattr(module, "__file__", "?"))
    return found


def _loaded_from() -> dict[str, str]:
    return {
        name: str(module.__file__)
        for name, module in list(sys.modules.items())
        if getattr(module, "__file__", None)
    }


def _resolve(handler: str) -> Any:
    module_name, _, function_name = handler.rpartition(".")
    if not module_name:
        raise ValueError(f"handler {handler!r} is not module.function")
    module = importlib.import_module(module_name)
    function = getattr(module, function_name)
    if not callable(function):
        raise TypeError(f"{handler} is not callable")
    return module, function


def main() -> int:
    response_fd = int(sys.argv[1])
    sys.path[:0] = sys.argv[2:]
    calls: list[dict[str, Any]] = []
    responses = os.fdopen(response_fd, "w", encoding="utf-8", buffering=1)
    recording = False
    for line in sys.stdin:
        request = json.loads(line)
        if "probe" in request:
            responses.write(json.dumps({"probe": _probe(request["probe"])}) + "\n")
            continue
        if not recording:
            _record_calls(calls)
            recording = True
        calls.clear()
        print(f"{MARKER} {request['context']['aws_request_id']}", flush=True)
        response: dict[str, Any]
        try:
            module, function = _resolve(request["handler"])
            result = function(request["event"], LambdaContext(request["context"]))
            response = {"ok": True, "result": result, "moduleFile": module.__file__}
        except Exception as err:  # noqa: BLE001 -- reported to the caller, as Lambda does
            response = {
                "ok": False,
                "errorType": type(err).__name__,
                "errorMessage": str(err),
                "trace": traceback.format_exc(),
            }
        sys.stdout.flush()
        response["calls"] = list(calls)
        response["modules"] = _loaded_from()
        responses.write(json.dumps(response, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
