"""The parity verifier: do the readers return exactly what the base table holds, or what they
returned at a snapshot? (docs/observability.md, "The CLI", `saga-index verify`.)

  _verifier  the run: the base table read, the reads along a routing, the re-check of what
             differs; which persons' by-person reads it checks (a seeded sample)
  _compare   the reads judged against the base table (missing, extra, misrouted) or against a
             snapshot (changed since, or missing)
  _snapshot  the snapshot document: what each read returned at one moment
  _report    what a run reports
"""

from saga_index.layout_change.checks.parity._report import Finding, ParityReport
from saga_index.layout_change.checks.parity._snapshot import Snapshot
from saga_index.layout_change.checks.parity._verifier import (
    DEFAULT_RECHECK_DELAY_SECONDS,
    DEFAULT_SAMPLE,
    ParityVerifier,
)

__all__ = [
    "DEFAULT_RECHECK_DELAY_SECONDS",
    "DEFAULT_SAMPLE",
    "Finding",
    "ParityReport",
    "ParityVerifier",
    "Snapshot",
]
