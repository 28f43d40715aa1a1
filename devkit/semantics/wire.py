"""A refusal as DynamoDB sends it (a JSON error body) and as botocore parses it.

The parsed answer is produced by botocore's own JSON parser from the wire body, in the two
passes its endpoint makes (the operation's output shape, then the error's modelled shape), so
an adapter that answers a call in `before-call` hands the caller exactly what a real response
would have become: `err.response["CancellationReasons"]`, `["throttlingReasons"]` (on
ThrottlingException) or `["ThrottlingReasons"]` (on ProvisionedThroughputExceededException).
"""

from __future__ import annotations

import functools
import json
from typing import Any

import botocore.session
from botocore.awsrequest import AWSResponse
from botocore.model import ServiceModel
from botocore.parsers import create_parser

from devkit.semantics.model import Refusal

_TYPE_PREFIX = "com.amazonaws.dynamodb.v20120810#"


def wire_body(refusal: Refusal) -> bytes:
    """The JSON error body DynamoDB answers with."""
    body = {"__type": _TYPE_PREFIX + refusal.code, "message": refusal.message, **refusal.fields}
    return json.dumps(body).encode()


@functools.cache
def _service_model() -> ServiceModel:
    return botocore.session.get_session().get_service_model("dynamodb")


def parsed_error(refusal: Refusal, operation: str) -> dict[str, Any]:
    """What botocore's endpoint makes of `refusal`'s wire body for `operation`."""
    model = _service_model()
    operation_model = model.operation_model(operation)
    parser = create_parser(model.resolved_protocol)
    response = {
        "status_code": refusal.status,
        "headers": {"x-amzn-requestid": "semantics"},
        "body": wire_body(refusal),
    }
    parsed: dict[str, Any] = parser.parse(response, operation_model.output_shape)
    shape = model.shape_for_error_code(refusal.code)
    if shape is not None:
        parsed.update(parser.parse(response, shape))
    return parsed


def answer(refusal: Refusal, operation: str) -> tuple[AWSResponse, dict[str, Any]]:
    """The (http response, parsed) pair a `before-call` handler returns to answer a call."""
    http = AWSResponse("https://dynamodb.semantics", refusal.status, {}, None)
    return http, parsed_error(refusal, operation)
