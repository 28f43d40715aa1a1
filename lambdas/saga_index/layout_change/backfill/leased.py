"""A run under its lease, built once: the fence every re-stamp goes through and the keeper that
heartbeats the lease, wired to each other. The Step Functions worker (steps.run_leased_segment,
one invocation of one segment) and the local run (local.backfill_locally, every segment in this
process) both build theirs here; what differs between them is a parameter (the segment's share
of the run's cap, the clocks, whether the server has transactions), and so is what a fenced
re-stamp proves the lease by (`check`, a fence.FenceCheck: the product's SlotCheck unless a
harness passes another).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from saga_index.layout_change.backfill.fence import SLOT_CHECK, FenceCheck, LeaseFence
from saga_index.layout_change.backfill.keeper import CONTROL_POLL_SECONDS, LeaseKeeper
from saga_index.layout_change.backfill.pacing import TokenBucket, Wait, event_wait, sleeper
from saga_index.layout_change.backfill.wire import RunTicket
from saga_index.layout_change.lease import LEASE_TTL_SECONDS, LeaseLostError
from saga_index.layout_change.record import ControlState, ControlStore, WallClock, utc_now

# The least heartbeat age the clock fence allows (default_max_heartbeat_age).
MIN_HEARTBEAT_AGE_SECONDS: Final = 2.0


@dataclass(frozen=True)
class LeasedRun:
    """The fence and the keeper of one leased run (or one Lambda invocation of it)."""

    fence: LeaseFence
    keeper: LeaseKeeper


def leased_run(
    client: Any,
    store: ControlStore,
    ticket: RunTicket,
    bucket: TokenBucket,
    *,
    own_rate: float,
    stop: threading.Event,
    share: Callable[[float], float] = lambda total: total,
    run_rate: float | None = None,
    clock: WallClock = utc_now,
    ttl_seconds: float = LEASE_TTL_SECONDS,
    poll_seconds: float = CONTROL_POLL_SECONDS,
    transactional: bool = True,
    check: FenceCheck = SLOT_CHECK,
    on_control: Callable[[ControlState], None] | None = None,
    monotonic: Callable[[], float] = time.monotonic,
    pace_label: str = "",
    wait: Wait = event_wait,
) -> LeasedRun | None:
    """The fence and keeper of the run `ticket` names: the fence judges the re-stamps sent on
    `client`, the keeper heartbeats through `store` (the same table; its own client where the
    caller wants the heartbeats apart). None for a ticket without a lease (a dry run writes
    nothing). `own_rate`, `share` and `run_rate`
    say how the record's throttle reaches this bucket (the keeper); `stop` is set when the
    lease is lost; `check` is what each fenced re-stamp condition-checks; `monotonic` is the
    clock heartbeat ages are measured on, and `wait` how both wait on it (the keeper's period,
    the fence's backoffs and pace); `pace_label` goes before the pace each heartbeat reports
    (which segment's, in Step Functions)."""
    token = ticket.lease_token
    if token is None:
        return None
    fence = fence_for_run(
        client,
        store.table_name,
        token=token,
        state_version=ticket.state_version,
        epoch=ticket.lease_epoch,
        ttl_seconds=ttl_seconds,
        poll_seconds=poll_seconds,
        transactional=transactional,
        clock=clock,
        monotonic=monotonic,
        sleep=sleeper(wait),
        check=check,
    )
    keeper = LeaseKeeper(
        store,
        token,
        bucket,
        own_rate=own_rate,
        share=share,
        run_rate=run_rate,
        stop=stop,
        clock=clock,
        ttl_seconds=ttl_seconds,
        poll_seconds=poll_seconds,
        fence=fence,
        on_apply=on_control,
        monotonic=monotonic,
        pace_label=pace_label,
        wait=wait,
    )
    return LeasedRun(fence, keeper)


def fence_for_run(
    client: Any,
    table_name: str,
    *,
    token: str,
    state_version: int,
    ttl_seconds: float,
    poll_seconds: float,
    epoch: int | None = None,
    transactional: bool = True,
    clock: WallClock = utc_now,
    monotonic: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] = time.sleep,
    check: FenceCheck = SLOT_CHECK,
) -> LeaseFence:
    """The fence of a run holding `token` under `state_version` with lease epoch `epoch`, on
    the given clocks (the wall clock, the monotonic clock, and the sleep between conflict
    retries). Transactional without an epoch (a ticket planned before epochs): the STATE item
    is read once (strongly consistent) for the epoch of the lease this token holds; a
    ControlError when it holds none (the run lost it, or never armed its slots)."""
    if transactional and epoch is None:
        epoch = _epoch_in_state(client, table_name, token)
    return LeaseFence(
        client,
        table_name,
        token=token,
        state_version=state_version,
        epoch=epoch,
        max_heartbeat_age=default_max_heartbeat_age(ttl_seconds, poll_seconds),
        transactional=transactional,
        clock=clock,
        monotonic=monotonic,
        sleep=sleep,
        check=check,
    )


def _epoch_in_state(client: Any, table_name: str, token: str) -> int:
    state = ControlStore(client, table_name).read()
    lease = state.lease
    if lease is None or lease.token != token:
        raise LeaseLostError(
            "this run's ticket names no fencing epoch, and "
            + ("no backfill lease is held" if lease is None else f"{lease.holder!r} holds it")
        )
    if state.lease_epoch is None:
        raise LeaseLostError(
            "the lease this run holds has no fencing epoch (`leaseEpoch`): its fence slots "
            "were never armed; start the run again"
        )
    return state.lease_epoch


def default_max_heartbeat_age(ttl_seconds: float, poll_seconds: float) -> float:
    """How old the last good heartbeat may be at a write: four heartbeat periods (so one or two
    failed heartbeats do not stop a run) and at least MIN_HEARTBEAT_AGE_SECONDS (a heartbeat is
    a network call; a busy machine delays it), never more than half the lease's TTL (past that
    the lease can be taken over by a clock a little ahead)."""
    return min(ttl_seconds / 2, max(4 * poll_seconds, MIN_HEARTBEAT_AGE_SECONDS))
