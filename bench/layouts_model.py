"""The layout lab's synthetic model: six layouts of the saga rows, priced from aggregates.

A layout says which index partition key a saga row carries (from its person and whether it is
open), which keys a by-person read and an all-open enumeration read, and which index entries a
transition writes. The model prices a traffic plan in a layout without a server and without
materialising the rows: the dataset is held as per-person aggregates (bytes and rows of open
and of terminal sagas), so 1000x with a long history prices in seconds. Units are the meter's
(devkit.capacity.units): 4 KB read units summed per Query page and halved (every GSI read and
the Scan are eventually consistent), 1 KB write units per index touched, two when an index key
changes. The 1x figures are checked against a metered server run (bench.layouts_store).

What is modelled as an aggregate, and so not exact: Query pages are cut at 1 MB assuming the
rows of a key have their mean size; a by-person read is one page (a person's history is far
below 1 MB); by-person reads see the dataset as seeded (a saga the plan's cohort opens is not
added to its person's later reads: at most the cohort's 40 persons in 1,200, reads of whom are
rare); a Scan's segments hold equal shares of the table.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from bench.layouts_keys import (
    CLOSED_KEY_PREFIX,
    OPEN_INDEX_NAME,
    OPEN_INDEX_PK,
    OPEN_KEY_PREFIX,
    SHARD_COUNT,
    SHARD_KEY_PREFIX,
    LabLayout,
)
from devkit.capacity.units import (
    PARTITION_RCU_CEILING,
    PARTITION_WCU_CEILING,
    READ_UNIT_BYTES,
    WRITE_UNIT_BYTES,
)
from devkit.seed import Dataset, SeedSpec, build_dataset
from devkit.traffic.events import CohortOpen, InboundMessage, ListPageLoad, Sweep, Transition
from devkit.traffic.mix import SweepSpec, TrafficMix
from devkit.traffic.plan import Plan
from saga_index.index import (
    INDEX_NAME,
    JOBS_BY_NAME,
    OPEN_STATES,
    SCHEDULED_JOBS,
    SWEEP_NAMES,
    keys,
    shard,
)
from saga_index.store.dynamo import item_size

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

# DynamoDB's storage accounting: 100 bytes of overhead per item and per index entry.
INDEX_ENTRY_OVERHEAD = 100
QUERY_PAGE_BYTES = 1024 * 1024
# Open sagas whose transitions are priced for the per-transition figures (evenly spread).
TRANSITION_SAMPLE = 2000
# load_of sums (key, second) cells densely up to this many cells, by sorting beyond.
DENSE_CELLS = 4_000_000


# ---- the mix --------------------------------------------------------------------------------


def lab_mix(base: TrafficMix, *, staggered: bool) -> TrafficMix:
    """The ADR mix with the cohort at the last second of the window, away from every sweep:
    which rows a sweep reads then never depends on a race with the cohort's concurrent writes.
    Staggered: each sweep at its deployed offset (saga_index.index.jobs, minutes modulo the
    smallest period, 5) mapped onto the mix's sweep period, so no two share a second."""
    mix = replace(base, cohort_offset_s=max(0, base.duration_s - 1))
    if not staggered:
        return mix
    smallest = min(job.period_minutes for job in SCHEDULED_JOBS)
    sweeps = []
    for spec in mix.sweeps:
        job = JOBS_BY_NAME[spec.name] if spec.name in SWEEP_NAMES else None
        offset = 0 if job is None else (job.offset_minutes % smallest) * spec.period_s // smallest
        sweeps.append(SweepSpec(spec.name, spec.period_s, offset))
    return replace(mix, sweeps=tuple(sweeps))


# ---- the dataset as aggregates --------------------------------------------------------------


@dataclass
class Aggregates:
    """Per person (index i of `persons`): open and terminal saga rows and bytes; the open
    sagas themselves (for transitions); the bytes of the other entities sharing the table."""

    persons: tuple[str, ...]
    shards: IntArray
    open_rows: IntArray
    open_bytes: IntArray
    terminal_rows: IntArray
    terminal_bytes: IntArray
    other_rows: int
    other_bytes: int
    # saga id -> (person index, size in bytes, state) of every open saga
    open_sagas: dict[str, tuple[int, int, str]]
    person_index: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.person_index:
            self.person_index = {p: i for i, p in enumerate(self.persons)}

    @property
    def saga_rows(self) -> int:
        return int(self.open_rows.sum() + self.terminal_rows.sum())

    @property
    def saga_bytes(self) -> int:
        return int(self.open_bytes.sum() + self.terminal_bytes.sum())


