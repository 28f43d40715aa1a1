"""A page of an enumeration: at most `limit` rows, and the cursor of the next page
(docs/data-model.md, "Pages and cursors").

A page reads the plan's partitions one after the other, in the plan's order, each from where
the cursor stopped, with a Query `Limit` of the rows still missing, so it never reads more rows
than it returns (plus what the open filter drops). Concatenating the pages of one enumeration
gives every row a full read of the same partitions gives, each once: a partition is left only
after a Query answers without a LastEvaluatedKey, and a cursor resumes exactly after the last
key returned.

Only at rest (one enumeration stage). While rows move, the full enumeration holds the rows of
the first stage until the second is read so that a row seen under both keys counts once; a
cursor handed to a caller between two requests cannot hold them, so a row the backfill moved
between two pages would come back twice (and a saga closed under its new key could have been
returned as open from its old copy). PagingDuringMoveError says so instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from saga_index.index import InvalidInputError
from saga_index.store.cursor import (
    CursorLayoutChangedError,
    Enumeration,
    InvalidCursorError,
    PagingDuringMoveError,
    Position,
    decode_cursor,
    encode_cursor,
    plan_fingerprint,
    position_of,
    start_key,
)

MAX_PAGE_LIMIT = 1000

# (partition, ExclusiveStartKey or None, Limit) -> (rows, LastEvaluatedKey or None)
FetchPage = Callable[
    [str, Mapping[str, Any] | None, int],
    tuple[list[dict[str, Any]], Mapping[str, Any] | None],
]


@dataclass(frozen=True)
class SagaPage:
    """At most `limit` rows in read order, and the cursor of the next page: None when this page
    ends the enumeration (the last page may hold fewer rows, or none)."""

    rows: list[dict[str, Any]]
    cursor: str | None
    requests: int = 0


def validate_limit(limit: object) -> int:
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_PAGE_LIMIT:
        raise InvalidInputError(
            f"limit must be an integer from 1 to {MAX_PAGE_LIMIT}, got {limit!r}"
        )
    return limit


def start_position(
    stages: Sequence[Sequence[str]], of: Enumeration, cursor: str | None
) -> tuple[tuple[str, ...], str, Position]:
    """(the partitions, the plan's fingerprint, where this page starts), or the refusal: a
    cursor that does not parse, paging during a move, a cursor of another plan or
    enumeration."""
    parsed = None if cursor is None else decode_cursor(cursor)
    if len(stages) != 1:
        raise PagingDuringMoveError(
            f"paging is refused while rows move between layouts ({len(stages)} enumeration "
            "stages): a row moved between two pages would be returned twice. Use the full "
            "enumeration (get_all_sagas / get_all_open_sagas) until the move completes"
        )
    partitions = tuple(stages[0])
    fingerprint = plan_fingerprint(stages)
    if parsed is None:
        return partitions, fingerprint, Position(at=partitions[0])
    if parsed.plan != fingerprint:
        raise CursorLayoutChangedError(
            f"the cursor was taken under another key plan (fingerprint {parsed.plan}, now "
            f"{fingerprint}): the layout changed since, and resuming could skip or repeat "
            "sagas. Start the enumeration again without a cursor"
        )
    if parsed.of != of:
        raise InvalidCursorError(
            f"the cursor is one of the {parsed.of!r} enumeration, not of {of!r}"
        )
    if parsed.position.at not in partitions:
        raise InvalidCursorError(
            f"the cursor's partition {parsed.position.at!r} is not one this plan reads"
        )
    return partitions, fingerprint, parsed.position


def read_page(
    stages: Sequence[Sequence[str]],
    of: Enumeration,
    *,
    limit: int,
    cursor: str | None,
    fetch: FetchPage,
) -> SagaPage:
    """The page starting at `cursor` (None: the first page) of the enumeration `of` along
    `stages`, reading through `fetch`."""
    limit = validate_limit(limit)
    partitions, fingerprint, position = start_position(stages, of, cursor)
    index = partitions.index(position.at)
    after = None if position.after is None else start_key(position.after)
    rows: list[dict[str, Any]] = []
    requests = 0
    while index < len(partitions) and len(rows) < limit:
        items, last = fetch(partitions[index], after, limit - len(rows))
        requests += 1
        rows.extend(items)
        if last:
            after = dict(last)
        else:
            index, after = index + 1, None
    if index == len(partitions):
        return SagaPage(rows=rows, cursor=None, requests=requests)
    at = partitions[index]
    next_position = Position(at=at, after=None if after is None else position_of(after))
    return SagaPage(
        rows=rows, cursor=encode_cursor(of, fingerprint, next_position), requests=requests
    )
