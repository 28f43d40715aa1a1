"""The dynalite process a test starts is its own: a port taken between free_port() and the bind
(a parallel worker's server) is retried on another, never silently shared; and it outlives a
client that hangs up in the middle of a request."""

from __future__ import annotations

import socket
import time

import pytest

from devkit.dynalite import DynaliteServer
from saga_index.store.dynamo.client import make_client

pytestmark = pytest.mark.conformance


def test_given_the_chosen_port_is_taken_when_started_then_it_listens_on_another() -> None:
    with DynaliteServer() as first:
        second = DynaliteServer()
        second.port = first.port  # as if another worker bound it first
        try:
            second.start()
            assert second.port != first.port
            assert second.endpoint_url.endswith(f":{second.port}")
        finally:
            second.stop()


def test_given_a_port_the_caller_named_is_taken_then_start_fails_naming_it() -> None:
    with DynaliteServer() as first:
        taken = DynaliteServer(port=first.port)
        with pytest.raises(RuntimeError, match=f"(?s)port {first.port}.*EADDRINUSE"):
            taken.start(timeout=10)


def test_given_a_client_hangs_up_mid_request_then_the_server_answers_the_next_one() -> None:
    # A process killed while it sends a request (tests/conformance/test_backfill_kill.py) must
    # not end the server the other tests of its worker share: dynalite itself rethrows the
    # aborted request's error and exits (devkit/node/dynalite-hangup.cjs drops it).
    with DynaliteServer() as server:
        with socket.create_connection(("127.0.0.1", server.port)) as hung_up:
            hung_up.sendall(
                b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/x-amz-json-1.0\r\n"
                b"X-Amz-Target: DynamoDB_20120810.ListTables\r\n"
                b"Content-Length: 1000\r\n\r\n{"
            )
            time.sleep(0.2)  # the server has read the headers and part of the body
        client = make_client(region="us-east-1", endpoint_url=server.endpoint_url, max_attempts=1)

        assert client.list_tables()["TableNames"] == []
        assert f"port {server.port}: running (pid " in server.status()
