"""Which persons' by-person reads a parity run checks: a seeded sample of the routable personIds
in the base table, so a run can be repeated exactly (`--seed`)."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from typing import Any

from saga_index.index import keys
from saga_index.index.errors import InvalidInputError, InvalidPersonIdError

DEFAULT_SAMPLE = 20


def sample_persons(
    rows: Iterable[Mapping[str, Any]], sample: int, seed: int | None
) -> tuple[str, ...]:
    """Up to `sample` distinct routable personIds, chosen by `seed` (sorted)."""
    if isinstance(sample, bool) or not isinstance(sample, int) or sample < 0:
        raise InvalidInputError(f"sample must be a non-negative integer, got {sample!r}")
    persons: set[str] = set()
    for row in rows:
        person = row.get("personId")
        try:
            persons.add(keys.validate_person_id(person))
        except InvalidPersonIdError:
            continue
    ordered = sorted(persons)
    chosen = random.Random(seed).sample(ordered, min(sample, len(ordered)))
    return tuple(sorted(chosen))
