"""The world's surroundings: moto's in-process mock, fake credentials, and one substitution that
keeps a run deterministic.

The code under test reads enumeration partitions and Scan segments on a thread pool. Pool
threads would make requests in an order the operating system picks, so while a simulation runs
the pool is replaced by one that runs each submitted read at once, in submission order, on the
submitting thread: the same reads, the same merge, one at a time (the interleaving with other
processes, which is what the protocol is about, stays the scheduler's); the arming of a run's
fence slots runs on one thread, slot after slot, for the same reason. Two more keep it
affordable and answer the same: moto's handler called without its HTTP detour (moto_direct),
and a transaction's rollback backed up item by item, not table by table (moto_rollback).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any
from unittest import mock

from moto import mock_aws

from tests.sim import moto_rollback
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


class OneAtATime:
    """A ThreadPoolExecutor's with/map interface for arming fence slots: the calls run one
    after another in submission order on one helper thread, off the calling task (as a pool's
    are: not steps of the schedule), and the first that raises ends the map, as a pool's map
    cancels what has not started. A pool of several threads, or of one racing the caller's
    cancellation, armed a number of slots that varied from run to run, and each request draws
    the table's faults: a seed did not replay."""

    def __init__(self, *_: Any, **__: Any) -> None:
        pass

    def __enter__(self) -> OneAtATime:
        return self

    def __exit__(self, *_: object) -> None:
        return None

    def map(self, fn: Callable[..., Any], *iterables: Any) -> Iterator[Any]:
        results: list[Any] = []
        errors: list[BaseException] = []

        def run() -> None:
            for args in zip(*iterables, strict=True):
                try:
                    results.append(fn(*args))
                except BaseException as err:  # noqa: BLE001 - raised on the caller's thread
                    errors.append(err)
                    return

        helper = threading.Thread(target=run, name="sim-fence-arming")
        helper.start()
        helper.join()
        if errors:
            raise errors[0]
        return iter(results)


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
        # Arming a run's fence slots: one slot after another, whatever the run's segments.
        mock.patch("saga_index.layout_change.backfill.slots.ThreadPoolExecutor", OneAtATime),
        moto_rollback.keyed_rollback(),
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
