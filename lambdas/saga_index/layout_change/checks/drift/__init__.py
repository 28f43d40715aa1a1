"""The drift guard: what is wrong NOW in the index, judged against the state the control record
names (docs/observability.md, "The drift guard").

  _checker  the checker: the index reads (each key paced), the probe of the next splits' keys,
            the base-table scan
  _cursor   the cursor item that lets a read finish across runs (DriftReadIncomplete)
  _beyond   the probe of the next splits' keys (N .. 4N-1)
  _scan_check the base-table scan
  _open_check the open-saga index against the scan's rows, while it is `open`, or `adding` once
            its switch settled (the completing move's rule: checks/open_index.py)
  _schedule which scheduled runs scan the base table: every K-th (scan_due)
  _report   what a run reports (DriftReport), and what it keeps of the rows it reads while it
            reads them (exact counts, at most SAMPLE_LIMIT named rows per finding)
"""

from saga_index.layout_change.checks import RowRef
from saga_index.layout_change.checks.drift._checker import DriftChecker
from saga_index.layout_change.checks.drift._cursor import (
    CursorStore,
    DriftCursor,
    DriftReadIncomplete,
    cursor_layout,
)
from saga_index.layout_change.checks.drift._open_check import DEFAULT_OPEN_RECHECK_SECONDS
from saga_index.layout_change.checks.drift._report import DriftReport
from saga_index.layout_change.checks.drift._schedule import DEFAULT_SCAN_EVERY, scan_due

__all__ = [
    "DEFAULT_OPEN_RECHECK_SECONDS",
    "DEFAULT_SCAN_EVERY",
    "CursorStore",
    "DriftChecker",
    "DriftCursor",
    "DriftReadIncomplete",
    "DriftReport",
    "RowRef",
    "cursor_layout",
    "scan_due",
]