def lab_spec(base: SeedSpec, *, scale: int, history_factor: int) -> SeedSpec:
    """`base` scaled, with `history_factor` terminal sagas per open one and no anomalies (the
    lab compares layouts; the anomalies' handling is the migration's business)."""
    spec = base.scaled(scale)
    return replace(spec, terminal_sagas=spec.open_sagas * history_factor, anomalies=0)


def shards_of(persons: Sequence[str], shard_count: int = SHARD_COUNT) -> IntArray:
    return np.fromiter((shard(p, shard_count) for p in persons), dtype=np.int64, count=len(persons))


def aggregates_of(
    dataset: Dataset, *, shard_count: int = SHARD_COUNT, shards: IntArray | None = None
) -> Aggregates:
    """Exact aggregates of a materialised dataset (the rows a metered run seeds)."""
    index = {p: i for i, p in enumerate(dataset.persons)}
    n = len(dataset.persons)
    open_rows = np.zeros(n, dtype=np.int64)
    open_bytes = np.zeros(n, dtype=np.int64)
    terminal_rows = np.zeros(n, dtype=np.int64)
    terminal_bytes = np.zeros(n, dtype=np.int64)
    open_sagas: dict[str, tuple[int, int, str]] = {}
    for record in dataset.sagas:
        if record.person_id is None:
            continue
        i = index[record.person_id]
        if record.is_open:
            open_rows[i] += 1
            open_bytes[i] += record.size
            open_sagas[record.saga_id] = (i, record.size, record.state)
        else:
            terminal_rows[i] += 1
            terminal_bytes[i] += record.size
    other_rows = other_bytes = 0
    for item in dataset.other_items():
        other_rows += 1
        other_bytes += item_size(item)
    return Aggregates(
        persons=dataset.persons,
        shards=shards_of(dataset.persons, shard_count) if shards is None else shards,
        open_rows=open_rows,
        open_bytes=open_bytes,
        terminal_rows=terminal_rows,
        terminal_bytes=terminal_bytes,
        other_rows=other_rows,
        other_bytes=other_bytes,
        open_sagas=open_sagas,
        person_index=index,
    )


def open_only_dataset(base: SeedSpec, scale: int) -> Dataset:
    """The persons, managers and open sagas of `scale` (what a plan needs); no terminal rows."""
    return build_dataset(lab_spec(base, scale=scale, history_factor=0))


