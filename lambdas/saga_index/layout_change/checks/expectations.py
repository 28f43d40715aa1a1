"""Where a state's rows may sit: the keys its readers read and the keys each person's rows may
carry. Drift judges every row it reads by them; parity explains what a read misses by them.
RowRef names one row as every check reports it (drift's samples, the layout probe's rows)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from saga_index.index import (
    DEFAULT_SHARD_COUNT,
    LEGACY,
    InvalidKeyError,
    Layout,
    Person,
    keys,
    names,
)
from saga_index.layout_change.record import Routing


class Verdict(StrEnum):
    """Where a row on the legacy key or a shard key stands in a state."""

    OK = "ok"
    UNEXPECTED_LEGACY = "unexpected-legacy"
    UNEXPECTED_SHARDED = "unexpected-sharded"
    MISROUTED = "misrouted"
    ANOMALOUS = "anomalous"


@dataclass(frozen=True)
class Expectations:
    """Where a state's rows may sit: the keys its readers read and each person's keys."""

    routing: Routing

    @property
    def layouts(self) -> tuple[Layout, ...]:
        return tuple(dict.fromkeys((self.routing.source, self.routing.target)))

    @property
    def reads_legacy(self) -> bool:
        return LEGACY in self.layouts

    @property
    def shard_count(self) -> int:
        """The N whose shard keys the guard reads every run: the largest the state names, else
        the default (a legacy state still watches the keys a sharded writer would stamp)."""
        counts = [layout.shard_count for layout in self.layouts if layout.shard_count]
        return max(counts, default=DEFAULT_SHARD_COUNT)

    def readable(self) -> frozenset[str]:
        """Every GSI4PK an enumeration of this state reads."""
        return frozenset(self.routing.enumeration_keys())

    def person_keys(self, person_id: str) -> frozenset[str]:
        """The keys a row of this person may carry in this state: one per layout."""
        person = Person.of(person_id)
        return frozenset(layout.key_for(person) for layout in self.layouts)

    def judge(self, item: Mapping[str, Any]) -> Verdict:
        """What is wrong now with a row on the legacy key or a shard key (InvalidKeyError for
        any other GSI4PK: those are the scan's stray rows). A row on a key no reader of the
        state reads is unexpected whoever it belongs to, an unusable personId included; on a
        key that is read, a row whose personId cannot be routed is anomalous."""
        gsi4pk = item.get(names.INDEX_PARTITION_KEY)
        if not isinstance(gsi4pk, str) or (
            gsi4pk != keys.LEGACY_GSI4PK and keys.parse_gsi4pk(gsi4pk) is None
        ):
            raise InvalidKeyError(f"not a legacy or shard key: {gsi4pk!r}")
        if gsi4pk not in self.readable():
            # No reader of the state reads this key, so no enumeration returns the row and no
            # sweep sees its saga, whether or not its personId is usable: that is drift.
            if gsi4pk == keys.LEGACY_GSI4PK:
                return Verdict.UNEXPECTED_LEGACY
            return Verdict.UNEXPECTED_SHARDED
        if keys.person_anomaly(item) is not None:
            return Verdict.ANOMALOUS
        if gsi4pk not in self.person_keys(item["personId"]):
            return Verdict.MISROUTED
        return Verdict.OK


@dataclass(frozen=True)
class RowRef:
    """Enough of a row to find and repair it."""

    pk: str
    sk: str
    saga_id: Any
    person_id: Any
    gsi4pk: Any
    expected_gsi4pk: str | None = None

    @classmethod
    def of(cls, item: Mapping[str, Any], expected_gsi4pk: str | None = None) -> RowRef:
        return cls(
            pk=str(item.get("PK")),
            sk=str(item.get("SK")),
            saga_id=item.get("sagaId"),
            person_id=item.get("personId"),
            gsi4pk=item.get("GSI4PK"),
            expected_gsi4pk=expected_gsi4pk,
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "PK": self.pk,
            "SK": self.sk,
            "sagaId": self.saga_id,
            "personId": self.person_id,
            "gsi4pk": self.gsi4pk,
        }
        if self.expected_gsi4pk is not None:
            out["expectedGsi4pk"] = self.expected_gsi4pk
        return out
