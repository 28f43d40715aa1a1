"""Creates and transitions sagas, stamping the GSI4PK its key plan gives (saga_index.store.plan),
and the open-saga index's OpenSagaPK on an open saga when the plan stamps one (a closed saga's
is always removed: docs/control-contract.md, "The open-saga index").

The plan is fixed (`plan`), or followed (`follow`, called on every write: a ControlProvider's
`routing`, so a long-lived writer stamps the new key within T seconds of a record change; while
the record cannot be read the provider serves its last state for at most T + grace after reading
it, then fails the write). A transition re-stamps GSI4PK too, so while rows move every touched
row reaches the plan's key on its own.

A write that meets a backfill's re-stamp of the same row is refused by DynamoDB while that
transaction is in flight (TransactionConflictException: a single write never waits for a
transaction, and botocore's retry modes do not resend it); the refused write changed nothing, so
it is sent again with back-off (store.dynamo.retry_transient, as the control record's writes
are), and only a write refused on every attempt fails, with RetryLaterError.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from saga_index.index import (
    OPEN_STATES,
    InvalidInputError,
    Person,
    SagaAlreadyExistsError,
    SagaConflictError,
    keys,
    names,
    validate_state,
)
from saga_index.store.dynamo import (
    DEFAULT_POLICY,
    Expression,
    RetryPolicy,
    all_of,
    deserialize,
    is_condition_failed,
    request_expressions,
    retry_transient,
    serialize,
    unchanged_since_read,
)
from saga_index.store.plan import KEEP_OPEN_KEY, KeyPlan, PlanSource, open_key_for

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

# Creation never overwrites: a saga id is created exactly once.
ROW_IS_NEW = Expression("attribute_not_exists(#pk)", names={"#pk": "PK"})
# A transition applies to an existing saga of the same person (the caller's word for what the
# row holds: `unchanged_since_read`); it never re-creates a deleted row.
STILL_IN_EXPECTED_STATE = Expression(
    "#state = :expected", names={"#state": "state"}, slots=frozenset({":expected"})
)
# What a transition writes: the state, when, and the plan's key for the person.
SET_STATE_AND_KEY = Expression(
    "SET #state = :to, #updatedAt = :now, #gsi4pk = :gsi4pk",
    names={"#state": "state", "#updatedAt": "updatedAt", "#gsi4pk": "GSI4PK"},
    slots=frozenset({":to", ":now", ":gsi4pk"}),
)
# The same with the open-saga index's key stamped (an open saga the plan stamps) or removed (a
# closed saga, or a plan that stamps none): one attribute of the same write, so closing a saga
# costs one index delete in the open index and no further request.
_STATE_NAMES = {"#state": "state", "#updatedAt": "updatedAt", "#gsi4pk": "GSI4PK"}
SET_STATE_AND_KEYS = Expression(
    "SET #state = :to, #updatedAt = :now, #gsi4pk = :gsi4pk, #open = :open",
    names={**_STATE_NAMES, "#open": names.OPEN_INDEX_PARTITION_KEY},
    slots=frozenset({":to", ":now", ":gsi4pk", ":open"}),
)
SET_STATE_REMOVE_OPEN_KEY = Expression(
    "SET #state = :to, #updatedAt = :now, #gsi4pk = :gsi4pk REMOVE #open",
    names={**_STATE_NAMES, "#open": names.OPEN_INDEX_PARTITION_KEY},
    slots=frozenset({":to", ":now", ":gsi4pk"}),
)
_RESERVED = frozenset(
    {
        "PK",
        "SK",
        "entityType",
        "sagaId",
        "personId",
        "leaseId",
        "openedAt",
        "state",
        "updatedAt",
        "GSI4PK",
        "GSI4SK",
        names.OPEN_INDEX_PARTITION_KEY,
    }
)


def utc_iso(moment: datetime) -> str:
    """ISO-8601 UTC with millisecond precision and a Z, the format production rows carry."""
    if moment.tzinfo is None:
        raise InvalidInputError("timestamps must be timezone-aware (UTC)")
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def validate_utc_timestamp(value: object, name: str) -> str:
    if not isinstance(value, str) or "#" in value:
        raise InvalidInputError(f"{name} must be an ISO-8601 UTC string, got {value!r}")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise InvalidInputError(f"{name} must be an ISO-8601 UTC string, got {value!r}") from None
    if parsed.tzinfo is None or parsed.utcoffset() != UTC.utcoffset(None):
        raise InvalidInputError(f"{name} must be in UTC (Z or +00:00), got {value!r}")
    return value


class SagaWriter:
    """Writes saga rows. Exactly one of `plan` (fixed) or `follow` (asked on every write)."""

    def __init__(
        self,
        client: DynamoDBClient,
        table_name: str,
        *,
        plan: KeyPlan | None = None,
        follow: PlanSource | None = None,
        retry: RetryPolicy = DEFAULT_POLICY,
        sleep: Callable[[float], object] = time.sleep,
    ) -> None:
        self.client = client
        self.table_name = table_name
        # A write refused for now (a transaction on the row, a throttle past botocore's own
        # retries) is sent again after these waits.
        self.retry = retry
        self._sleep = sleep
        if follow is not None and plan is None:
            self._follow: PlanSource = follow
        elif plan is not None and follow is None:
            fixed = plan
            self._follow = lambda: fixed
        else:
            raise InvalidInputError("give exactly one of plan or follow")

    @property
    def plan(self) -> KeyPlan:
        """The plan the next write follows (the source's current one, when following)."""
        return self._follow()

    def gsi4pk_for(self, person_id: str | Person) -> str:
        return self.plan.write_key(Person.of(person_id))

    def _keys_for(self, person_id: str, state: str) -> tuple[str, str | None]:
        """(GSI4PK, the OpenSagaPK action: a key, None to remove, "" to keep) from ONE plan,
        so both keys of a write follow the same read of the record."""
        plan, person = self.plan, Person.of(person_id)
        is_open = state in OPEN_STATES
        return plan.write_key(person), open_key_for(plan, person, is_open=is_open)

    def create_saga(
        self,
        *,
        saga_id: str,
        person_id: str,
        lease_id: str,
        opened_at: str,
        state: str = "OPENED",
        updated_at: str | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Put a new saga row; refuses to overwrite an existing one."""
        validate_utc_timestamp(opened_at, "openedAt")
        if updated_at is not None:
            validate_utc_timestamp(updated_at, "updatedAt")
        if not isinstance(lease_id, str) or not lease_id:
            raise InvalidInputError(f"leaseId must be a non-empty string, got {lease_id!r}")
        clash = sorted(_RESERVED.intersection(extra or {}))
        if clash:
            raise InvalidInputError(f"extra attributes may not set contract fields: {clash}")
        item: dict[str, Any] = {
            **keys.saga_table_key(saga_id),
            "entityType": keys.ENTITY_TYPE,
            "sagaId": saga_id,
            "personId": person_id,
            "leaseId": lease_id,
            "openedAt": opened_at,
            "state": validate_state(state),
            "updatedAt": updated_at or opened_at,
            "GSI4SK": keys.gsi4sk(person_id, opened_at),
            **(extra or {}),
        }
        gsi4pk, open_key = self._keys_for(person_id, item["state"])
        item["GSI4PK"] = gsi4pk
        if open_key:
            item[names.OPEN_INDEX_PARTITION_KEY] = open_key
        request = {
            "TableName": self.table_name,
            "Item": serialize(item),
            **request_expressions(condition=ROW_IS_NEW),
        }
        try:
            retry_transient(
                lambda: self.client.put_item(**request),
                what=f"saga {saga_id!r}'s creation",
                policy=self.retry,
                sleep=self._sleep,
            )
        except ClientError as err:
            if is_condition_failed(err):
                raise SagaAlreadyExistsError(f"saga {saga_id!r} already exists") from err
            raise
        return item

    def transition(
        self,
        *,
        saga_id: str,
        person_id: str,
        to_state: str,
        updated_at: str,
        expected_state: str | None = None,
    ) -> dict[str, Any]:
        """Move a saga to `to_state` and stamp the plan's GSI4PK (and its OpenSagaPK on an open
        saga, removed on a closed one, in the same UpdateItem); returns the new row."""
        validate_state(to_state)
        validate_utc_timestamp(updated_at, "updatedAt")
        gsi4pk, open_key = self._keys_for(person_id, to_state)
        values: dict[str, Any] = {":to": to_state, ":now": updated_at, ":gsi4pk": gsi4pk}
        if open_key == KEEP_OPEN_KEY:
            change = SET_STATE_AND_KEY.given(serialize(values))
        elif open_key is None:
            change = SET_STATE_REMOVE_OPEN_KEY.given(serialize(values))
        else:
            change = SET_STATE_AND_KEYS.given(serialize({**values, ":open": open_key}))
        condition = unchanged_since_read(serialize({"personId": person_id}), ("personId",))
        if expected_state is not None:
            state = serialize({":expected": validate_state(expected_state)})
            condition = all_of(condition, STILL_IN_EXPECTED_STATE.given(state))
        request = {
            "TableName": self.table_name,
            "Key": serialize(keys.saga_table_key(saga_id)),
            **request_expressions(update=change, condition=condition),
            "ReturnValues": "ALL_NEW",
        }
        try:
            response = retry_transient(
                lambda: self.client.update_item(**request),
                what=f"saga {saga_id!r}'s transition to {to_state}",
                policy=self.retry,
                sleep=self._sleep,
            )
        except ClientError as err:
            if is_condition_failed(err):
                expected = f" in state {expected_state}" if expected_state else ""
                raise SagaConflictError(
                    f"saga {saga_id!r} of person {person_id!r}{expected} does not exist "
                    "or was changed by someone else"
                ) from err
            raise
        return deserialize(response["Attributes"])
