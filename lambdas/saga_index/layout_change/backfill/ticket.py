"""The run's ticket: what every step of one run carries (the move and the lease it holds)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from saga_index.layout_change.backfill.move import Move
from saga_index.layout_change.backfill.payload import LayoutSpec, Payload
from saga_index.layout_change.record.state import BackfillDirection
from saga_index.layout_change.record.times import format_time
from saga_index.layout_change.record.timing import utc_now


class RunTicket(Payload):
    """What every step of one run carries: the move the control record named when the run
    started, and the lease it holds (none for a dry run, which writes nothing)."""

    direction: BackfillDirection
    source: LayoutSpec
    target: LayoutSpec
    # The record's version the run started under: the lease's heartbeat fails once it moves on.
    state_version: Annotated[int, Field(strict=True, ge=0)]
    holder: str = Field(min_length=1)
    lease_token: str | None = None
    # UTC ISO-8601 with milliseconds (record.times.format_time): the completion's startedAt.
    started_at: str

    @classmethod
    def of(
        cls,
        move: Move,
        *,
        state_version: int,
        holder: str,
        lease_token: str | None,
        started_at: str,
    ) -> RunTicket:
        return cls(
            direction=move.direction,
            source=LayoutSpec.of(move.source),
            target=LayoutSpec.of(move.target),
            state_version=state_version,
            holder=holder,
            lease_token=lease_token,
            started_at=started_at,
        )

    @classmethod
    def unleased(cls, move: Move, *, holder: str = "unleased") -> RunTicket:
        """A ticket for a run outside the control record (benchmarks, tests of the runner):
        no lease is held and nothing checks the record, so only use it on a table no one else
        is migrating."""
        return cls.of(
            move,
            state_version=0,
            holder=holder,
            lease_token=UNLEASED_TOKEN,
            started_at=format_time(utc_now()),
        )

    def move(self) -> Move:
        return Move(self.direction, self.source.layout(), self.target.layout())


UNLEASED_TOKEN = "unleased"  # noqa: S105 (a marker, not a secret)
