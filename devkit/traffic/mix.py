"""The rates of the ADR's traffic mix; every rate is a parameter (defaults in docs/demo.md).

The ADR names what converges on the one GSI4 partition; each is an event kind of the plan:

  list-page     the renewals LIST page: each property manager's page polls every 3-5 s and
                every load fans out one by-person read per tenant with a renewal in flight.
  sweep         the four periodic sweeps (saga_index.index.jobs.SWEEPS), each one
                get_all_open_sagas(). By default they fire together every 60 s, as unstaggered
                crons do.
  transition    Temporal workflow writes: a saga moves to its next open state (Poisson).
  cohort        the cohort walker opening a batch of new sagas in the same second.
  inbound       Clara's inbound paths: each message does by-person reads of its sender.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from saga_index.index import SWEEP_NAMES, InvalidInputError


@dataclass(frozen=True)
class SweepSpec:
    name: str
    period_s: int = 60
    offset_s: int = 0


@dataclass(frozen=True)
class TrafficMix:
    """Rates of the ADR's traffic mix. Defaults model one production property-management team."""

    duration_s: int = 120
    # Renewals list page: this many property managers keep it open (capped at the dataset's).
    property_managers: int = 6
    poll_interval_s: tuple[float, float] = (3.0, 5.0)
    # The four sweeps; all at offset 0 means they coincide, as the ADR describes.
    sweeps: tuple[SweepSpec, ...] = tuple(SweepSpec(name) for name in SWEEP_NAMES)
    # Workflow state transitions per second (Poisson).
    transitions_per_s: float = 2.0
    # Cohort walker: this many sagas opened in the same second, every period.
    cohort_size: int = 40
    cohort_period_s: int = 60
    cohort_offset_s: int = 0
    # Inbound messages per second (Poisson); each does this many by-person reads of its sender
    # (conversation-manager, signal-bridge, ... each read the sender's sagas).
    inbound_messages_per_s: float = 3.0
    reads_per_message: int = 2
    # Share of inbound messages from persons with a renewal in flight (the rest: anyone).
    inbound_open_share: float = 0.8
    seed: int = 85

    def validate(self) -> TrafficMix:
        if self.duration_s < 1:
            raise InvalidInputError(f"duration_s must be >= 1, got {self.duration_s}")
        low, high = self.poll_interval_s
        if not 0 < low <= high:
            raise InvalidInputError(
                f"poll_interval_s must be (low, high) with 0 < low <= high, got {(low, high)}"
            )
        for name in (
            "property_managers",
            "cohort_size",
            "reads_per_message",
            "transitions_per_s",
            "inbound_messages_per_s",
        ):
            if getattr(self, name) < 0:
                raise InvalidInputError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.cohort_period_s < 1 or any(s.period_s < 1 for s in self.sweeps):
            raise InvalidInputError("every period must be at least 1 s")
        if not 0 <= self.inbound_open_share <= 1:
            raise InvalidInputError("inbound_open_share must be a fraction of 1")
        return self

    def scaled(self, factor: int) -> TrafficMix:
        """The traffic of `factor` times the dataset: more managers, workflows and messages.

        The sweeps stay four: each reads `factor` times more rows instead.
        """
        return replace(
            self,
            property_managers=self.property_managers * factor,
            transitions_per_s=self.transitions_per_s * factor,
            cohort_size=self.cohort_size * factor,
            inbound_messages_per_s=self.inbound_messages_per_s * factor,
        )
