"""`saga-index backfill --stop` for a run that held the lease from an operator's shell (a local
run, `user@host/pid`) and died without releasing it (SIGKILL, a closed laptop): release its
lease once its holder is provably gone, refuse while it may still be writing.

A holder is provably gone when
  - its process is gone: it ran on this host and no process has its pid any more; or
  - its last heartbeat is older than DEAD_AFTER_SECONDS: a run whose heartbeats have not
    reached the record for half the lease's TTL stops writing by its own rule (the lease
    keeper gives the lease up, and the lease fence refuses its writes by the age of the last
    good heartbeat: backfill.fence.default_max_heartbeat_age is at most TTL / 2).
While neither holds, `--stop` is "not yet" (exit 5) with the time the heartbeat rule will hold.
"""

from __future__ import annotations

import logging
import os
import re
import socket
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

import click

from saga_index.index import RetryLaterError
from saga_index.layout_change.backfill import token_for_execution
from saga_index.layout_change.lease import LEASE_TTL_SECONDS, release_lease
from saga_index.layout_change.record import BackfillKind, Lease, format_time
from saga_index_cli.backfill.output import EXIT_CLEAN
from saga_index_cli.context import CliContext
from saga_index_cli.output import emit

log = logging.getLogger("saga_index.cli.backfill")

DEAD_AFTER_SECONDS: Final = LEASE_TTL_SECONDS / 2
# The holder a local run writes (backfill.local.local_holder): user@host/pid.
_LOCAL_HOLDER = re.compile(r"(?P<user>[^@/]+)@(?P<host>[^/]+)/(?P<pid>[0-9]+)")


class LocalHolderAliveError(RetryLaterError):
    """The lease's local holder may still be writing: its heartbeat is fresh (exit 5)."""


def is_execution_lease(lease: Lease) -> bool:
    """Does a Step Functions execution hold `lease` (its token is derived from its ARN)?"""
    return lease.token == token_for_execution(lease.holder)


def process_gone(holder: str) -> bool:
    """True when `holder` ran on this host and no process has its pid now; False when it
    runs, or ran elsewhere (nothing here can tell)."""
    match = _LOCAL_HOLDER.fullmatch(holder)
    if match is None or match["host"] != socket.gethostname():
        return False
    pid = int(match["pid"])
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # another user's live process
    return False


@dataclass(frozen=True)
class LocalRelease:
    """What `--stop` did to a local run's lease."""

    holder: str
    heartbeat_at: datetime
    why_gone: str
    kind: BackfillKind = BackfillKind.LAYOUT

    def to_json(self) -> dict[str, Any]:
        return {
            "holder": self.holder,
            "heartbeatAt": format_time(self.heartbeat_at),
            "leaseReleased": True,
            "why": self.why_gone,
            "kind": self.kind.value,
        }

    def lines(self) -> list[str]:
        if self.kind is BackfillKind.OPEN_INDEX:
            run, again = "open-index backfill", "`saga-index open-index backfill`"
        else:
            run, again = "backfill", "the backfill"
        return [
            f"released the {run} lease of {self.holder!r} ({self.why_gone})",
            "what it re-stamped stays re-stamped and nothing is half-written; no completion "
            f"was recorded. Run {again} again to finish the move: it converges",
        ]


def release_dead_local_lease(cli: CliContext, lease: Lease, as_json: bool) -> int:
    """Release `lease` (a local run's) when its holder is provably gone; LocalHolderAliveError
    (exit 5, retry at heartbeat + DEAD_AFTER_SECONDS) while it may still write."""
    now = cli.now()
    dead_at = lease.heartbeat_at + timedelta(seconds=DEAD_AFTER_SECONDS)
    if process_gone(lease.holder):
        why = f"its process {lease.holder.rsplit('/', 1)[-1]} is gone from this host"
    elif now >= dead_at:
        age = (now - lease.heartbeat_at).total_seconds()
        why = (
            f"no heartbeat for {age:.0f} s, more than {DEAD_AFTER_SECONDS:.0f} s: it writes no more"
        )
    else:
        raise LocalHolderAliveError(
            f"the backfill lease is held by {lease.holder!r}, which heartbeated at "
            f"{format_time(lease.heartbeat_at)}: it may still be writing. Stop it where it "
            "runs (Ctrl-C in its terminal), or, if it died, run `saga-index backfill --stop` "
            f"again after {format_time(dead_at)}",
            retry_at=dead_at,
        )
    release_lease(cli.control_store(), token=lease.token, clock=cli.hooks.clock)
    log.warning("released the lease of %s: %s", lease.holder, why)
    outcome = LocalRelease(lease.holder, lease.heartbeat_at, why, lease.kind)
    if as_json:
        emit(outcome.to_json())
    else:
        click.echo("\n".join(outcome.lines()))
    return EXIT_CLEAN


def nothing_holds_the_lease(cli: CliContext, as_json: bool) -> int:
    """`--stop` without an ARN while no run holds the lease: no local lease to release, and no
    execution to find through the stack (CloudFormation is not asked). Exit 0: nothing holds
    the lease; the advice names how to stop an execution that has not taken it yet."""
    prefix = cli.command_prefix()
    message = (
        "no backfill lease is held: no local run holds it and no Step Functions execution "
        f"does, so there is nothing to release. `{prefix} status` shows the last run. An "
        "execution that has not taken the lease yet is stopped by its ARN: "
        f"`{prefix} backfill --stop EXECUTION_ARN`"
    )
    if as_json:
        emit({"leaseHeld": False, "leaseReleased": False, "stopped": False, "message": message})
    else:
        click.echo(message)
    return EXIT_CLEAN
