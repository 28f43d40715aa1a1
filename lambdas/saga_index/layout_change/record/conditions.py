"""The conditions the control items' writes hold, each named for what it keeps true: the
record's compare-and-set, the history's intent rules, and the items written once. The store
(store.py) writes with them; the lease's writes (lease/grant.py, lease/controls.py) combine them
with their own.
"""

from __future__ import annotations

from typing import Final

from saga_index.index import TABLE_PARTITION_KEY, TABLE_SORT_KEY
from saga_index.layout_change.record.history import HISTORY_ABANDONED, HISTORY_APPLIED
from saga_index.layout_change.record.items import LAYOUT, VERSION
from saga_index.store.dynamo import Expression, attribute_fragment

# The first transition creates the STATE item; a second operator doing the same must lose.
NO_STATE_YET: Final = attribute_fragment(
    f"attribute_not_exists(#{TABLE_PARTITION_KEY})", TABLE_PARTITION_KEY
)
# Compare-and-set: nobody changed the layout since this writer read version :expectedVersion.
STILL_THE_VERSION_READ: Final = attribute_fragment(
    f"#{VERSION} = :expectedVersion", VERSION, slots=(":expectedVersion",)
)
# Backfill controls change an existing record only: an update would otherwise create a STATE
# item without a layout, which no reader could follow.
STATE_EXISTS: Final = attribute_fragment(f"attribute_exists(#{LAYOUT})", LAYOUT)
# An EVENT or restored STATE item is written once and never overwritten (repeats are no-ops).
NOT_WRITTEN_YET: Final = attribute_fragment(
    f"attribute_not_exists(#{TABLE_PARTITION_KEY})", TABLE_PARTITION_KEY
)
# A STATE item that does not parse is replaced only while it is still the one read.
NO_VERSION_STORED: Final = attribute_fragment(f"attribute_not_exists(#{VERSION})", VERSION)
STILL_THE_VERSION_STORED: Final = attribute_fragment(
    f"#{VERSION} = :storedVersion", VERSION, slots=(":storedVersion",)
)
# An intent is taken over or marked abandoned only while it is the exact unapplied item its
# writer saw (its changedAt and changedBy).
STILL_THE_UNAPPLIED_INTENT_SEEN: Final = attribute_fragment(
    f"#{HISTORY_APPLIED} = :notApplied AND #changedAt = :seenAt AND #changedBy = :seenBy",
    HISTORY_APPLIED,
    "changedAt",
    "changedBy",
    slots=(":notApplied", ":seenAt", ":seenBy"),
)
MARK_ABANDONED: Final = attribute_fragment(
    f"#{HISTORY_ABANDONED} = :yes", HISTORY_ABANDONED, slots=(":yes",)
)
# The items of one kind: the control partition, sort keys under a prefix.
ITEMS_UNDER_PREFIX: Final = Expression(
    "#pk = :pk AND begins_with(#sk, :prefix)",
    names={"#pk": TABLE_PARTITION_KEY, "#sk": TABLE_SORT_KEY},
    slots=frozenset({":pk", ":prefix"}),
)
