"""A realistic legacy dataset for the local demo and the benchmarks.

By default (SeedSpec()): 179 open and 1,500 terminal renewal sagas over 1,200 persons, each saga
row 1-2 KB, plus two anomalous saga rows without a personId (production has a few: a writer
once built GSI4SK from an undefined personId), plus rows of other entity types in the same table
(people, leases, property managers, conversation messages) that carry no GSI4 attributes.

Everything is generated from one random seed, so two runs build byte-identical tables. Saga rows
are built with index.keys (never a hand-spelled key) in the legacy layout, or directly in a
sharded layout for benchmarks that compare shard counts without running a backfill.

Seeding writes with BatchWriteItem through a client the caller passes (never a metered one: the
seed is the fixture, not the traffic being measured). It is a local-server fixture loader, not a
production tool, so it is not rate-capped.
"""

from __future__ import annotations

import logging
import random
import string
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from saga_index.index import OPEN_STATES, TERMINAL_STATES, InvalidInputError, keys
from saga_index.store import utc_iso
from saga_index.store.dynamo import item_size, serialize

log = logging.getLogger(__name__)

# The instant the dataset is built around (the ADR's date): openedAt values lie before it.
EPOCH = datetime(2026, 7, 10, tzinfo=UTC)
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
# byte -> one of the 32 characters (256 is a multiple of 32: every character equally likely)
_CROCKFORD_BYTES = bytes(ord(_CROCKFORD[b % 32]) for b in range(256))
# The attribute that pads a row to its target size; owned by "other code" in the data model.
PAD_ATTRIBUTE = "renewalNotes"
_BATCH = 25  # BatchWriteItem's limit
_MAX_BATCH_ATTEMPTS = 8
_NOTE = (
    "tenant asked about the renewal offer and wants to discuss the rent increase with the "
    "property manager before signing; parking space and pet addendum to be carried over; "
    "maintenance ticket for the dishwasher closed last week; prefers email and SMS follow-ups"
)
_WORDS = tuple(_NOTE.split())


@dataclass(frozen=True)
class SeedSpec:
    """The shape of the dataset. Every number is a parameter; the defaults model production."""

    open_sagas: int = 179
    terminal_sagas: int = 1500
    persons: int = 1200
    # Saga rows without a personId (and with GSI4SK "undefined#<openedAt>"), on the legacy key.
    anomalies: int = 2
    property_managers: int = 6
    # Conversation messages (other entity type) per person with an open saga.
    messages_per_open_person: int = 3
    min_item_bytes: int = 1024
    max_item_bytes: int = 2048
    seed: int = 85

    def validate(self) -> SeedSpec:
        for name in ("open_sagas", "terminal_sagas", "anomalies", "messages_per_open_person"):
            if getattr(self, name) < 0:
                raise InvalidInputError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.persons < 1 or self.property_managers < 1:
            raise InvalidInputError("persons and property_managers must be >= 1")
        if self.open_sagas > self.persons:
            raise InvalidInputError(
                f"open_sagas ({self.open_sagas}) cannot exceed persons ({self.persons}): "
                "a person has at most one open renewal"
            )
        if not 900 <= self.min_item_bytes <= self.max_item_bytes <= 400 * 1024:
            raise InvalidInputError(
                "item sizes must satisfy 900 <= min_item_bytes <= max_item_bytes <= 400 KB "
                f"(a saga row's contract fields alone take ~800 bytes), got "
                f"{self.min_item_bytes}..{self.max_item_bytes}"
            )
        return self

    def scaled(self, factor: int) -> SeedSpec:
        """The same shape with `factor` times the sagas, persons and property managers."""
        if factor < 1:
            raise InvalidInputError(f"scale factor must be >= 1, got {factor}")
        return replace(
            self,
            open_sagas=self.open_sagas * factor,
            terminal_sagas=self.terminal_sagas * factor,
            persons=self.persons * factor,
            anomalies=self.anomalies * factor,
            property_managers=self.property_managers * factor,
        )


