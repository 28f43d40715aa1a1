"""The lost-record rule's probe (docs/control-contract.md, "A lost record"): when there is no
STATE item and what a reader would follow instead reads only the legacy key (never migrated, a
control partition deleted after a migration, or a STATE item lost whose move history does not
confirm), a few shard keys are read before that answer is believed. A row there means the record
was lost after a move, and answering from the empty legacy key would hide every row.

`ControlStore.refuse_if_lost` asks it for a state as read (`history.needs_lost_record_probe`
says when); the TypeScript package's `readControlState` probes the same keys.
"""

from __future__ import annotations

from typing import Any, Final

from saga_index.index import INDEX_PARTITION_KEY, TABLE_PARTITION_KEY, sharded_gsi4pk
from saga_index.layout_change.record.errors import ControlRecordLostError
from saga_index.store import partition_rows

# The shard keys probed before "never migrated" is believed: #0 is a key of every sharded(N),
# and the first few keys of any N carry rows unless the table has very few persons for its N.
LOST_RECORD_PROBE_KEYS: Final = tuple(sharded_gsi4pk(n) for n in range(4))


def refuse_a_lost_record(
    client: Any, table_name: str, index_name: str, *, history_version: int = 0
) -> None:
    """One index Query (`Limit = 1`, keys only) per LOST_RECORD_PROBE_KEYS key, stopping at the
    first row: a row there raises ControlRecordLostError (`history_version`: the newest HISTORY
    item's version, 0 when there is none)."""
    for requests, gsi4pk in enumerate(LOST_RECORD_PROBE_KEYS, start=1):
        rows = partition_rows(
            client,
            table_name,
            gsi4pk,
            attributes=(INDEX_PARTITION_KEY, TABLE_PARTITION_KEY),
            index_name=index_name,
            limit=1,
        )
        row = next(rows, None)
        if row is not None:
            pk = row.get(TABLE_PARTITION_KEY, "?")
            raise ControlRecordLostError(gsi4pk, str(pk), requests, history_version=history_version)
