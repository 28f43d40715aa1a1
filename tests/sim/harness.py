"""The world's surroundings: moto's in-process mock, fake credentials, and one substitution that
keeps a run deterministic.

The code under test reads enumeration partitions and Scan segments on a thread pool. Pool
threads would make requests in an order the operating system picks, so while a simulation runs
the pool is replaced by one that runs each submitted read at once, in submission order, on the
submitting thread: the same reads, the same merge, one at a time (the interleaving with other
processes, which is what the protocol is about, stays the scheduler's).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any
from unittest import mock

from moto import mock_aws

from tests.support import moto_dispatch, moto_responses, moto_values

if TYPE_CHECKING:
    from tests.sim.outcome import Outcome
    from tests.sim.world import Scenario


class SerialExecutor:
    """A ThreadPoolExecutor's submit/with interface, running each call at once."""

    def __init__(self, *_: Any, **__: Any) -> None:
        pass

    def __enter__(self) -> SerialExecutor:
        return self

    def __exit__(self, *_: object) -> None:
        return None

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as err:  # noqa: BLE001 - delivered through the future, as a pool does
            future.set_exception(err)
        return future

    def shutdown(self, wait: bool = True) -> None:
        return None


@contextlib.contextmanager
def simulated_aws() -> Iterator[None]:
    # `python -m tests.sim` runs without tests/conftest.py, which installs these for pytest.
    moto_responses.install()
    moto_values.install()
    moto_dispatch.install()
    env = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    with (
        mock.patch.dict(os.environ, env),
        mock_aws(),
        mock.patch("saga_index.store.partitions.ThreadPoolExecutor", SerialExecutor),
        mock.patch("saga_index.store.dynamo.scan.ThreadPoolExecutor", SerialExecutor),
    ):
        # The code under test logs every fault it meets; the trace says what happened.
        logging.disable(logging.CRITICAL)
        try:
            yield
        finally:
            logging.disable(logging.NOTSET)


def explain(outcome: Outcome) -> str:
    """A run's report, printed (pytest shows it with the failure) and returned for the assert."""
    text = outcome.report()
    print(text)
    return text


def first_violation(scenario: Scenario, seeds: range, kinds: set[str]) -> Outcome | None:
    """The first run of `seeds` under `scenario` that finds a violation of one of `kinds`."""
    from tests.sim.world import simulate

    for seed in seeds:
        with simulated_aws():
            outcome = simulate(seed, scenario)
        found = [v for v in outcome.violations if v.kind in kinds]
        if found:
            print(f"seed {seed} found: {found[0]}")
            return outcome
    return None
