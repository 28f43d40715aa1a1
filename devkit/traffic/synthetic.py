"""The same plan priced without a server, from item sizes alone.

The benchmarks use it for the 100x dataset, where a real run would take far longer than the
benchmark budget. It prices with the meter's own functions, so only the routing and the
paging are modelled here.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from devkit.capacity.ledger import LoadLedger
from devkit.capacity.pricing import Charge, write_charges
from devkit.capacity.table_schema import TableSchema
from devkit.capacity.units import read_units
from devkit.seed import PAD_ATTRIBUTE, Dataset, SagaRecord, pad_to_size
from devkit.traffic.events import (
    CohortOpen,
    InboundMessage,
    ListPageLoad,
    Sweep,
    Transition,
    new_saga_record,
)
from devkit.traffic.plan import Plan
from saga_index.index import INDEX_NAME, keys
from saga_index.layout_change.record import Phase, Routing, layouts_for_phase
from saga_index.store.dynamo import item_size

# A DynamoDB Query page ends at 1 MB of data read.
QUERY_PAGE_BYTES = 1024 * 1024


@dataclass
class _Row:
    saga_id: str
    person_id: str | None
    gsi4pk: str
    gsi4sk: str
    state: str
    size: int


class SyntheticTable:
    """An in-memory model of the saga rows that prices a plan like the meter would.

    Reads follow the repository's routing for the phase (a by-person read queries the person's
    partition(s) with begins_with on GSI4SK; an enumeration queries every partition to its last
    1 MB page); each Query page is priced from the sizes of the rows it reads, with the meter's
    read_units. Writes are priced with the meter's write_charges on items of the row's size.
    Only the index (GSI4) and the base table are modelled: it is the index load that matters.
    """

    def __init__(
        self,
        dataset: Dataset,
        schema: TableSchema,
        *,
        phase: Phase | str,
        shard_count: int,
        layout_shard_count: int | None = None,
    ) -> None:
        self.schema = schema
        self.index = schema.index(INDEX_NAME)
        self.phase = Phase.parse(phase)
        self.shard_count = shard_count
        # The domain's own routing rule (the repository and writer follow the same object).
        self.routing = Routing.between(*layouts_for_phase(self.phase.value, shard_count))
        self.ledger = LoadLedger()
        self.requests: Counter[str] = Counter()
        self._rows: dict[str, _Row] = {}
        self._by_partition: dict[str, dict[str, _Row]] = defaultdict(dict)
        self._by_person: dict[str, list[_Row]] = defaultdict(list)
        self._read_keys: dict[str, tuple[str, ...]] = {}  # one hash per person, not per read
        layout: dict[str, str] = {}  # person -> key in the seeded layout (one hash each)
        for record in dataset.sagas:
            person = record.person_id
            if person is None or layout_shard_count is None:
                gsi4pk = record.gsi4pk(layout_shard_count)
            else:
                gsi4pk = layout.get(person) or layout.setdefault(
                    person, record.gsi4pk(layout_shard_count)
                )
            self._insert(
                _Row(record.saga_id, person, gsi4pk, record.gsi4sk, record.state, record.size)
            )

    def _insert(self, row: _Row) -> None:
        self._rows[row.saga_id] = row
        self._by_partition[row.gsi4pk][row.saga_id] = row
        if row.person_id is not None:
            self._by_person[row.person_id].append(row)

    # ---- what the repository would read ------------------------------------------------

    def _person_read_keys(self, person_id: str) -> tuple[str, ...]:
        found = self._read_keys.get(person_id)
        if found is None:
            found = self._read_keys[person_id] = self.routing.read_keys(person_id)
        return found

    def by_person(self, person_id: str, second: int) -> int:
        partitions = self._person_read_keys(person_id)
        for partition in partitions:
            size = sum(r.size for r in self._by_person[person_id] if r.gsi4pk == partition)
            self._read(second, partition, [size])
        self.requests["by-person"] += len(partitions)
        return len(partitions)

    def enumerate_open(self, second: int) -> int:
        requests = 0
        for partition in self.routing.enumeration_keys():
            pages = _pages([r.size for r in self._by_partition[partition].values()])
            for page in pages:
                self._read(second, partition, page)
            requests += len(pages)
        self.requests["enumeration"] += requests
        return requests

    def _read(self, second: int, partition: str, sizes: Iterable[int]) -> None:
        units = read_units(sum(sizes), consistent=False)
        self.ledger.add(second, [Charge(self.index.name, partition, rcu=units)])

    # ---- writes ---------------------------------------------------------------------------

    def _gsi4pk_for(self, person_id: str) -> str:
        return self.routing.write_key(person_id)

    def create(self, record: SagaRecord, second: int) -> None:
        assert record.person_id is not None
        row = _Row(
            record.saga_id,
            record.person_id,
            self._gsi4pk_for(record.person_id),
            record.gsi4sk,
            "OPENED",
            record.size,
        )
        self._insert(row)
        self.ledger.add(second, write_charges(self.schema, None, _item(row)))
        self.requests["write"] += 1

    def transition(self, saga_id: str, to_state: str, second: int) -> None:
        row = self._rows[saga_id]
        old = _item(row)
        del self._by_partition[row.gsi4pk][saga_id]
        assert row.person_id is not None
        row.gsi4pk = self._gsi4pk_for(row.person_id)
        row.state = to_state
        self._by_partition[row.gsi4pk][saga_id] = row
        self.ledger.add(second, write_charges(self.schema, old, _item(row)))
        self.requests["write"] += 1

    def run(self, plan: Plan, run_label: str) -> LoadLedger:
        for tick in plan.ticks:
            for event in tick.events:
                if isinstance(event, ListPageLoad):
                    for person in event.persons:
                        self.by_person(person, tick.second)
                elif isinstance(event, InboundMessage):
                    for _ in range(event.reads):
                        self.by_person(event.person_id, tick.second)
                elif isinstance(event, Sweep):
                    self.enumerate_open(tick.second)
                elif isinstance(event, Transition):
                    self.transition(event.saga_id, event.to_state, tick.second)
                elif isinstance(event, CohortOpen):
                    for saga in event.sagas:
                        self.create(new_saga_record(saga, run_label, tick.second), tick.second)
        return self.ledger


def _pages(sizes: Sequence[int]) -> list[list[int]]:
    """Split a partition's rows into Query pages of at most 1 MB read (at least one page)."""
    pages: list[list[int]] = [[]]
    total = 0
    for size in sizes:
        if total + size > QUERY_PAGE_BYTES and pages[-1]:
            pages.append([])
            total = 0
        pages[-1].append(size)
        total += size
    return pages


def _item(row: _Row) -> dict[str, Any]:
    """A wire item of the row's size, with the attributes the index prices."""
    item: dict[str, Any] = {
        "PK": {"S": keys.saga_table_key(row.saga_id)["PK"]},
        "SK": {"S": keys.SAGA_SK},
        "GSI4PK": {"S": row.gsi4pk},
        "GSI4SK": {"S": row.gsi4sk},
        "state": {"S": row.state},
    }
    return pad_to_size(item, max(row.size, _minimum_size(item)))


def _minimum_size(item: Mapping[str, Any]) -> int:
    return item_size(item) + len(PAD_ATTRIBUTE)
