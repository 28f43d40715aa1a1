"""The backfill lease (docs/control-contract.md, "The backfill lease"): one run at a time, held
in the STATE item, with the run-time throttle and pause flag the holder follows.

  grant     the lease's conditional writes: acquire, heartbeat, release (with the completion),
            and the start rule every starter asks (check_startable)
  controls  the operator's throttle, pause and resume of the running backfill
  epoch     the next fencing epoch: above every epoch the record holds (STATE, fence slot 0)
  events    the EVENT item each of those writes leaves behind (an audit trail,
            `record_control_event`; the backfill's fence clearing leaves one too),
            `lease_released` (did a release land: its EVENT item), and `nonblank`, the texts
            they record (holder, token, changed_by, reason)
  errors    what the lease refuses with: held, not yet effective, wrong direction, lost; an
            acquire whose outcome is unknown

The run side (a run under its lease: taken, heartbeated applying the throttle and pause,
released with its completion) is layout_change.backfill.keeper: it drives the backfill's pacing,
and the backfill is the room above this one.

None of these writes bump `version`: a heartbeat must never make a racing `phase set` lose its
compare-and-set.
"""

from saga_index.layout_change.lease.controls import (
    clear_throttle,
    pause_backfill,
    resume_backfill,
    set_throttle,
)
from saga_index.layout_change.lease.errors import (
    LeaseDirectionError,
    LeaseHeldError,
    LeaseLostError,
    LeaseNotYetEffectiveError,
)
from saga_index.layout_change.lease.events import (
    lease_released,
    nonblank,
    record_control_event,
)
from saga_index.layout_change.lease.grant import (
    LEASE_TTL_SECONDS,
    acquire_lease,
    backfill_layouts,
    check_startable,
    heartbeat_lease,
    new_lease_token,
    release_lease,
)
from saga_index.layout_change.lease.kinds import (
    open_index_direction,
    open_index_layouts,
    require_open_index_settled,
)

__all__ = [
    "LEASE_TTL_SECONDS",
    "LeaseDirectionError",
    "LeaseHeldError",
    "LeaseLostError",
    "LeaseNotYetEffectiveError",
    "acquire_lease",
    "backfill_layouts",
    "check_startable",
    "clear_throttle",
    "heartbeat_lease",
    "lease_released",
    "new_lease_token",
    "nonblank",
    "open_index_direction",
    "open_index_layouts",
    "pause_backfill",
    "record_control_event",
    "release_lease",
    "require_open_index_settled",
    "resume_backfill",
    "set_throttle",
]
