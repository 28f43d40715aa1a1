"""Pages and cursors of the enumerations (saga_index.store.paging) on moto, through the public
API (saga_index.SagaIndex): concatenating the pages equals the full read under any limit and
any N, a cursor is refused after a switch of layout, while rows move, and when it does not
parse."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto import mock_aws

from saga_index import (
    CursorLayoutChangedError,
    EnumerationError,
    InvalidCursorError,
    InvalidInputError,
    PagingDuringMoveError,
    SagaIndex,
    SagaPage,
)
from saga_index.index import Layout, names
from saga_index.layout_change.record import OpenIndex, Routing
from saga_index.layout_change.record.provider import FixedStateSource
from saga_index.layout_change.record.state import ControlState
from saga_index.store import SagaRepository
from tests.support.backends import Backend, make_backend
from tests.support.open_index import add_open_index

STATES = ("OPENED", "NEGOTIATING", "RENEWED", "DECLINED", "EXPIRED")
S16 = Layout.sharded(16)


def _index(backend: Backend, routing: Routing) -> SagaIndex:
    provider: Any = FixedStateSource(ControlState.never_migrated(), routing)
    return SagaIndex(backend.client, backend.table_name, provider=provider)


def _keys(rows: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(r["PK"], r["SK"]) for r in rows]


def _all_pages(read: Any, limit: int) -> tuple[list[dict[str, Any]], list[SagaPage]]:
    pages: list[SagaPage] = []
    cursor: str | None = None
    while True:
        page = read(limit=limit, cursor=cursor)
        assert len(page.rows) <= limit
        pages.append(page)
        if page.cursor is None:
            return [row for p in pages for row in p.rows], pages
        cursor = page.cursor


@pytest.fixture
def dynamo(synthesized_template: dict[str, Any]) -> Iterator[Backend]:
    with mock_aws():
        yield make_backend("moto", synthesized_template, endpoint_url=None)


rows_strategy = st.lists(
    st.tuples(st.sampled_from(["p-1", "alice", "José", "tenant#42", "bob", "p-2"]),
              st.sampled_from(STATES)),
    max_size=40,
)  # fmt: skip


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    rows=rows_strategy,
    shard_count=st.sampled_from([None, 1, 2, 8, 16]),
    limit=st.integers(min_value=1, max_value=25),
    page_size=st.one_of(st.none(), st.integers(min_value=1, max_value=7)),
)
def test_given_any_rows_n_and_limit_then_the_pages_concatenate_to_the_full_read(
    synthesized_template: dict[str, Any],
    rows: list[tuple[str, str]],
    shard_count: int | None,
    limit: int,
    page_size: int | None,
) -> None:
    with mock_aws():
        backend = make_backend("moto", synthesized_template, endpoint_url=None)
        for n, (person, state) in enumerate(rows):
            backend.put_saga(
                f"s{n:03d}",
                person,
                state=state,
                gsi4pk=None if shard_count is None else "shard",
                shard_count=shard_count or 16,
                opened_at=f"2026-01-01T00:00:{n % 60:02d}.000Z",
            )
        routing = Routing.for_phase(
            "legacy" if shard_count is None else "sharded", shard_count or 16
        )
        repository = SagaRepository(
            backend.client, backend.table_name, plan=routing, page_size=page_size
        )

        for of, full, page in (
            ("all", repository.get_all_sagas, repository.page_of_all_sagas),
            ("open", repository.get_all_open_sagas, repository.page_of_open_sagas),
        ):
            paged, pages = _all_pages(page, limit)

            assert len(_keys(paged)) == len(set(_keys(paged))), f"{of}: a saga repeated"
            assert sorted(_keys(paged)) == sorted(_keys(full().items)), f"{of}: pages != full"
            assert all(len(p.rows) == limit for p in pages if p.cursor is not None)


def test_given_a_cursor_taken_at_sharded_16_then_after_the_reshard_to_32_it_is_refused(
    dynamo: Backend,
) -> None:
    for n in range(12):
        dynamo.put_saga(f"s{n}", f"p-{n}", gsi4pk="shard", shard_count=16)
    first = _index(dynamo, Routing.for_phase("sharded", 16)).page_of_all_sagas(limit=5)
    assert first.cursor is not None

    after_switch = _index(dynamo, Routing.for_phase("sharded", 32))
    with pytest.raises(CursorLayoutChangedError, match="another key plan"):
        after_switch.page_of_all_sagas(limit=5, cursor=first.cursor)
    legacy = _index(dynamo, Routing.for_phase("legacy", 16))
    with pytest.raises(CursorLayoutChangedError, match="Start the enumeration again"):
        legacy.page_of_all_sagas(limit=5, cursor=first.cursor)


def test_given_rows_moving_then_paging_is_refused_naming_the_full_enumeration(
    dynamo: Backend,
) -> None:
    dynamo.put_saga("s1", "p-1")
    at_rest = _index(dynamo, Routing.for_phase("legacy", 16)).page_of_open_sagas(limit=1)
    moving = _index(dynamo, Routing.for_phase("migrating", 16))

    with pytest.raises(PagingDuringMoveError, match="get_all_sagas"):
        moving.page_of_all_sagas(limit=10)
    with pytest.raises(PagingDuringMoveError):
        moving.page_of_open_sagas(limit=10, cursor=at_rest.cursor or None)
    assert [r["sagaId"] for r in moving.get_all_sagas()] == ["s1"]


@pytest.mark.parametrize(
    "cursor",
    ["", "not a cursor!", "e30", "eyJ2IjoyfQ", "x" * 40_000, "AAAA"],
    ids=["empty", "not-base64url", "empty-object", "version-2", "too-long", "not-json"],
)
def test_given_a_cursor_that_does_not_parse_then_it_is_refused_before_any_request(
    dynamo: Backend, cursor: str
) -> None:
    index = _index(dynamo, Routing.for_phase("sharded", 16))
    sent: list[str] = []
    dynamo.client.meta.events.register("before-send.dynamodb.*", lambda **kw: sent.append("x"))

    with pytest.raises(InvalidCursorError, match="cursor"):
        index.page_of_all_sagas(limit=5, cursor=cursor)
    assert sent == []


def test_given_an_open_cursor_then_the_all_enumeration_refuses_it(dynamo: Backend) -> None:
    for n in range(4):
        dynamo.put_saga(f"s{n}", f"p-{n}")
    index = _index(dynamo, Routing.for_phase("legacy", 16))
    page = index.page_of_open_sagas(limit=2)
    assert page.cursor is not None

    with pytest.raises(InvalidCursorError, match="'open' enumeration"):
        index.page_of_all_sagas(limit=2, cursor=page.cursor)


@pytest.mark.parametrize("limit", [0, -1, 1001, 2.5, True])
def test_given_a_limit_out_of_range_then_it_is_refused(dynamo: Backend, limit: Any) -> None:
    index = _index(dynamo, Routing.for_phase("legacy", 16))

    with pytest.raises(InvalidInputError, match="limit must be an integer from 1 to 1000"):
        index.page_of_all_sagas(limit=limit)


def test_given_a_partition_that_fails_then_the_page_raises_naming_it(dynamo: Backend) -> None:
    provider: Any = FixedStateSource(ControlState.never_migrated(), Routing.for_phase("legacy", 16))
    missing = SagaIndex(dynamo.client, "no-such-table", provider=provider)

    with pytest.raises(EnumerationError, match="RenewalSaga: ResourceNotFoundException") as raised:
        missing.page_of_all_sagas(limit=5)
    assert raised.value.partitions == ["RenewalSaga"]


@pytest.mark.parametrize("phase", ["legacy", "sharded", "migrating"])
def test_given_any_phase_then_the_page_iterators_hold_every_saga_once(
    dynamo: Backend, phase: str
) -> None:
    # Half the rows on the legacy key, half on their shard: a migration half done.
    for n in range(11):
        dynamo.put_saga(
            f"s{n:02d}", f"p-{n}", gsi4pk="shard" if n % 2 else None, state=STATES[n % 5]
        )
    index = _index(dynamo, Routing.for_phase(phase, 16))

    for pages, full in (
        (index.pages_of_all_sagas(page_size=3), index.get_all_sagas()),
        (index.pages_of_open_sagas(page_size=2), index.get_all_open_sagas()),
    ):
        seen = list(pages)
        assert all(0 < len(page) <= 3 for page in seen)
        assert sorted(_keys([r for page in seen for r in page])) == sorted(_keys(full))


def test_given_reads_on_the_open_index_when_pages_end_inside_a_key_then_they_resume_there(
    dynamo: Backend,
) -> None:
    """The open-saga index's Query keys name OpenSagaPK: a page that ends inside one of its keys
    gives a cursor (its partition slot holding OpenSagaPK's value) that resumes exactly there."""
    add_open_index(dynamo.client, dynamo.table_name)
    stamped = OpenIndex.of("open", 4)
    for n in range(24):
        person = f"p-{n % 6}"
        extra = {names.OPEN_INDEX_PARTITION_KEY: stamped.key_for(person)} if n % 3 else {}
        dynamo.put_saga(f"s-{n:02d}", person, gsi4pk=S16.key_for(person), **extra)
    routing = Routing.between(S16, open_writes=stamped, open_reads=stamped)
    repo = SagaRepository(dynamo.client, dynamo.table_name, plan=routing)
    full = repo.get_all_open_sagas().items
    assert len(full) == 16  # only the stamped rows: the open index answered
    for limit in (1, 2, 3, 5):
        rows, pages = _all_pages(repo.page_of_open_sagas, limit)
        assert sorted(_keys(rows)) == sorted(_keys(full)), limit
        inside = [p.cursor for p in pages if p.cursor and '"after":null' not in _text(p.cursor)]
        assert inside, f"no page of {limit} ended inside a key"


def _text(cursor: str) -> str:
    return base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("utf-8")
