"""The invariants, checked after every step (docs/control-contract.md, "How the protocol is
checked").

  visibility   a read returns every saga row whose last write completed before the read began
               and whose index writes (in GSI4 and in the open-saga index: a delete under the
               old key, a put under the new one) were all visible by then (rows written during
               the read, or still propagating, are excused: that is the window the contract
               states); an enumeration of open sagas, over GSI4 or over the open index, returns
               no saga that was closed (and settled) before it began
  base table   no saga row is lost (every row ever written is still there) and none is
               resurrected; a backfill write changes GSI4PK and nothing else, an open-index
               backfill write OpenSagaPK and nothing else, on a row that exists
  open key     no write leaves a closed saga carrying OpenSagaPK (it would stay in the open
               index: whatever the open index's state, closing a saga removes its key)
  unread key   no saga row sits on a key the record's current state does not read for its
               person (a completing move accepted over such a row, or a stray write after one)
  quiesced     (world.py) the real drift guard is clean and every saga is visible to every reader
  report       (runbook.py) `phase set` never answers "not yet" (nothing applied) over a move
               whose STATE write landed: a lost answer is read back before it is reported
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from saga_index.index import OPEN_STATES, InvalidKeyError, keys, names
from saga_index.layout_change.record import ControlState, Routing, routing_for
from saga_index.store.dynamo import deserialize
from tests.sim.processes import ReadSeen
from tests.sim.table import SimTable, TableKey, WriteRecord


@dataclass(frozen=True)
class Violation:
    # visibility | lost | resurrected | backfill-write | unread-key | open-key | quiesced | report
    kind: str
    at: float
    detail: str

    def __str__(self) -> str:
        return f"[{self.kind}] t={self.at:.2f}s: {self.detail}"


@dataclass
class _Row:
    item: dict[str, Any]
    last_write: float


@dataclass
class Checker:
    table: SimTable
    backfill_processes: set[str] = field(default_factory=set)
    # The processes running the open-saga index's backfill (they may change OpenSagaPK only).
    stamp_processes: set[str] = field(default_factory=set)
    violations: list[Violation] = field(default_factory=list)
    rows: dict[TableKey, _Row] = field(default_factory=dict)
    reads_checked: int = 0
    # Enumerations of open sagas checked that read the open index (not GSI4).
    open_index_reads: int = 0

    def __post_init__(self) -> None:
        self.table.on_write.append(self.on_write)

    def seed(self, item: dict[str, Any]) -> None:
        self.rows[(item["PK"]["S"], item["SK"]["S"])] = _Row(deserialize(item), -1.0)

    def fail(self, kind: str, detail: str) -> None:
        self.violations.append(Violation(kind, self.table.time.now, detail))

    # ---- writes --------------------------------------------------------------------------------

    def on_write(self, record: WriteRecord) -> None:
        if not record.key[0].startswith(keys.SAGA_PK_PREFIX):
            return
        before = deserialize(record.before) if record.before else None
        after = deserialize(record.after) if record.after else None
        if after is None:
            self.fail("lost", f"{record.key} deleted by {record.process} ({record.operation})")
            return
        if before is None and record.key in self.rows:
            self.fail("resurrected", f"{record.key} re-created by {record.process}")
        owned = (
            "GSI4PK"
            if record.process in self.backfill_processes
            else names.OPEN_INDEX_PARTITION_KEY
            if record.process in self.stamp_processes
            else None
        )
        if owned is not None:
            changed = sorted(
                k for k in set(before or {}) | set(after) if (before or {}).get(k) != after.get(k)
            )
            if before is None or changed != [owned]:
                self.fail(
                    "backfill-write",
                    f"{record.process} changed {changed} of {record.key} (only {owned} may change)",
                )
        if after.get("state") not in OPEN_STATES and names.OPEN_INDEX_PARTITION_KEY in after:
            self.fail(
                "open-key",
                f"{record.process} ({record.operation}) left {record.key[0]} "
                f"{after.get('state')} with {names.OPEN_INDEX_PARTITION_KEY} = "
                f"{after[names.OPEN_INDEX_PARTITION_KEY]}: a closed saga stays in the open index",
            )
        self.rows[record.key] = _Row(after, record.at)

    # ---- reads ---------------------------------------------------------------------------------

    def on_read(self, read: ReadSeen) -> None:
        self.reads_checked += 1
        if read.kind == "open" and read.source != "GSI4":
            self.open_index_reads += 1
        for key, row in self.rows.items():
            if row.last_write >= read.began:
                continue  # written during the read: not promised
            if self.table.settles_at.get(key, 0.0) > read.began:
                continue  # its index writes were not all visible when the read began
            if not _matches(row.item, read):
                if read.kind == "open" and key in read.keys and _matches(row.item, _as_all(read)):
                    self._fail_read(read, key, row, "returned as open the closed saga")
                continue
            if key not in read.keys:
                self._fail_read(read, key, row, "missed")

    def _fail_read(self, read: ReadSeen, key: TableKey, row: _Row, what: str) -> None:
        where = f"on {row.item.get('GSI4PK')}"
        if read.kind == "open" and read.source != "GSI4":
            where += f" / {row.item.get(names.OPEN_INDEX_PARTITION_KEY)}"
        self.fail(
            "visibility",
            f"{read.process} read {read.kind}"
            f"{'' if read.person is None else ' ' + read.person} "
            f"(began {read.began:.2f}s, ended {read.ended:.2f}s, as {read.phase}, from "
            f"{read.source}) {what} {key[0]} {where} (state {row.item.get('state')}, written "
            f"{row.last_write:.2f}s, index settled {self.table.settles_at.get(key, 0.0):.2f}s)",
        )

    # ---- the base table, every step --------------------------------------------------------------

    def check_base(self, state: ControlState | None, *, scan: bool) -> None:
        """Every saga row is on a key `state` reads (from the table's mirror of the base table,
        which every write's answer keeps current); with `scan`, also a consistent Scan of the
        base table itself: no row lost."""
        if state is not None:
            # One routing for the whole pass: a row's verdict depends only on the state, its
            # person and its GSI4PK.
            routing = routing_for(state, None)
            enumerated = set(routing.enumeration_keys())
            read_keys: dict[str, tuple[str, ...] | None] = {}
            for key, row in self.rows.items():
                self._check_read_key(state, routing, enumerated, read_keys, key, row.item)
        if not scan:
            return
        seen: set[TableKey] = set()
        for raw in self.table.scan_base():
            item = deserialize(raw)
            if item["PK"].startswith(keys.SAGA_PK_PREFIX):
                seen.add((item["PK"], item["SK"]))
        for key in self.rows.keys() - seen:
            self.fail("lost", f"{key} is no longer in the base table")
        for key in seen - self.rows.keys():
            self.fail("resurrected", f"{key} is in the base table, written by no one")

    def _check_read_key(
        self,
        state: ControlState,
        routing: Routing,
        enumerated: set[str],
        read_keys: dict[str, tuple[str, ...] | None],
        key: TableKey,
        item: dict[str, Any],
    ) -> None:
        person = item.get("personId")
        gsi4pk = item.get("GSI4PK")
        if not isinstance(person, str):
            read: tuple[str, ...] | None = ()
        elif person in read_keys:
            read = read_keys[person]
        else:
            try:
                read = tuple(routing.read_keys(person))
            except InvalidKeyError:
                read = None  # not a person any layout reads: nothing to check
            read_keys[person] = read
        if read is None:
            return
        if gsi4pk not in read or gsi4pk not in enumerated:
            message = (
                f"{key[0]} (person {person}) is on {gsi4pk}, which state v{state.version} "
                f"({state.phase.value}) does not read (it reads {', '.join(read)})"
            )
            if not any(v.kind == "unread-key" and v.detail == message for v in self.violations):
                self.fail("unread-key", message)


def _as_all(read: ReadSeen) -> ReadSeen:
    """The same read as an enumeration of every saga (what an open one is filtered from)."""
    return replace(read, kind="all")


def _matches(item: dict[str, Any], read: ReadSeen) -> bool:
    if read.kind == "open" and item.get("state") not in OPEN_STATES:
        return False
    if read.person is not None:
        try:
            return keys.parse_gsi4sk(str(item.get("GSI4SK"))).person_id == read.person
        except InvalidKeyError:
            return False
    return "GSI4PK" in item and "GSI4SK" in item