@dataclass(frozen=True)
class SagaRecord:
    """One saga row of the dataset, before it is rendered as an item."""

    saga_id: str
    person_id: str | None  # None: an anomalous row (production has a few)
    lease_id: str
    manager_id: str
    opened_at: str
    state: str
    size: int  # the row's size in bytes by DynamoDB's rules (exact)
    salt: int  # seeds the row's filler attributes

    @property
    def is_open(self) -> bool:
        return self.state in OPEN_STATES

    @property
    def gsi4sk(self) -> str:
        if self.person_id is None:
            # What the TypeScript writer stored when personId was undefined.
            return f"undefined#{self.opened_at}"
        return keys.gsi4sk(self.person_id, self.opened_at)

    def gsi4pk(self, shard_count: int | None) -> str:
        """The key for a layout: None = legacy; N = sharded (an anomaly cannot be routed)."""
        if shard_count is None or self.person_id is None:
            return keys.LEGACY_GSI4PK
        return keys.shard_gsi4pk_for_person(self.person_id, shard_count)


@dataclass
class Dataset:
    spec: SeedSpec
    persons: tuple[str, ...]
    managers: tuple[str, ...]
    sagas: tuple[SagaRecord, ...]
    person_manager: dict[str, str]
    # Per manager, the tenants whose renewals the list page shows (persons with an open saga).
    tenants: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def open_sagas(self) -> list[SagaRecord]:
        return [s for s in self.sagas if s.is_open and s.person_id is not None]

    @property
    def anomalies(self) -> list[SagaRecord]:
        return [s for s in self.sagas if s.person_id is None]

    @property
    def persons_with_open_saga(self) -> list[str]:
        return sorted({s.person_id for s in self.open_sagas if s.person_id is not None})

    def saga_items(self, shard_count: int | None = None) -> Iterator[dict[str, Any]]:
        """Saga rows in the wire shape: legacy layout (None) or sharded under N."""
        for record in self.sagas:
            yield saga_item(record, shard_count)

    def other_items(self) -> Iterator[dict[str, Any]]:
        """Rows of other entity types sharing the table; none carries a GSI4 attribute."""
        rng = random.Random(self.spec.seed + 1)
        for manager in self.managers:
            yield serialize(
                {
                    "PK": f"PM#{manager}",
                    "SK": "PROFILE",
                    "entityType": "PropertyManager",
                    "managerId": manager,
                    "name": _name(rng),
                    "email": f"{manager.lower()}@propflow.example",
                }
            )
        for person in self.persons:
            yield serialize(
                {
                    "PK": f"PERSON#{person}",
                    "SK": "PROFILE",
                    "entityType": "Person",
                    "personId": person,
                    "name": _name(rng),
                    "email": f"{person.lower()}@tenant.example",
                    "phone": "+1555" + "".join(rng.choices(string.digits, k=7)),
                    "managerId": self.person_manager[person],
                    "createdAt": utc_iso(EPOCH - timedelta(days=rng.randint(30, 1500))),
                }
            )
        for record in self.sagas:
            # The lease names its tenant even where the saga row lost it: the repair source.
            lease = {
                "PK": f"LEASE#{record.lease_id}",
                "SK": "META",
                "entityType": "Lease",
                "leaseId": record.lease_id,
                "managerId": record.manager_id,
                "propertyId": f"prop_{record.salt % 97:03d}",
                "unitLabel": f"{record.salt % 31 + 1}{'ABCD'[record.salt % 4]}",
                "monthlyRent": Decimal(1200 + record.salt % 1800),
                "endDate": record.opened_at[:10],
            }
            person = record.person_id or self._anomaly_owner(record)
            lease["personId"] = person
            yield serialize(lease)
        for person in self.persons_with_open_saga:
            for n in range(self.spec.messages_per_open_person):
                sent = EPOCH - timedelta(minutes=rng.randint(1, 60 * 24 * 14))
                yield serialize(
                    {
                        "PK": f"CONV#{person}",
                        "SK": f"MSG#{utc_iso(sent)}#{n}",
                        "entityType": "ConversationMessage",
                        "personId": person,
                        "channel": rng.choice(("sms", "email", "voice")),
                        "body": " ".join(rng.choices(_WORDS, k=rng.randint(8, 40))),
                    }
                )

    def _anomaly_owner(self, record: SagaRecord) -> str:
        # Deterministic: the lease of an anomalous saga belongs to a real person.
        return self.persons[record.salt % len(self.persons)]

    def lease_person(self, record: SagaRecord) -> str:
        """The personId the lease row of `record` carries (for anomalies: the repair source)."""
        return record.person_id or self._anomaly_owner(record)


