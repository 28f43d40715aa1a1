"""SagaIndex: the renewal-saga index for Python services, as the TypeScript package's
`SagaIndex` is for TypeScript ones (README, "Python services").

It follows the table's control record (docs/control-contract.md): one strongly consistent read
per T = 30 s per instance, served for at most T + grace when a re-read fails, then
ControlRecordUnavailableError; writers switch at effectiveAt by this process's wall clock.
Every read goes through the same repository the Lambda functions use (saga_index.store), along
the routing of the state followed at the moment of the call.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from saga_index.index import OPEN_STATES, InvalidInputError, Person, keys, names
from saga_index.layout_change.record import (
    ControlProvider,
    ControlState,
    ControlStore,
    Routing,
    StateSource,
)
from saga_index.store import (
    MAX_PAGE_LIMIT,
    SagaPage,
    SagaRepository,
    decode_cursor,
    read_partitions,
    validate_limit,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

log = logging.getLogger(__name__)

DEFAULT_MAX_WORKERS = 16
Row = dict[str, Any]


@dataclass(frozen=True)
class WriteKeys:
    """The index keys a writer adds to its PutItem / UpdateItem of a saga row now.

    `open_saga_pk` is the sparse open-saga index's key (OpenSagaPK), present only when the row
    gets one: its saga is open and the record says writers stamp it now. A row written without
    it must not keep one: a PutItem of `as_item()` leaves it out; an UpdateItem REMOVEs it
    (`SagaIndex.key_update` says so)."""

    gsi4pk: str
    gsi4sk: str
    open_saga_pk: str | None = None

    def as_item(self) -> dict[str, dict[str, str]]:
        """The attributes to SET as DynamoDB JSON (GSI4PK, GSI4SK, and OpenSagaPK when the row
        gets one), to merge into a low-level client's PutItem Item."""
        item = {
            names.INDEX_PARTITION_KEY: {"S": self.gsi4pk},
            names.INDEX_SORT_KEY: {"S": self.gsi4sk},
        }
        if self.open_saga_pk is not None:
            item[names.OPEN_INDEX_PARTITION_KEY] = {"S": self.open_saga_pk}
        return item


@dataclass(frozen=True)
class KeyUpdate:
    """What an UpdateItem of a saga row does with the index keys: SET `set` (as_item()), REMOVE
    the attributes of `remove` (OpenSagaPK when `set` carries none: a saga closing, or no open
    index being stamped, leaves the open index by losing it)."""

    set: WriteKeys
    remove: tuple[str, ...]


@dataclass(frozen=True)
class PersonKeys:
    """One person's keys now: the GSI4PK a writer stamps, the GSI4PKs a read queries in order,
    the OpenSagaPK a writer stamps on an OPEN saga of theirs (None: none, and it removes any)."""

    write_key: str
    read_keys: tuple[str, ...]
    open_write_key: str | None = None


