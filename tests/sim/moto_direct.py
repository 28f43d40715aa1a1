"""The simulated table's own client, answered by moto's DynamoDB handler without the HTTP detour.

Every request the simulator runs against moto (each admitted request of a simulated process,
every index change made visible, the checker's scans) went through moto as any in-process
request does: botocore signed it and built an HTTP request, moto's stubber matched its URL,
rebuilt it as a werkzeug request and listed the handler's methods to find the action, and
botocore parsed the answer's body. On a Query of a few items that detour cost two thirds of the
request, and the simulator is made of requests.

Here the same JSON body botocore serialised goes to moto's DynamoHandler directly: moto's own
request parser reads it, its own call_action runs the operation (the same model, the same
errors), its own serialiser writes the answer, and botocore's parser reads that back, modelled
error fields included, as its endpoint would. What is left out is only what carries the request
between the two: URLs, headers, signing. The parser reads a plain attribute value (strings,
numbers, flags, their sets, maps and lists of them) as a copy of itself, which is what
botocore's walk of its ten members makes of it. tests/sim/test_moto_direct.py checks that
answers and errors are the same both ways and that the parser reads as botocore's does.
"""

from __future__ import annotations

from typing import Any

from botocore.awsrequest import AWSResponse
from botocore.parsers import JSONParser
from moto.core.parse import PROTOCOL_PARSERS
from moto.dynamodb.responses import DynamoHandler

_STRINGS = frozenset({"S", "N"})
_STRING_SETS = frozenset({"SS", "NS"})
_FLAGS = frozenset({"NULL", "BOOL"})


class _NotPlain(Exception):
    """An attribute value the copy does not cover: botocore's walk parses it."""


def _plain(value: Any) -> dict[str, Any]:
    """The attribute value `value` as botocore's parser reads it, or _NotPlain: a string, a
    number, a flag, a set of strings or numbers is its own value; a map or a list is its
    members read the same way. A binary (decoded from base64 by the walk) or anything else is
    left to the walk."""
    if type(value) is not dict or len(value) != 1:
        raise _NotPlain
    ((kind, inner),) = value.items()
    if kind in _STRINGS and type(inner) is str:
        return {kind: inner}
    if kind in _FLAGS and type(inner) is bool:
        return {kind: inner}
    if kind in _STRING_SETS and type(inner) is list and all(type(v) is str for v in inner):
        return {kind: list(inner)}
    if kind == "M" and type(inner) is dict:
        return {"M": {name: _plain(v) for name, v in inner.items()}}
    if kind == "L" and type(inner) is list:
        return {"L": [_plain(v) for v in inner]}
    raise _NotPlain


class _Parser(JSONParser):
    """botocore's JSON parser, which walks an AttributeValue member by member (ten members, the
    largest share of parsing an answer of items), reading a plain one as a copy instead."""

    def _handle_structure(self, shape: Any, value: Any) -> Any:
        if shape.name == "AttributeValue":
            try:
                return _plain(value)
            except _NotPlain:
                pass
        return super()._handle_structure(shape, value)


_PARSER = _Parser()


def parse(response_dict: dict[str, Any], shape: Any) -> dict[str, Any]:
    """An answer (botocore's response dict) read as `shape`, as botocore's JSON parser does."""
    parsed: dict[str, Any] = _PARSER.parse(response_dict, shape)
    return parsed


class _Headers(dict[str, Any]):
    """The request's headers as moto reads them (case-insensitive look-ups)."""

    def get(self, key: str, default: Any = None) -> Any:
        for name, value in self.items():
            if name.lower() == key.lower():
                return value
        return default

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key) is not None


def answer(model: Any, request_dict: dict[str, Any]) -> tuple[AWSResponse, dict[str, Any]]:
    """What botocore's endpoint would return for `request_dict` (a DynamoDB request as botocore
    serialised it) sent to moto: the HTTP response and the parsed answer."""
    handler = DynamoHandler()
    body = request_dict["body"]
    headers = _Headers(request_dict["headers"])
    parser = PROTOCOL_PARSERS["json"](model, map_type=handler.PROTOCOL_PARSER_MAP_TYPE)
    request = {"method": "POST", "values": {}, "headers": headers, "body": body}
    handler.params = parser.parse({**request, "url_path": "/", "url_params": {}})
    handler.body = handler.params
    handler.headers = headers
    handler.querystring = {}
    handler.data = {}
    handler.uri = handler.raw_path = "/"
    handler.method = "POST"
    handler.region = "us-east-1"
    handler.partition = "aws"
    handler.uri_match = {}
    handler.response_headers = {"server": "amazon.com"}
    handler.current_account = handler.get_current_account()
    status, response_headers, text = handler.call_action()
    content = text.encode("utf-8") if isinstance(text, str) else text
    wire_headers = {k.lower(): str(v) for k, v in response_headers.items() if k != "status"}
    response_dict = {"headers": wire_headers, "status_code": status, "body": content}
    parsed = parse(response_dict, model.output_shape)
    if status >= 300:
        # The modelled fields of the error (CancellationReasons, Item...), as botocore's
        # endpoint adds them.
        code = parsed.get("Error", {}).get("Code")
        shape = model.service_model.shape_for_error_code(code) if code else None
        if shape is not None:
            parsed.update(parse(response_dict, shape))
    parsed.setdefault("ResponseMetadata", {})["RetryAttempts"] = 0
    return AWSResponse("https://dynamodb.us-east-1.amazonaws.com/", status, wire_headers, None), (
        parsed
    )


def attach(client: Any) -> Any:
    """`client`'s every DynamoDB request answered by `answer` (inside moto's mock). No lock is
    taken around moto, as its HTTP path takes in the tests: the simulator's scheduler runs one
    request at a time."""

    def before_call(model: Any, params: dict[str, Any], **_: Any) -> Any:
        return answer(model, params)

    client.meta.events.register("before-call.dynamodb", before_call)
    return client