def build_dataset(spec: SeedSpec | None = None) -> Dataset:
    """The dataset of `spec`, deterministic in spec.seed."""
    spec = (spec or SeedSpec()).validate()
    rng = random.Random(spec.seed)
    persons = tuple(_ulid(rng, "person_") for _ in range(spec.persons))
    managers = tuple(f"PM{n:03d}" for n in range(spec.property_managers))
    person_manager = {p: managers[rng.randrange(len(managers))] for p in persons}

    open_persons = rng.sample(persons, spec.open_sagas)
    terminal_persons = [persons[i % len(persons)] for i in range(spec.terminal_sagas)]
    rng.shuffle(terminal_persons)

    sagas: list[SagaRecord] = []

    def add(person: str | None, state: str, age_days: tuple[int, int]) -> None:
        opened = EPOCH - timedelta(
            days=rng.randint(*age_days),
            seconds=rng.randint(0, 86399),
            milliseconds=rng.randint(0, 999),
        )
        salt = rng.getrandbits(31)
        # An anomalous row's lease still names its tenant (Dataset.lease_person).
        owner = person or persons[salt % len(persons)]
        sagas.append(
            SagaRecord(
                saga_id=_ulid(rng, "rs_"),
                person_id=person,
                lease_id=_ulid(rng, "lease_"),
                manager_id=person_manager[owner],
                opened_at=utc_iso(opened),
                state=state,
                size=rng.randint(spec.min_item_bytes, spec.max_item_bytes),
                salt=salt,
            )
        )

    for person in open_persons:
        add(person, rng.choice(OPEN_STATES), (1, 60))
    for person in terminal_persons:
        add(person, rng.choice(TERMINAL_STATES), (61, 730))
    for _ in range(spec.anomalies):
        add(None, rng.choice(TERMINAL_STATES), (400, 900))

    tenants: dict[str, list[str]] = {m: [] for m in managers}
    for person in sorted(set(open_persons)):
        tenants[person_manager[person]].append(person)
    return Dataset(
        spec=spec,
        persons=persons,
        managers=managers,
        sagas=tuple(sagas),
        person_manager=person_manager,
        tenants={m: tuple(t) for m, t in tenants.items()},
    )


def bare_saga_row(
    saga_id: str,
    person_id: str,
    *,
    gsi4pk: str,
    state: str = "OPENED",
    opened_at: str = "2026-01-01T00:00:00.000Z",
) -> dict[str, Any]:
    """A saga row with only what the index and its readers use, as plain values (serialize it
    for the wire): the benches' rows, whose size and other attributes are theirs to add."""
    return {
        **keys.saga_table_key(saga_id),
        "entityType": keys.ENTITY_TYPE,
        "sagaId": saga_id,
        "personId": person_id,
        "leaseId": f"lease-{saga_id}",
        "openedAt": opened_at,
        "updatedAt": opened_at,
        "state": state,
        "GSI4PK": gsi4pk,
        "GSI4SK": keys.gsi4sk(person_id, opened_at),
    }


def saga_item(record: SagaRecord, shard_count: int | None = None) -> dict[str, Any]:
    """One saga row in the wire shape, exactly record.size bytes."""
    plain: dict[str, Any] = {
        **keys.saga_table_key(record.saga_id),
        "entityType": keys.ENTITY_TYPE,
        "sagaId": record.saga_id,
        "leaseId": record.lease_id,
        "openedAt": record.opened_at,
        "state": record.state,
        "updatedAt": record.opened_at,
        "GSI4PK": record.gsi4pk(shard_count),
        "GSI4SK": record.gsi4sk,
    }
    if record.person_id is not None:
        plain["personId"] = record.person_id
    plain.update(filler_attributes(record, record.opened_at))
    return pad_to_size(serialize(plain), record.size)


