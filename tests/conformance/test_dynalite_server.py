"""The dynalite process a test starts is its own: a port taken between free_port() and the bind
(a parallel worker's server) is retried on another, never silently shared."""

from __future__ import annotations

import pytest

from devkit.dynalite import DynaliteServer

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