def synthetic_aggregates(
    open_dataset: Dataset,
    *,
    history_factor: int,
    other_bytes_per_scale: tuple[int, int],
    scale: int,
    shards: IntArray,
) -> Aggregates:
    """Aggregates of a dataset too large to materialise: the open sagas of `open_dataset`, and
    history_factor terminal sagas per open one dealt round-robin over the persons (as
    devkit.seed deals them), each of a size drawn uniformly from the spec's range (numpy,
    seeded). Other entities: `other_bytes_per_scale` (rows, bytes) of the 1x dataset, times
    `scale` (every other entity's count grows with the persons or the sagas)."""
    base = _open_part(open_dataset, shards)
    spec = open_dataset.spec
    persons = len(open_dataset.persons)
    total = len(base.open_sagas) * history_factor
    rows = np.full(persons, total // persons, dtype=np.int64)
    rows[: total % persons] += 1
    rng = np.random.default_rng(spec.seed)
    sizes_per_person = np.zeros(persons, dtype=np.int64)
    chunk = 4_000_000
    done = 0
    owners_all = np.repeat(np.arange(persons, dtype=np.int64), rows)
    while done < total:
        count = min(chunk, total - done)
        sizes = rng.integers(spec.min_item_bytes, spec.max_item_bytes + 1, size=count)
        sizes_per_person += np.bincount(
            owners_all[done : done + count], weights=sizes, minlength=persons
        ).astype(np.int64)
        done += count
    other_rows, other_bytes = other_bytes_per_scale
    base.terminal_rows = rows
    base.terminal_bytes = sizes_per_person
    base.other_rows = other_rows * scale
    base.other_bytes = other_bytes * scale
    return base


def _open_part(dataset: Dataset, shards: IntArray) -> Aggregates:
    index = {p: i for i, p in enumerate(dataset.persons)}
    n = len(dataset.persons)
    open_rows = np.zeros(n, dtype=np.int64)
    open_bytes = np.zeros(n, dtype=np.int64)
    open_sagas: dict[str, tuple[int, int, str]] = {}
    for record in dataset.sagas:
        if record.person_id is None or not record.is_open:
            continue
        i = index[record.person_id]
        open_rows[i] += 1
        open_bytes[i] += record.size
        open_sagas[record.saga_id] = (i, record.size, record.state)
    zeros = np.zeros(n, dtype=np.int64)
    return Aggregates(
        persons=dataset.persons,
        shards=shards,
        open_rows=open_rows,
        open_bytes=open_bytes,
        terminal_rows=zeros,
        terminal_bytes=zeros.copy(),
        other_rows=0,
        other_bytes=0,
        open_sagas=open_sagas,
        person_index=index,
    )


# ---- unit arithmetic, vectorised --------------------------------------------------------------


def read_rcu(total_bytes: FloatArray | IntArray) -> FloatArray:
    """Eventually consistent read units of one read of `total_bytes` each (at least one unit)."""
    blocks = np.maximum(1, np.ceil(np.asarray(total_bytes, dtype=np.float64) / READ_UNIT_BYTES))
    return np.asarray(blocks / 2, dtype=np.float64)


def write_wcu(size: int) -> int:
    return max(1, math.ceil(size / WRITE_UNIT_BYTES))


def query_cost(total_bytes: IntArray, rows: IntArray) -> tuple[FloatArray, IntArray]:
    """(RCU, pages) of reading each key to its last 1 MB page, rows of the key's mean size."""
    total = np.asarray(total_bytes, dtype=np.float64)
    count = np.asarray(rows, dtype=np.float64)
    mean = np.where(count > 0, total / np.maximum(count, 1), 1.0)
    per_page = np.maximum(1, np.floor(QUERY_PAGE_BYTES / mean))
    pages = np.maximum(1, np.ceil(count / per_page))
    full = per_page * mean
    last = total - (pages - 1) * full
    rcu = (pages - 1) * read_rcu(full) + read_rcu(last)
    return np.asarray(rcu, dtype=np.float64), pages.astype(np.int64)


# ---- pricing a layout --------------------------------------------------------------------------


@dataclass(frozen=True)
class KeySpace:
    """Integer ids of a layout's index partition keys: legacy 0; shard s: 1 + s; closed shard s:
    1 + N + s; open-index shard s: 1 + 2N + s; person i: 1 + 3N + i. Scan segments are no
    index key: they are priced apart."""

    shard_count: int
    persons: tuple[str, ...]

    def shard_key(self, shards: IntArray) -> IntArray:
        return 1 + shards

    def closed_key(self, shards: IntArray) -> IntArray:
        return 1 + self.shard_count + shards

    def open_index_key(self, shards: IntArray) -> IntArray:
        return 1 + 2 * self.shard_count + shards

    def person_key(self, persons: IntArray) -> IntArray:
        return 1 + 3 * self.shard_count + persons

    # The same ids for one row (plain ints: the write loops call these per event).
    def shard_id(self, shard_number: int) -> int:
        return 1 + shard_number

    def closed_id(self, shard_number: int) -> int:
        return 1 + self.shard_count + shard_number

    def open_index_id(self, shard_number: int) -> int:
        return 1 + 2 * self.shard_count + shard_number

    def person_id(self, person: int) -> int:
        return 1 + 3 * self.shard_count + person

    def name(self, key: int) -> str:
        n = self.shard_count
        if key == 0:
            return f"{INDEX_NAME}/{keys.LEGACY_GSI4PK}"
        if key <= n:
            return f"{INDEX_NAME}/{SHARD_KEY_PREFIX}{key - 1}"
        if key <= 2 * n:
            return f"{INDEX_NAME}/{CLOSED_KEY_PREFIX}{key - 1 - n}"
        if key <= 3 * n:
            return f"{OPEN_INDEX_NAME}/{OPEN_KEY_PREFIX}{key - 1 - 2 * n}"
        return f"{INDEX_NAME}/{self.persons[key - 1 - 3 * n]}"


def row_keys(layout: LabLayout, space: KeySpace, agg: Aggregates) -> tuple[IntArray, IntArray]:
    """(key of each person's open rows, key of their terminal rows) in GSI4."""
    persons = np.arange(len(agg.persons), dtype=np.int64)
    if layout.gsi4 == "legacy":
        zero = np.zeros(len(persons), dtype=np.int64)
        return zero, zero
    if layout.gsi4 == "person":
        key = space.person_key(persons)
        return key, key
    open_key = space.shard_key(agg.shards)
    if layout.gsi4 == "state-split":
        return open_key, space.closed_key(agg.shards)
    return open_key, open_key


def by_person_queries(
    layout: LabLayout, space: KeySpace, agg: Aggregates
) -> list[tuple[IntArray, FloatArray]]:
    """Per query of a by-person read: (key, RCU) per person. State-split reads the open key,
    then the closed key (full history: two queries, each rounded up on its own)."""
    open_key, terminal_key = row_keys(layout, space, agg)
    if layout.gsi4 == "state-split":
        return [
            (open_key, read_rcu(agg.open_bytes)),
            (terminal_key, read_rcu(agg.terminal_bytes)),
        ]
    return [(open_key, read_rcu(agg.open_bytes + agg.terminal_bytes))]


@dataclass(frozen=True)
class Enumeration:
    """One all-open enumeration: index keys read with their RCU, requests; or a Scan."""

    keys: IntArray
    rcu: FloatArray
    requests: int
    scan_segment_rcu: tuple[tuple[float, ...], ...] = ()  # per segment, RCU of each page


def enumeration(layout: LabLayout, space: KeySpace, agg: Aggregates, segments: int) -> Enumeration:
    n = space.shard_count
    if layout.scan:
        total = agg.saga_bytes + agg.other_bytes
        rows = agg.saga_rows + agg.other_rows
        seg_bytes = np.full(segments, total / segments)
        seg_rows = np.full(segments, rows / segments)
        rcu, pages = query_cost(seg_bytes.astype(np.int64), seg_rows.astype(np.int64))
        per_segment = []
        for s in range(segments):
            page_count = int(pages[s])
            full = _full_page_bytes(seg_bytes[s], seg_rows[s])
            last = seg_bytes[s] - (page_count - 1) * full
            page_rcu = [float(read_rcu(np.array([full]))[0])] * (page_count - 1)
            page_rcu.append(float(read_rcu(np.array([last]))[0]))
            per_segment.append(tuple(page_rcu))
        empty_keys = np.zeros(0, dtype=np.int64)
        return Enumeration(
            empty_keys, np.zeros(0), int(pages.sum()), scan_segment_rcu=tuple(per_segment)
        )
    if layout.gsi4 == "legacy":
        rcu, pages = query_cost(np.array([agg.saga_bytes]), np.array([agg.saga_rows]))
        return Enumeration(np.zeros(1, dtype=np.int64), rcu, int(pages.sum()))
    shards = np.arange(n, dtype=np.int64)
    open_rows = np.bincount(agg.shards, weights=agg.open_rows, minlength=n).astype(np.int64)
    open_bytes = np.bincount(agg.shards, weights=agg.open_bytes, minlength=n).astype(np.int64)
    if layout.gsi4 == "state-split" or layout.open_index:
        rcu, pages = query_cost(open_bytes, open_rows)
        key = space.open_index_key(shards) if layout.open_index else space.shard_key(shards)
        return Enumeration(key, rcu, int(pages.sum()))
    all_rows = open_rows + np.bincount(agg.shards, weights=agg.terminal_rows, minlength=n)
    all_bytes = open_bytes + np.bincount(agg.shards, weights=agg.terminal_bytes, minlength=n)
    rcu, pages = query_cost(all_bytes.astype(np.int64), all_rows.astype(np.int64))
    return Enumeration(space.shard_key(shards), rcu, int(pages.sum()))


def _full_page_bytes(total: float, rows: float) -> float:
    mean = total / rows if rows else 1.0
    return max(1.0, math.floor(QUERY_PAGE_BYTES / mean)) * mean


@dataclass(frozen=True)
class WriteCost:
    """A write's units: base table, and per index key touched (key id, WCU)."""

    base: int
    index: tuple[tuple[int, int], ...]

    @property
    def total(self) -> int:
        return self.base + sum(w for _, w in self.index)

    @property
    def index_writes(self) -> int:
        """Index entries written (put, updated or deleted): an entry whose key changes is two,
        the delete under the old key and the put under the new one."""
        return len(self.index)


def _state_bytes(state: str) -> int:
    return len(state.encode())


def transition_cost(
    layout: LabLayout,
    space: KeySpace,
    shard_number: int,
    person: int,
    size: int,
    from_state: str,
    to_state: str,
) -> tuple[WriteCost, int]:
    """The units of moving a saga of `size` bytes from `from_state` to `to_state`, and its new
    size. Every index projects ALL, so an entry's size is the row's."""
    was_open, is_open = from_state in OPEN_STATES, to_state in OPEN_STATES
    new = size + _state_bytes(to_state) - _state_bytes(from_state)
    if layout.gsi4 == "state-split" and was_open != is_open:
        new += len(CLOSED_KEY_PREFIX) - len(SHARD_KEY_PREFIX)
    open_attr = len(OPEN_INDEX_PK) + len(OPEN_KEY_PREFIX) + len(str(shard_number))
    if layout.open_index and was_open and not is_open:
        new -= open_attr
    largest = write_wcu(max(size, new))
    index: list[tuple[int, int]] = []
    if layout.gsi4 == "legacy":
        index.append((0, largest))
    elif layout.gsi4 == "person":
        index.append((space.person_id(person), largest))
    else:
        old_key = space.shard_id(shard_number)
        if layout.gsi4 == "state-split" and was_open != is_open:
            index.append((old_key, write_wcu(size)))
            index.append((space.closed_id(shard_number), write_wcu(new)))
        else:
            index.append((old_key, largest))
    if layout.open_index and was_open:
        open_key = space.open_index_id(shard_number)
        index.append((open_key, largest if is_open else write_wcu(size)))
    return WriteCost(largest, tuple(index)), new


def created_size(
    layout: LabLayout, person_id: str, shard_number: int, legacy_padded_size: int
) -> int:
    """The size of a row the cohort opens in `layout`, padded as the replay pads it (to its
    target size with the legacy GSI4PK)."""
    if layout.gsi4 == "legacy":
        key = keys.LEGACY_GSI4PK
    elif layout.gsi4 == "person":
        key = person_id
    else:
        key = f"{SHARD_KEY_PREFIX}{shard_number}"
    extra = len(key.encode()) - len(keys.LEGACY_GSI4PK)
    if layout.open_index:
        extra += len(OPEN_INDEX_PK) + len(OPEN_KEY_PREFIX) + len(str(shard_number))
    return legacy_padded_size + extra


def create_cost(
    layout: LabLayout, space: KeySpace, shard_number: int, person: int, size: int
) -> WriteCost:
    units = write_wcu(size)
    if layout.gsi4 == "legacy":
        key = 0
    elif layout.gsi4 == "person":
        key = space.person_id(person)
    else:
        key = space.shard_id(shard_number)
    index = [(key, units)]
    if layout.open_index:
        index.append((space.open_index_id(shard_number), units))
    return WriteCost(units, tuple(index))


# ---- the plan as arrays ------------------------------------------------------------------------


@dataclass(frozen=True)
class PlanArrays:
    """A plan's events in the form the model prices: every by-person read as (second, person
    index); the sweep seconds; transitions and creates as Python tuples (few enough)."""

    duration_s: int
    read_seconds: IntArray
    read_persons: IntArray
    sweep_seconds: tuple[int, ...]
    transitions: tuple[tuple[int, str, str], ...]  # (second, saga id, to state)
    creates: tuple[tuple[int, str, int], ...]  # (second, person id, padded size)


def plan_arrays(plan: Plan, person_index: Mapping[str, int]) -> PlanArrays:
    tenants: dict[tuple[str, ...], IntArray] = {}
    seconds: list[IntArray] = []
    persons: list[IntArray] = []
    single_seconds: list[int] = []
    single_persons: list[int] = []
    sweeps: list[int] = []
    transitions: list[tuple[int, str, str]] = []
    creates: list[tuple[int, str, int]] = []
    for tick in plan.ticks:
        for event in tick.events:
            if isinstance(event, ListPageLoad):
                found = tenants.get(event.persons)
                if found is None:
                    found = tenants[event.persons] = np.fromiter(
                        (person_index[p] for p in event.persons), dtype=np.int64
                    )
                persons.append(found)
                seconds.append(np.full(len(found), tick.second, dtype=np.int64))
            elif isinstance(event, InboundMessage):
                for _ in range(event.reads):
                    single_seconds.append(tick.second)
                    single_persons.append(person_index[event.person_id])
            elif isinstance(event, Sweep):
                sweeps.append(tick.second)
            elif isinstance(event, Transition):
                transitions.append((tick.second, event.saga_id, event.to_state))
            elif isinstance(event, CohortOpen):
                for saga in event.sagas:
                    creates.append((tick.second, saga.person_id, saga.size))
    seconds.append(np.asarray(single_seconds, dtype=np.int64))
    persons.append(np.asarray(single_persons, dtype=np.int64))
    return PlanArrays(
        duration_s=plan.mix.duration_s,
        read_seconds=np.concatenate(seconds),
        read_persons=np.concatenate(persons),
        sweep_seconds=tuple(sweeps),
        transitions=tuple(transitions),
        creates=tuple(creates),
    )


# ---- load per key and second -------------------------------------------------------------------


@dataclass(frozen=True)
class Load:
    """Index load of a run: per key, totals and per-second peaks; figures as the ledger's."""

    keys: IntArray
    total_rcu: FloatArray
    total_wcu: FloatArray
    peak_rcu: FloatArray
    peak_wcu: FloatArray

    @property
    def hottest_share(self) -> float:
        units = self.total_rcu + self.total_wcu
        total = float(units.sum())
        return float(units.max()) / total if total else 0.0

    @property
    def hottest_key(self) -> int | None:
        if not len(self.keys):
            return None
        units = self.total_rcu + self.total_wcu
        return int(self.keys[int(np.argmax(units))])

    @property
    def peak_rcu_per_key(self) -> float:
        return float(self.peak_rcu.max()) if len(self.keys) else 0.0

    @property
    def peak_wcu_per_key(self) -> float:
        return float(self.peak_wcu.max()) if len(self.keys) else 0.0

    @property
    def headroom(self) -> float | None:
        return headroom(self.peak_rcu_per_key, self.peak_wcu_per_key)


def headroom(peak_rcu: float, peak_wcu: float) -> float | None:
    candidates = []
    if peak_rcu:
        candidates.append(PARTITION_RCU_CEILING / peak_rcu)
    if peak_wcu:
        candidates.append(PARTITION_WCU_CEILING / peak_wcu)
    return min(candidates) if candidates else None


def load_of(keys_: IntArray, seconds: IntArray, rcu: FloatArray, wcu: FloatArray) -> Load:
    """Sum the charges per (key, second), then per key: totals and the highest second."""
    if not len(keys_):
        empty = np.zeros(0)
        return Load(np.zeros(0, dtype=np.int64), empty, empty, empty, empty)
    span = int(seconds.max()) + 1
    cell = keys_.astype(np.int64) * span + seconds.astype(np.int64)
    cells_count = (int(keys_.max()) + 1) * span
    if cells_count <= DENSE_CELLS:
        # Few keys: sum every (key, second) cell directly, no sort.
        counts = np.bincount(cell, minlength=cells_count)
        cells = np.flatnonzero(counts)
        cell_rcu = np.bincount(cell, weights=rcu, minlength=cells_count)[cells]
        cell_wcu = np.bincount(cell, weights=wcu, minlength=cells_count)[cells]
    else:
        cells, inverse = np.unique(cell, return_inverse=True)
        cell_rcu = np.bincount(inverse, weights=rcu, minlength=len(cells))
        cell_wcu = np.bincount(inverse, weights=wcu, minlength=len(cells))
    cell_key = cells // span
    present, key_of_cell = np.unique(cell_key, return_inverse=True)
    total_rcu = np.bincount(key_of_cell, weights=cell_rcu, minlength=len(present)).astype(float)
    total_wcu = np.bincount(key_of_cell, weights=cell_wcu, minlength=len(present)).astype(float)
    peak_rcu = np.zeros(len(present))
    peak_wcu = np.zeros(len(present))
    np.maximum.at(peak_rcu, key_of_cell, cell_rcu)
    np.maximum.at(peak_wcu, key_of_cell, cell_wcu)
    return Load(present, total_rcu, total_wcu, peak_rcu, peak_wcu)


# ---- the figures of one layout -------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    shard_count: int = SHARD_COUNT
    # The Scan of layout 6: parallel segments, each paced to one 1 MB page per second.
    scan_segments: int = 16
    scan_pages_per_second_per_segment: float = 1.0


def price_layout(
    layout: LabLayout,
    agg: Aggregates,
    plan: PlanArrays,
    config: Config,
    *,
    by_person_sample: IntArray | None = None,
    transition_sample: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Every figure of one layout over one dataset and plan (JSON-ready)."""
    space = KeySpace(config.shard_count, agg.persons)
    parts_keys: list[IntArray] = []
    parts_seconds: list[IntArray] = []
    parts_rcu: list[FloatArray] = []
    parts_wcu: list[FloatArray] = []

    queries = by_person_queries(layout, space, agg)
    for query_keys, rcu in queries:
        parts_keys.append(query_keys[plan.read_persons])
        parts_seconds.append(plan.read_seconds)
        parts_rcu.append(rcu[plan.read_persons])
        parts_wcu.append(np.zeros(len(plan.read_persons)))

    enum = enumeration(layout, space, agg, config.scan_segments)
    scan_cells: dict[tuple[int, int], float] = {}
    for second in plan.sweep_seconds:
        if layout.scan:
            pace = config.scan_pages_per_second_per_segment
            for segment, pages in enumerate(enum.scan_segment_rcu):
                for page, units in enumerate(pages):
                    at = (segment, second + int(page / pace))
                    scan_cells[at] = scan_cells.get(at, 0.0) + units
        else:
            parts_keys.append(enum.keys)
            parts_seconds.append(np.full(len(enum.keys), second, dtype=np.int64))
            parts_rcu.append(enum.rcu)
            parts_wcu.append(np.zeros(len(enum.keys)))

    write_keys, write_seconds, write_units = _write_cells(layout, space, agg, plan)
    parts_keys.append(np.asarray(write_keys, dtype=np.int64))
    parts_seconds.append(np.asarray(write_seconds, dtype=np.int64))
    parts_rcu.append(np.zeros(len(write_keys)))
    parts_wcu.append(np.asarray(write_units, dtype=np.float64))

    load = load_of(
        np.concatenate(parts_keys),
        np.concatenate(parts_seconds),
        np.concatenate(parts_rcu),
        np.concatenate(parts_wcu),
    )
    scan_peak = max(scan_cells.values(), default=0.0)
    index_headroom = load.headroom
    overall = headroom(max(load.peak_rcu_per_key, scan_peak), load.peak_wcu_per_key)

    hottest = load.hottest_key
    return {
        "name": layout.name,
        "title": layout.title,
        "hottestShare": round(load.hottest_share, 4),
        "hottestKey": None if hottest is None else space.name(hottest),
        "indexKeys": len(load.keys),
        "peakRcuPerKey": round(load.peak_rcu_per_key, 2),
        "peakWcuPerKey": round(load.peak_wcu_per_key, 2),
        "indexHeadroom": _round(index_headroom, 6),
        "readHeadroom": _round(headroom(max(load.peak_rcu_per_key, scan_peak), 0.0), 6),
        "writeHeadroom": _round(headroom(0.0, load.peak_wcu_per_key), 6),
        "scanPeakRcuPerSegment": round(scan_peak, 2) if layout.scan else None,
        "headroom": _round(overall, 6),
        **enumeration_figures(float(enum.rcu.sum()) + _scan_rcu(enum), int(agg.open_bytes.sum())),
        "requestsPerEnumeration": enum.requests,
        "pacedEnumerationSeconds": _scan_seconds(enum, config) if layout.scan else None,
        **_per_saga_figures(
            layout, space, agg, queries, by_person_sample, transition_sample=transition_sample
        ),
        "storageBytesPerSaga": round(storage_per_saga(layout, agg), 1),
        "totalRcu": round(float(load.total_rcu.sum()), 1),
        "totalWcu": round(float(load.total_wcu.sum()), 1),
    }


def _write_cells(
    layout: LabLayout, space: KeySpace, agg: Aggregates, plan: PlanArrays
) -> tuple[list[int], list[int], list[float]]:
    """(key, second, WCU) of every index write the plan's transitions and creates make."""
    write_keys: list[int] = []
    write_seconds: list[int] = []
    write_units: list[float] = []
    sizes: dict[str, int] = {}
    states: dict[str, str] = {}
    for second, saga_id, to_state in plan.transitions:
        person, size, state = agg.open_sagas[saga_id]
        cost, new = transition_cost(
            layout,
            space,
            int(agg.shards[person]),
            person,
            sizes.get(saga_id, size),
            states.get(saga_id, state),
            to_state,
        )
        sizes[saga_id], states[saga_id] = new, to_state
        for key, units in cost.index:
            write_keys.append(key)
            write_seconds.append(second)
            write_units.append(units)
    create_keys, create_seconds, create_units = create_cells(layout, space, agg, plan)
    return write_keys + create_keys, write_seconds + create_seconds, write_units + create_units


def create_cells(
    layout: LabLayout, space: KeySpace, agg: Aggregates, plan: PlanArrays
) -> tuple[list[int], list[int], list[float]]:
    """(key, second, WCU) of every index write the plan's creates (the cohort's opens) make."""
    write_keys: list[int] = []
    write_seconds: list[int] = []
    write_units: list[float] = []
    for second, person_id, padded in plan.creates:
        person = agg.person_index[person_id]
        shard_number = int(agg.shards[person])
        size = created_size(layout, person_id, shard_number, padded)
        cost = create_cost(layout, space, shard_number, person, size)
        for key, units in cost.index:
            write_keys.append(key)
            write_seconds.append(second)
            write_units.append(units)
    return write_keys, write_seconds, write_units


def open_rows_rcu(open_bytes: int) -> float:
    """What the open rows cost: their bytes, all together, read in 4 KB eventually consistent
    units (what reading exactly those rows would cost with no other row read and no rounding per
    key or page: the floor of any enumeration that returns them)."""
    if open_bytes <= 0:
        return 0.0
    return math.ceil(open_bytes / READ_UNIT_BYTES) / 2


def enumeration_figures(enumeration_rcu: float, open_bytes: int) -> dict[str, float | None]:
    """`enumerationRcu`, `openRowsRcu` (open_rows_rcu) and `enumerationOverOpenRows`: how many
    times what its open rows cost one all-open enumeration costs (None without open rows)."""
    floor = open_rows_rcu(open_bytes)
    return {
        "enumerationRcu": round(enumeration_rcu, 1),
        "openRowsRcu": round(floor, 1),
        "enumerationOverOpenRows": round(enumeration_rcu / floor, 4) if floor else None,
    }


def _per_saga_figures(
    layout: LabLayout,
    space: KeySpace,
    agg: Aggregates,
    queries: Sequence[tuple[IntArray, FloatArray]],
    by_person_sample: IntArray | None,
    *,
    transition_sample: Sequence[str] | None,
) -> dict[str, Any]:
    """One by-person read (mean over `by_person_sample`, default every person) and one step and
    one terminal transition (mean over `transition_sample`, default TRANSITION_SAMPLE open
    sagas spread evenly): units, requests, and index writes (index entries put, updated or
    deleted, as the meter counts them)."""
    sample = (
        np.arange(len(agg.persons), dtype=np.int64)
        if by_person_sample is None
        else by_person_sample
    )
    by_person = sum(rcu[sample] for _, rcu in queries)
    if transition_sample is None:
        every = list(agg.open_sagas)
        saga_ids = [every[int(i)] for i in sample_every(len(every), TRANSITION_SAMPLE)]
    else:
        saga_ids = list(transition_sample)
    step, final = _transition_costs(layout, space, agg, saga_ids)
    return {
        "byPersonRcu": round(float(np.mean(by_person)), 3) if len(sample) else None,
        "requestsPerByPerson": len(queries),
        "transitionWcu": _mean([c.total for c in step], 3),
        "terminalTransitionWcu": _mean([c.total for c in final], 3),
        "transitionIndexWrites": _mean([c.index_writes for c in step], 3),
        "terminalIndexWrites": _mean([c.index_writes for c in final], 3),
    }


def _mean(values: Sequence[float], digits: int) -> float | None:
    return round(float(np.mean(values)), digits) if values else None


def _transition_costs(
    layout: LabLayout, space: KeySpace, agg: Aggregates, saga_ids: Sequence[str]
) -> tuple[list[WriteCost], list[WriteCost]]:
    """The cost of each sampled saga's next step, and of its terminal transition (to SIGNED)."""
    step, final = [], []
    for saga_id in saga_ids:
        person, size, state = agg.open_sagas[saga_id]
        shard_number = int(agg.shards[person])
        step.append(
            transition_cost(
                layout, space, shard_number, person, size, state, next_open_state(state)
            )[0]
        )
        final.append(transition_cost(layout, space, shard_number, person, size, state, "SIGNED")[0])
    return step, final


def _scan_rcu(enum: Enumeration) -> float:
    return float(sum(sum(pages) for pages in enum.scan_segment_rcu))


def _scan_seconds(enum: Enumeration, config: Config) -> float:
    longest = max((len(p) for p in enum.scan_segment_rcu), default=0)
    return round(longest / config.scan_pages_per_second_per_segment, 1)


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


_NEXT = {
    "OPENED": "PREPARING",
    "PREPARING": "OFFER_SENT",
    "PREPARE_FAILED": "PREPARING",
    "OFFER_SENT": "NEGOTIATING",
    "NEGOTIATING": "AWAITING_SIGNATURE",
    "AWAITING_SIGNATURE": "NEGOTIATING",
}


def next_open_state(state: str) -> str:
    """The open state a workflow step moves a saga to (devkit.traffic.plan's walk)."""
    return _NEXT[state]


def storage_per_saga(layout: LabLayout, agg: Aggregates) -> float:
    """Bytes stored per saga: the row and every index entry, each with DynamoDB's 100-byte
    overhead (every index projects ALL: an entry is the row's size)."""
    rows = agg.saga_rows
    if not rows:
        return 0.0
    entry = agg.saga_bytes + rows * INDEX_ENTRY_OVERHEAD
    total = 2 * entry  # the row and its GSI4 entry
    if layout.open_index:
        total += int(agg.open_bytes.sum()) + int(agg.open_rows.sum()) * INDEX_ENTRY_OVERHEAD
    return total / rows


def sample_every(count: int, size: int) -> IntArray:
    """`size` indices spread evenly over range(count) (deterministic)."""
    if count <= size:
        return np.arange(count, dtype=np.int64)
    return np.linspace(0, count - 1, size).astype(np.int64)
