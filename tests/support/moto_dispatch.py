"""moto's DynamoDB requests handed to its handler directly, without rebuilding them as web requests.

In-process, moto answers every request botocore sends from a before-send hook: it matches the
URL against every service's patterns (re-compiling each), builds the backend's URL table, turns
botocore's request into a werkzeug request, and its handler's setup reads that back (body,
query string, region, headers) before its own request parser runs; then it lists the handler's
methods (inspect.getmembers) to find the action. On a GetItem that is most of moto's time, and
the component tests are made of moto requests.

Here a request to DynamoDB's regional endpoint (`https://dynamodb.<region>.amazonaws.com/`, a
POST naming its operation in X-Amz-Target) goes to moto's DynamoHandler as its setup would leave
it: moto's own JSON parser reads the body, the handler's own call_action runs the operation
(the same backend, the same errors, the same CRC32 header) and the answer goes back to botocore
as moto's hook returns it. Everything botocore does around the hook is unchanged: the
serialisation, the signature, every before-send hook a test registered first (faults), the
retry handler, the parser. Any other request (another service, a local server's endpoint, a
passthrough moto is configured for) takes moto's own path. A handler's method list is taken
once per class: its methods do not change while a test runs (a test that patches one replaces
its value, which is still looked up by name on every request).

tests/unit/test_moto_dispatch.py checks that answers and errors are the same both ways.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from moto.core import responses as moto_responses
from moto.core.config import passthrough_service, service_whitelisted
from moto.core.parse import PROTOCOL_PARSERS
from moto.core.utils import get_service_model, utcnow
from moto.dynamodb.responses import DynamoHandler
from moto.iam.models import mark_account_as_visited
from moto.utilities.utils import get_partition
from werkzeug.http import http_date

# The regional endpoint botocore sends DynamoDB requests to; the region is the first group.
_ENDPOINT = re.compile(r"^https://dynamodb\.([a-z0-9-]+)\.amazonaws\.com/?$")
_TARGET_PREFIX = "DynamoDB_20120810."


class _Headers(dict[str, str]):
    """The request's headers as moto reads them: look-ups ignore case."""

    def get(self, key: str, default: Any = None) -> Any:
        lowered = key.lower()
        for name, value in self.items():
            if name.lower() == lowered:
                return value
        return default

    def __getitem__(self, key: str) -> str:
        value = self.get(key)
        if value is None:
            raise KeyError(key)
        return str(value)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key) is not None


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def direct_answer(request: Any) -> tuple[int, dict[str, Any], Any] | None:
    """moto's (status, headers, body) for `request` (botocore's prepared request), or None when
    the request is not a DynamoDB call this module answers (moto's own path takes it)."""
    endpoint = _ENDPOINT.match(request.url or "")
    if endpoint is None or request.method != "POST":
        return None
    headers = _Headers({_text(name): _text(value) for name, value in request.headers.items()})
    target = headers.get("X-Amz-Target") or ""
    if not target.startswith(_TARGET_PREFIX) or passthrough_service("dynamodb"):
        return None
    if not service_whitelisted("dynamodb"):
        return None  # moto's own path raises ServiceNotWhitelisted, as it always has
    body = request.body if isinstance(request.body, bytes) else _text(request.body or "")
    handler = DynamoHandler()
    region = endpoint.group(1)
    operation = get_service_model("dynamodb").operation_model(target[len(_TARGET_PREFIX) :])
    parser = PROTOCOL_PARSERS["json"](operation, map_type=handler.PROTOCOL_PARSER_MAP_TYPE)
    handler.params = parser.parse(
        {
            "method": "POST",
            "values": {},
            "headers": headers,
            "body": body,
            "url_path": "/",
            "url_params": {},
        }
    )
    handler.body = handler.raw_body = body
    handler.headers = headers
    handler.querystring = handler.data = {}
    handler.uri = request.url
    handler.path = handler.raw_path = "/"
    handler.method = "POST"
    handler.region = region
    handler.partition = get_partition(region)
    handler.uri_match = {}
    handler.response_headers = {"server": "amazon.com", "date": http_date(utcnow())}
    handler.access_key = handler.get_access_key()
    handler.current_account = handler.get_current_account()
    mark_account_as_visited(
        account_id=handler.current_account,
        access_key=handler.access_key,
        service="dynamodb",
        region=region,
    )
    status, response_headers, response_body = handler.call_action()
    return status, response_headers, response_body


def install() -> None:
    """List each handler's methods once (for every service moto answers); again is a no-op."""
    listed = moto_responses.method_names_from_class
    if not hasattr(listed, "cache_info"):
        moto_responses.method_names_from_class = functools.cache(listed)  # type: ignore[assignment]
