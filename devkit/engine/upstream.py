"""The proxy's side of the wire to dynalite: a pool of keep-alive connections, and the
DynamoDB JSON protocol as the server speaks it.

dynalite checks that a request is signed (an Authorization header of the SigV4 shape) but not
the signature: the proxy's own requests carry a fixed one. A client's request is forwarded with
its own headers.
"""

from __future__ import annotations

import json
import uuid
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from devkit.semantics.model import Refusal
from devkit.semantics.wire import wire_body

TARGET_PREFIX = "DynamoDB_20120810."
CONTENT_TYPE = "application/x-amz-json-1.0"
_OWN_HEADERS = {
    "Content-Type": CONTENT_TYPE,
    "Authorization": (
        "AWS4-HMAC-SHA256 Credential=local/20260101/us-east-1/dynamodb/aws4_request, "
        "SignedHeaders=host;x-amz-date;x-amz-target, Signature=0"
    ),
    "X-Amz-Date": "20260101T000000Z",
}
# Hop-by-hop and length headers: aiohttp sets its own on the forwarded request.
_DROPPED = frozenset({"host", "content-length", "connection", "keep-alive", "transfer-encoding"})
# What a response keeps of the server's headers when the proxy answers with its body unchanged.
KEPT_RESPONSE_HEADERS = ("Content-Type", "x-amzn-RequestId", "x-amz-crc32")
# Connections kept open to the server: a backfill runs up to 64 segments, each with one request
# in flight, plus the lease keeper, the operator and the proxy's own reads.
POOL_SIZE = 128


@dataclass(frozen=True)
class Reply:
    """One answer of the server: its status, body and the headers worth passing on."""

    status: int
    body: bytes
    headers: Mapping[str, str]

    @property
    def ok(self) -> bool:
        return self.status < 300

    def json(self) -> dict[str, Any]:
        document: dict[str, Any] = json.loads(self.body or b"{}")
        return document

    @property
    def error_code(self) -> str | None:
        if self.ok:
            return None
        kind = str(self.json().get("__type", ""))
        return kind.rpartition("#")[2] or None


def crc32_header(body: bytes) -> str:
    """The x-amz-crc32 DynamoDB sends: botocore checks it when present."""
    return str(zlib.crc32(body) & 0xFFFFFFFF)


def json_reply(status: int, document: Mapping[str, Any], **headers: str) -> Reply:
    body = json.dumps(document).encode()
    return Reply(
        status,
        body,
        {"Content-Type": CONTENT_TYPE, "x-amz-crc32": crc32_header(body), **headers},
    )


class Upstream:
    """Requests to the server behind the proxy, on a pool of keep-alive connections."""

    def __init__(self, endpoint_url: str, *, pool_size: int = POOL_SIZE) -> None:
        self.endpoint_url = endpoint_url.rstrip("/") + "/"
        self._pool_size = pool_size
        self._session: aiohttp.ClientSession | None = None

    async def open(self) -> None:
        connector = aiohttp.TCPConnector(limit=self._pool_size, keepalive_timeout=30)
        self._session = aiohttp.ClientSession(
            connector=connector, timeout=aiohttp.ClientTimeout(total=60)
        )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def forward(self, headers: Mapping[str, str], body: bytes) -> Reply:
        """A client's request as it came (its own headers and body)."""
        kept = {k: v for k, v in headers.items() if k.lower() not in _DROPPED}
        return await self._post(kept, body)

    async def call(self, operation: str, params: Mapping[str, Any]) -> Reply:
        """One request of the proxy's own (a read, a transaction's step)."""
        headers = {**_OWN_HEADERS, "X-Amz-Target": TARGET_PREFIX + operation}
        return await self._post(headers, json.dumps(params).encode())

    async def _post(self, headers: Mapping[str, str], body: bytes) -> Reply:
        assert self._session is not None, "Upstream.open() first"
        async with self._session.post(self.endpoint_url, data=body, headers=headers) as response:
            data = await response.read()
            kept = {k: response.headers[k] for k in KEPT_RESPONSE_HEADERS if k in response.headers}
            return Reply(response.status, data, kept)


class UpstreamError(Exception):
    """The server refused a request the proxy made on its own: its answer goes to the client."""

    def __init__(self, reply: Reply) -> None:
        super().__init__(reply.body[:200])
        self.reply = reply


def refusal_reply(refusal: Refusal) -> Reply:
    """A refusal as DynamoDB sends it: status, x-amzn-ErrorType and the JSON error body."""
    body = wire_body(refusal)
    return Reply(
        refusal.status,
        body,
        {
            "Content-Type": CONTENT_TYPE,
            "x-amzn-ErrorType": refusal.code,
            "x-amzn-RequestId": str(uuid.uuid4()),
            "x-amz-crc32": crc32_header(body),
        },
    )
