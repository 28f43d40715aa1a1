"""Capacity units of a size, and the ceiling of one partition.

Reads come in 4 KB units, writes in 1 KB units; an eventually consistent read (the default, and
every GSI read) costs half.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

KB = 1024
READ_UNIT_BYTES = 4 * KB
WRITE_UNIT_BYTES = KB
# One partition serves at most this much per second, on-demand or provisioned, GSIs included.
PARTITION_RCU_CEILING = 3000.0
PARTITION_WCU_CEILING = 1000.0


def read_units(total_bytes: int, *, consistent: bool) -> float:
    """Read units of ONE read operation over `total_bytes` (rounded up once to 4 KB)."""
    blocks = max(1, math.ceil(total_bytes / READ_UNIT_BYTES))
    return float(blocks) if consistent else blocks / 2


def item_read_units(sizes: Iterable[int], *, consistent: bool) -> float:
    """GetItem / BatchGetItem: every item is rounded up to 4 KB on its own, then summed."""
    return sum(read_units(size, consistent=consistent) for size in sizes)


def write_units(size_bytes: int) -> int:
    """Write units of one write of an item (or index entry) of `size_bytes`."""
    return max(1, math.ceil(size_bytes / WRITE_UNIT_BYTES))
