"""What one run found: its violations, its trace (the step list) and how to replay it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from devkit.semantics.model import Stats
from tests.sim.checker import Violation

if TYPE_CHECKING:
    from tests.sim.world import Scenario


@dataclass
class Outcome:
    seed: int
    scenario: Scenario
    violations: list[Violation]
    trace: list[str]
    steps: int
    reads_checked: int
    phases: list[str]
    # How many of the reads checked were enumerations of open sagas from the open index.
    open_index_reads: int = 0
    # What DynamoDB's rules refused on the way (devkit.semantics): conflicts, throttles.
    semantics: Stats = field(default_factory=Stats)

    @property
    def conflicts(self) -> int:
        """Requests refused for a transaction conflict (single writes and transactions)."""
        return sum(self.semantics.conflicts.values())

    @property
    def key_throttles(self) -> int:
        """Requests throttled for a key's ceiling (a KeyRangeThroughputExceeded reason)."""
        return sum(n for reason, n in self.semantics.throttles.items() if "KeyRange" in reason)

    @property
    def ok(self) -> bool:
        return not self.violations

    def _schedule_flag(self) -> str:
        name = self.scenario.schedule
        return f"--schedule {name}" if name else f"--plan {self.scenario.plan}"

    def report(self, tail: int = 60) -> str:
        lines = [
            f"simulation seed {self.seed} ({self.scenario.plan}): {len(self.violations)} "
            f"violation(s) after {self.steps} steps, {self.reads_checked} reads checked; "
            f"phases {' -> '.join(self.phases)}",
            *(f"  {v}" for v in self.violations[:10]),
            f"replay: python -m tests.sim --seed {self.seed} {self._schedule_flag()} --trace",
            f"last {min(tail, len(self.trace))} of {len(self.trace)} steps:",
            *self.trace[-tail:],
        ]
        return "\n".join(lines)