def filler_attributes(record: SagaRecord, opened_at: str) -> dict[str, Any]:
    """Attributes other code owns on a saga row (workflow ids, offer, history)."""
    rng = random.Random(record.salt)
    opened = datetime.fromisoformat(opened_at)
    attributes: dict[str, Any] = {
        "managerId": record.manager_id,
        "propertyId": f"prop_{record.salt % 97:03d}",
        "workflowId": f"renewal-{record.lease_id}",
        "workflowRunId": _ulid(rng, ""),
        "workflowHeartbeatAt": utc_iso(opened + timedelta(minutes=rng.randint(1, 600))),
        "currentRent": Decimal(1200 + record.salt % 1800),
        "offer": {
            "rent": Decimal(1250 + record.salt % 1900),
            "termMonths": Decimal(rng.choice((6, 12, 18, 24))),
            "concessions": rng.choice(("none", "one month free parking", "carpet refresh")),
        },
        "history": [
            {"state": state, "at": utc_iso(opened + timedelta(hours=h)), "by": "workflow"}
            for h, state in enumerate(OPEN_STATES[: 1 + record.salt % 4])
        ],
    }
    if record.state == "PREPARE_FAILED":
        attributes["prepareAttempts"] = Decimal(record.salt % 3)
    return attributes


def pad_to_size(item: dict[str, Any], size: int) -> dict[str, Any]:
    """Add the padding attribute so that item_size(item) == size exactly."""
    base = item_size(item) + len(PAD_ATTRIBUTE)
    if base > size:
        raise InvalidInputError(
            f"a row of {base} bytes cannot be padded down to {size}: raise min_item_bytes"
        )
    needed = size - base
    # ASCII filler, so characters are bytes; rotated by size so rows do not all read alike.
    start = size % len(_NOTE)
    filler = _NOTE[start:] + " " + _NOTE[:start] + " "
    text = (filler * (needed // len(filler) + 1))[:needed]
    item[PAD_ATTRIBUTE] = {"S": text}
    assert item_size(item) == size
    return item


def _ulid(rng: random.Random, prefix: str) -> str:
    """A ULID-shaped id: "01J" then 23 Crockford base-32 characters."""
    return prefix + "01J" + rng.randbytes(23).translate(_CROCKFORD_BYTES).decode("ascii")


def _name(rng: random.Random) -> str:
    first = rng.choice(("Ana", "Ben", "Chloé", "Dmitri", "Eun-ji", "Farah", "Gus", "Hana"))
    last = rng.choice(("Okafor", "Silva", "Nguyen", "Müller", "Kowalski", "Haddad", "Ito"))
    return f"{first} {last}"


# ---- writing the dataset ----------------------------------------------------------------------


@dataclass(frozen=True)
class SeedStats:
    saga_rows: int
    other_rows: int
    seconds: float


def seed_table(
    client: Any,
    table_name: str,
    dataset: Dataset,
    *,
    shard_count: int | None = None,
    include_other_entities: bool = True,
    workers: int = 4,
    on_progress: Callable[[int], None] | None = None,
) -> SeedStats:
    """Write the dataset (legacy layout, or sharded under shard_count) with BatchWriteItem."""
    started = time.monotonic()
    sagas = list(dataset.saga_items(shard_count))
    others = list(dataset.other_items()) if include_other_entities else []
    write_items(client, table_name, sagas + others, workers=workers, on_progress=on_progress)
    return SeedStats(len(sagas), len(others), time.monotonic() - started)


def write_items(
    client: Any,
    table_name: str,
    items: Sequence[dict[str, Any]],
    *,
    workers: int = 4,
    on_progress: Callable[[int], None] | None = None,
) -> None:
    """BatchWriteItem in batches of 25 on a small pool; unprocessed items are retried."""
    batches = [items[i : i + _BATCH] for i in range(0, len(items), _BATCH)]

    def write(batch: Sequence[dict[str, Any]]) -> int:
        _write_batch(client, table_name, batch)
        return len(batch)

    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="seed") as pool:
        for written in pool.map(write, batches):
            if on_progress is not None:
                on_progress(written)


def _write_batch(client: Any, table_name: str, batch: Iterable[dict[str, Any]]) -> None:
    pending = [{"PutRequest": {"Item": item}} for item in batch]
    for attempt in range(_MAX_BATCH_ATTEMPTS):
        response = client.batch_write_item(RequestItems={table_name: pending})
        pending = (response.get("UnprocessedItems") or {}).get(table_name, [])
        if not pending:
            return
        time.sleep(min(2.0, 0.05 * 2**attempt))
    raise RuntimeError(
        f"{len(pending)} seed item(s) still unprocessed after {_MAX_BATCH_ATTEMPTS} attempts"
    )
