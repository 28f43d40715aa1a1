"""The client every adapter gets: botocore retry mode, bounded timeouts, throttle observer."""

from __future__ import annotations

from saga_index.store.dynamo.client import attach_throttle_observer, make_client


def test_given_defaults_then_the_client_retries_throttles_and_cannot_hang_past_its_timeouts() -> (
    None
):
    client = make_client(region="us-east-1")
    config = client.meta.config
    assert config.retries == {"total_max_attempts": 10, "mode": "standard"}
    assert (config.connect_timeout, config.read_timeout) == (5.0, 30.0)
    assert config.max_pool_connections == 32


def test_given_a_client_then_it_already_has_exactly_one_throttle_observer() -> None:
    client = make_client(region="us-east-1", max_attempts=3)
    first = attach_throttle_observer(client)
    assert attach_throttle_observer(client) is first
    assert client.meta.config.retries["total_max_attempts"] == 3