class SagaIndex:
    """Reads and keys the renewal-saga index the way the control record says. Construct one per
    process (next to the DynamoDB client) and share it: it is thread-safe, and its record cache
    is what keeps the record's read to one per T.

    Rows are dicts as stored (deserialised: strings, Decimals, ...). A read that cannot read
    every partition it needs raises EnumerationError (nothing partial); a record that cannot be
    read raises ControlRecordUnavailableError (no layout is ever guessed)."""

    def __init__(
        self,
        client: DynamoDBClient,
        table_name: str,
        *,
        index_name: str = names.INDEX_NAME,
        max_workers: int = DEFAULT_MAX_WORKERS,
        provider: StateSource | None = None,
    ) -> None:
        """`client`: a boto3 DynamoDB client (its retry configuration applies to every
        request). `provider`: the record's cached view to follow (tests: one with its own clock
        or T); by default one over this client and table."""
        if not table_name:
            raise ValueError("table_name is required")
        if max_workers < 1:
            raise ValueError(f"max_workers must be >= 1, got {max_workers}")
        self.client = client
        self.table_name = table_name
        self.index_name = index_name
        self.max_workers = max_workers
        self._provider: StateSource = provider or ControlProvider(
            ControlStore(client, table_name, index_name=index_name, refuse_lost=True)
        )

    # ---- the record -----------------------------------------------------------------------

    def state(self) -> ControlState:
        """The control state this process follows now (read at most T ago)."""
        return self._provider.state()

    def routing(self) -> Routing:
        """The routing of that state at this process's wall clock: the key plan of every call."""
        return self._provider.routing()

    # ---- keys -----------------------------------------------------------------------------

    def write_keys(
        self, person_id: str, opened_at: str, *, saga_state: str | None = None
    ) -> WriteKeys:
        """The keys a writer stamps on a saga row of `person_id` opened at `opened_at` that the
        write leaves in `saga_state` (None: a new saga, open). A closed state (not in
        OPEN_STATES) gets no OpenSagaPK whatever the record says, so a writer that closes a
        saga must pass it (or use `key_update`). InvalidPersonIdError / InvalidKeyError /
        InvalidInputError before any request."""
        sort_key = keys.gsi4sk(person_id, opened_at)
        is_open = _saga_is_open(saga_state)
        person = Person.of(person_id)
        routing = self.routing()
        return WriteKeys(
            gsi4pk=routing.write_key(person),
            gsi4sk=sort_key,
            open_saga_pk=routing.open_write_key(person) if is_open else None,
        )

    def key_update(
        self, person_id: str, opened_at: str, *, saga_state: str | None = None
    ) -> KeyUpdate:
        """write_keys as an UpdateItem applies them: the attributes to SET, and OpenSagaPK to
        REMOVE when the row gets none (a saga closing leaves the open index by losing it)."""
        written = self.write_keys(person_id, opened_at, saga_state=saga_state)
        remove = () if written.open_saga_pk is not None else (names.OPEN_INDEX_PARTITION_KEY,)
        return KeyUpdate(set=written, remove=remove)

    def keys_for(self, person_id: str) -> PersonKeys:
        person = Person.of(person_id)
        routing = self.routing()
        return PersonKeys(
            write_key=routing.write_key(person),
            read_keys=routing.read_keys(person),
            open_write_key=routing.open_write_key(person),
        )

    def enumeration_stages(self) -> tuple[tuple[str, ...], ...]:
        """The GSI4PKs an enumeration reads now, stage by stage."""
        return self.routing().enumeration_stages()

    # ---- reads ----------------------------------------------------------------------------

    def get_sagas_by_person(self, person_id: str) -> list[Row]:
        """That person's saga rows (source key, then target key; that exact person only),
        sorted by GSI4SK, PK, SK; a failed read raises EnumerationError."""
        person = Person.of(person_id)
        return self.get_sagas_by_persons([person.id])[person.id]

    def get_sagas_by_persons(self, person_ids: Iterable[str]) -> dict[str, list[Row]]:
        """Every person's rows, keyed by personId, at most max_workers persons read at once.
        Every id is checked before any request; one failed read fails the call
        (EnumerationError naming each personId whose read failed)."""
        people = {p.id: p for p in (Person.of(person_id) for person_id in person_ids)}
        if not people:
            return {}
        repository = self._repository()
        reads = read_partitions(
            list(people),
            lambda person_id: repository.get_sagas_by_person(people[person_id]).items,
            max_workers=self.max_workers,
            thread_name_prefix="saga-person",
            logger=log,
            failure_message="saga read failed for personId %r: %s",
        )
        return {person_id: reads[person_id] for person_id in people}

    def get_all_sagas(self) -> list[Row]:
        """Every saga, sorted; complete or EnumerationError."""
        return self._repository().get_all_sagas().items

    def get_all_open_sagas(self) -> list[Row]:
        """Every saga in an open state (OPEN_STATES), sorted; complete or EnumerationError."""
        return self._repository().get_all_open_sagas().items

    def page_of_all_sagas(self, *, limit: int, cursor: str | None = None) -> SagaPage:
        """At most `limit` (1-1000) sagas in read order, and `cursor`, the next page's (None
        after the last page). Refused with InvalidCursorError (a cursor that does not parse),
        CursorLayoutChangedError (taken under another layout) or PagingDuringMoveError (rows
        are moving: use get_all_sagas)."""
        _check_page(limit, cursor)
        return self._repository().page_of_all_sagas(limit=limit, cursor=cursor)

    def page_of_open_sagas(self, *, limit: int, cursor: str | None = None) -> SagaPage:
        """page_of_all_sagas for the open sagas."""
        _check_page(limit, cursor)
        return self._repository().page_of_open_sagas(limit=limit, cursor=cursor)

    def pages_of_all_sagas(self, *, page_size: int = MAX_PAGE_LIMIT) -> Iterator[list[Row]]:
        """get_all_sagas a page at a time, along the routing of the state at the first page (as
        the TypeScript page iterators). At rest each page is read when asked for (one page of
        rows held at a time); while rows move the full enumeration is read first (its dual read
        holds every row to de-duplicate a moving one) and handed out in pages."""
        return self._pages("all", page_size)

    def pages_of_open_sagas(self, *, page_size: int = MAX_PAGE_LIMIT) -> Iterator[list[Row]]:
        """pages_of_all_sagas for the open sagas."""
        return self._pages("open", page_size)

    def _pages(self, of: str, page_size: int) -> Iterator[list[Row]]:
        validate_limit(page_size)
        repository = self._repository()
        if len(repository.plan.enumeration_stages()) > 1:
            full = repository.get_all_sagas if of == "all" else repository.get_all_open_sagas
            rows = full().items
            for at in range(0, len(rows), page_size):
                yield rows[at : at + page_size]
            return
        read = repository.page_of_all_sagas if of == "all" else repository.page_of_open_sagas
        cursor: str | None = None
        while True:
            page = read(limit=page_size, cursor=cursor)
            if page.rows:
                yield page.rows
            if page.cursor is None:
                return
            cursor = page.cursor

    def _repository(self) -> SagaRepository:
        return SagaRepository(
            self.client,
            self.table_name,
            plan=self.routing(),
            index_name=self.index_name,
            max_workers=self.max_workers,
        )


def _saga_is_open(saga_state: str | None) -> bool:
    """Whether a saga written in `saga_state` counts as open (None: a new saga, open)."""
    if saga_state is None:
        return True
    if not isinstance(saga_state, str) or not saga_state:
        raise InvalidInputError(f"saga_state must be a non-empty string, got {saga_state!r}")
    return saga_state in OPEN_STATES


def _check_page(limit: int, cursor: str | None) -> None:
    """A bad limit or a cursor that does not parse is refused before the record is read."""
    validate_limit(limit)
    if cursor is not None:
        decode_cursor(cursor)
