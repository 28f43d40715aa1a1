"""The repair of one anomalous saga row: give it its person, the sort key built from it, and the
partition key the current state's writers stamp for that person.

A saga row whose personId is unusable (keys.person_anomaly: missing, empty, not a string, or not
the person its GSI4SK names) cannot be routed to a shard, so the backfill leaves it on its key
and reports it. The repair sets personId AND GSI4SK = keys.gsi4sk(personId, openedAt): setting
personId alone leaves a GSI4SK that names another person (or none), and the row stays an anomaly.
It also sets GSI4PK by the write rule of the record's current state (its routing's write_key):
an anomaly sits on whatever key it was stamped with (the legacy key, or a shard key that is not
its person's, e.g. `#8` when the person belongs on `#3`), and only the person's write key is
one every reader of the person reads, so the repaired row is found by `sagas by-person` at once.

The person is given by the operator, or read from the row's rental lease, its tenancy
(LEASE#<leaseId>/META names its tenant in personId). The write holds only if the row is still
exactly as read: it exists, and personId, GSI4SK, GSI4PK, openedAt, state and OpenSagaPK are
unchanged; so a concurrent writer wins and a deleted row is never re-created. A dry run (the
default) reads and decides, and writes nothing.

The open-saga index's key follows the same write rule (store/plan.py's open_key_for): a repair
also sets OpenSagaPK on an open saga the state's writers stamp, and removes it from a row that
must not carry it (a closed saga; any row while writers stamp none). So a row whose person is
fine but whose OpenSagaPK is not what the state's writers write (an open saga a writer left
unstamped, a closed one it left stamped: the drift guard's OpenIndexMissingRows and
OpenIndexStrayRows) is repaired too, its OpenSagaPK alone, never its person.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import StrEnum
from functools import partial
from typing import Any, Final

from botocore.exceptions import ClientError
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from saga_index.index import (
    OPEN_INDEX_PARTITION_KEY,
    OPEN_STATES,
    TABLE_PARTITION_KEY,
    TABLE_SORT_KEY,
    InvalidInputError,
    InvalidKeyError,
    InvalidPersonIdError,
    Person,
    SagaIndexError,
    keys,
)
from saga_index.store.dynamo import (
    Expression,
    attribute_list,
    deserialize,
    is_condition_failed,
    request_expressions,
    serialize,
    unchanged_since_read,
)
from saga_index.store.plan import KEEP_OPEN_KEY, KeyPlan, open_key_for

# The tenancy row, a tenant's rental lease, that names a saga's tenant (docs/data-model.md):
# PK "LEASE#" + leaseId. Nothing to do with the backfill lease of layout_change.
TENANCY_PK_PREFIX: Final = "LEASE#"
TENANCY_SK: Final = "META"

# ---- the repair's write ----------------------------------------------------------------------
# Its condition is the row still as read (expressions.unchanged_since_read), each attribute equal
# to the value read or still absent: the new GSI4SK is built from openedAt (a changed one would
# make it stale); the personId and GSI4SK are what the anomaly was judged on (someone else's
# repair wins); GSI4PK is the key the row was read on (a writer that re-stamped it since wins);
# state and OpenSagaPK decide the open key (a writer that opened, closed or stamped it wins).
_HELD: Final = ("openedAt", "personId", "GSI4SK", "GSI4PK", "state", OPEN_INDEX_PARTITION_KEY)
# What a repair may change, each attribute's placeholder and value slot: personId, GSI4SK and
# GSI4PK set together (an anomaly), OpenSagaPK set or removed (None in a write).
_WRITTEN: Final = {
    "personId": ("#personId", ":person"),
    "GSI4SK": ("#gsi4sk", ":sortKey"),
    "GSI4PK": ("#gsi4pk", ":writeKey"),
    OPEN_INDEX_PARTITION_KEY: ("#openKey", ":openKey"),
}
# What the repair reads of the row.
_READ: Final = attribute_list(
    {
        "#pk": TABLE_PARTITION_KEY,
        "#sk": TABLE_SORT_KEY,
        "#entityType": "entityType",
        "#personId": "personId",
        "#gsi4pk": "GSI4PK",
        "#gsi4sk": "GSI4SK",
        "#openedAt": "openedAt",
        "#leaseId": "leaseId",
        "#state": "state",
        "#openKey": OPEN_INDEX_PARTITION_KEY,
    }
)


class RepairError(SagaIndexError):
    """The row cannot be repaired as asked: what the repair needs is missing from the data
    (its rental lease, that lease's tenant, its openedAt). The message says what to do instead."""


class PersonSource(StrEnum):
    GIVEN = "given"  # by the caller (the operator's --person-id)
    TENANCY = "lease"  # the tenant named by the row's rental lease (its tenancy row)


class RepairStatus(StrEnum):
    REPAIRED = "repaired"
    WOULD_REPAIR = "would-repair"  # dry run: what `write` would set
    NOTHING_TO_REPAIR = "nothing-to-repair"  # not an anomaly (and of the person given, if any)
    BELONGS_TO_ANOTHER_PERSON = "belongs-to-another-person"  # healthy, of another person
    NOT_FOUND = "not-found"
    CHANGED = "changed"  # the condition failed: changed or deleted since it was read

    @property
    def done(self) -> bool:
        """The row is (or, in a dry run, would be) no longer an anomaly."""
        return self in (
            RepairStatus.REPAIRED,
            RepairStatus.WOULD_REPAIR,
            RepairStatus.NOTHING_TO_REPAIR,
        )


class RepairResult(BaseModel):
    """What the repair found and did (JSON in camelCase, like the backfill's summary)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)

    pk: str
    sk: str
    status: RepairStatus
    dry_run: bool
    person_source: PersonSource
    # The anomaly as read (keys.person_anomaly), None when the row was not one.
    anomaly: str | None = None
    # personId, GSI4SK, GSI4PK, openedAt, state and OpenSagaPK as read (absent ones left out).
    read: dict[str, Any] = Field(default_factory=dict)
    # What the repair writes (or would write): personId, GSI4SK and GSI4PK of an anomaly, and
    # OpenSagaPK when it changes (null: removed).
    write: dict[str, str | None] | None = None
    message: str

    @property
    def person_id(self) -> str | None:
        return self.write.get("personId") if self.write else None

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


def tenancy_key(tenancy_id: str) -> dict[str, str]:
    return {TABLE_PARTITION_KEY: TENANCY_PK_PREFIX + tenancy_id, TABLE_SORT_KEY: TENANCY_SK}


def repair_anomaly(
    client: Any,
    table_name: str,
    key: Mapping[str, str],
    *,
    plan: KeyPlan,
    person_id: str | None = None,
    dry_run: bool = True,
) -> RepairResult:
    """Rebuild personId and GSI4SK of the saga row at `key` ({"PK": ..., "SK": ...}), and stamp
    GSI4PK = plan.write_key(person): `plan` is the routing of the record's current state
    (record.routing.routing_for), so the row lands where that state's writers put the person's
    rows and its readers look.

    OpenSagaPK too, as the plan's writers write it (`_open_key_write`). person_id None: the
    tenant named by the row's rental lease (its tenancy row). A row that is not an anomaly keeps
    its person and keys (NOTHING_TO_REPAIR, or BELONGS_TO_ANOTHER_PERSON when person_id names
    someone else) and has only its OpenSagaPK repaired, when that is not as the plan's writers
    write it: this never moves a saga to another person. Raises InvalidInputError for a key
    that is not a saga's or an unusable person_id, and RepairError when the data lacks what the
    repair needs.
    """
    pk, sk = key[TABLE_PARTITION_KEY], key[TABLE_SORT_KEY]
    keys.parse_saga_table_key(pk, sk)
    if person_id is not None:
        keys.validate_person_id(person_id)
    source = PersonSource.TENANCY if person_id is None else PersonSource.GIVEN
    result = partial(RepairResult, pk=pk, sk=sk, dry_run=dry_run, person_source=source)
    table_key = {TABLE_PARTITION_KEY: {"S": pk}, TABLE_SORT_KEY: {"S": sk}}
    raw = client.get_item(
        TableName=table_name,
        Key=table_key,
        ConsistentRead=True,
        **request_expressions(projection=_READ),
    ).get("Item")
    if raw is None:
        return result(
            status=RepairStatus.NOT_FOUND,
            message=f"no row at PK={pk} SK={sk}: it was deleted since it was reported, or the "
            "key is mistyped (the backfill lists anomalies as PK=... SK=...)",
        )
    row = deserialize(raw)
    if row.get("entityType") != keys.ENTITY_TYPE:
        raise InvalidInputError(
            f"PK={pk} SK={sk} is not a saga row (entityType {row.get('entityType')!r})"
        )
    read: dict[str, Any] = {
        name: row[name]
        for name in ("personId", "GSI4SK", "GSI4PK", "openedAt", "state", OPEN_INDEX_PARTITION_KEY)
        if name in row
    }
    anomaly = keys.person_anomaly(row)
    if anomaly is None:
        refusal = _not_an_anomaly(result, row, person_id, read)
        write = _open_key_write(row, Person.of(row["personId"]), plan)
        if refusal.status is RepairStatus.BELONGS_TO_ANOTHER_PERSON or not write:
            return refusal
    else:
        person = person_id if person_id is not None else _tenant_of_tenancy(client, table_name, row)
        write = _repaired_keys(row, person, source, plan)
        write.update(_open_key_write(row, Person.of(person), plan))
    found = partial(result, anomaly=anomaly, read=read, write=write)
    change = _describe(write, row)
    if dry_run:
        return found(
            status=RepairStatus.WOULD_REPAIR,
            message=f"dry run, nothing written: the repair {change}",
        )
    try:
        client.update_item(
            TableName=table_name,
            Key=table_key,
            **request_expressions(
                update=_update_of(write),
                # The values read, as typed attribute values: equality is byte-exact.
                condition=unchanged_since_read(raw, _HELD),
            ),
        )
    except ClientError as err:
        if not is_condition_failed(err):
            raise
        return found(
            status=RepairStatus.CHANGED,
            message=f"PK={pk} SK={sk} changed or was deleted since it was read; nothing was "
            "written: run the same command again to repair it as it is now",
        )
    found_by = "`sagas by-person` finds it now" if anomaly is not None else "its sweeps read it so"
    return found(status=RepairStatus.REPAIRED, message=f"repaired: it {change}; {found_by}")


def _open_key_write(row: Mapping[str, Any], person: Person, plan: KeyPlan) -> dict[str, str | None]:
    """{OpenSagaPK: the key, or None to remove it} when the state's writers would write the
    row's open key otherwise than it is; {} when it is as they write it (or they keep it)."""
    wanted = open_key_for(plan, person, is_open=row.get("state") in OPEN_STATES)
    if wanted == KEEP_OPEN_KEY or wanted == row.get(OPEN_INDEX_PARTITION_KEY):
        return {}
    return {OPEN_INDEX_PARTITION_KEY: wanted}


def _update_of(write: Mapping[str, str | None]) -> Expression:
    """SET of each written value, REMOVE of each None (only OpenSagaPK is ever removed)."""
    sets = [name for name, value in write.items() if value is not None]
    removes = [name for name, value in write.items() if value is None]
    text = "SET " + ", ".join(f"{_WRITTEN[n][0]} = {_WRITTEN[n][1]}" for n in sets) if sets else ""
    if removes:
        text = f"{text} REMOVE {', '.join(_WRITTEN[n][0] for n in removes)}".strip()
    return Expression(
        text,
        names={_WRITTEN[n][0]: n for n in write},
        slots=frozenset(_WRITTEN[n][1] for n in sets),
    ).given(serialize({_WRITTEN[n][1]: write[n] for n in sets}))


def _describe(write: Mapping[str, str | None], row: Mapping[str, Any]) -> str:
    """What the write does, in the words of the messages (`sets ...`, `removes ...`)."""
    sets = [f"{n}={v!r}" for n, v in write.items() if v is not None]
    said = []
    if sets:
        was = f" (GSI4PK was {row.get('GSI4PK')!r})" if "GSI4PK" in write else ""
        said.append(f"sets {', '.join(sets)}{was}")
    if OPEN_INDEX_PARTITION_KEY in write and write[OPEN_INDEX_PARTITION_KEY] is None:
        said.append(
            f"removes {OPEN_INDEX_PARTITION_KEY} (was {row.get(OPEN_INDEX_PARTITION_KEY)!r})"
        )
    return " and ".join(said)


def _not_an_anomaly(
    result: Callable[..., RepairResult],
    row: Mapping[str, Any],
    person_id: str | None,
    read: dict[str, Any],
) -> RepairResult:
    """A healthy row is left as it is: of the person asked for (or of anyone, when none was),
    or of another person (a repair never moves a saga to another person)."""
    where = f"PK={row['PK']} SK={row['SK']}"
    if person_id is not None and row.get("personId") != person_id:
        return result(
            status=RepairStatus.BELONGS_TO_ANOTHER_PERSON,
            message=f"{where} is not an anomaly: it belongs to person "
            f"{row.get('personId')!r}, not {person_id!r}. This command repairs anomalies "
            "only; it does not move a saga to another person",
            read=read,
        )
    return result(
        status=RepairStatus.NOTHING_TO_REPAIR,
        message=f"{where} is not an anomaly (personId {row.get('personId')!r}): nothing to repair",
        read=read,
    )


def _repaired_keys(
    row: Mapping[str, Any], person: str, source: PersonSource, plan: KeyPlan
) -> dict[str, str | None]:
    """personId, GSI4SK and GSI4PK as the repair writes them; RepairError when the row's
    openedAt, or the rental lease's tenant, cannot make a GSI4SK."""
    where = f"PK={row['PK']} SK={row['SK']}"
    opened_at = row.get("openedAt", "")  # gsi4sk refuses a missing or unusable one
    try:
        sort_key = keys.gsi4sk(person, opened_at)
    except InvalidPersonIdError:
        if source is PersonSource.GIVEN:
            raise
        raise RepairError(
            f"the tenant {person!r} of {where}'s rental lease is too long for a GSI4SK: "
            "pass --person-id"
        ) from None
    except InvalidKeyError as err:
        raise RepairError(
            f"{where} has no usable openedAt ({err}), so its GSI4SK cannot be rebuilt: "
            "repair the row in the application"
        ) from None
    return {"personId": person, "GSI4SK": sort_key, "GSI4PK": plan.write_key(Person.of(person))}


def _tenant_of_tenancy(client: Any, table_name: str, row: Mapping[str, Any]) -> str:
    where = f"PK={row['PK']} SK={row['SK']}"
    tenancy_id = row.get("leaseId")
    if not isinstance(tenancy_id, str) or not tenancy_id:
        raise RepairError(
            f"{where} names no rental lease (leaseId {tenancy_id!r}): pass --person-id"
        )
    tenancy_raw = client.get_item(
        TableName=table_name,
        Key={name: {"S": value} for name, value in tenancy_key(tenancy_id).items()},
        ConsistentRead=True,
        **request_expressions(projection=attribute_list({"#personId": "personId"})),
    ).get("Item")
    if tenancy_raw is None:
        raise RepairError(
            f"{where} names rental lease {tenancy_id!r}, which is gone: pass --person-id"
        )
    tenant = deserialize(tenancy_raw).get("personId")
    try:
        return keys.validate_person_id(tenant)
    except InvalidPersonIdError as err:
        raise RepairError(
            f"{where}: its rental lease {tenancy_id!r} names no usable tenant ({err}): "
            "pass --person-id"
        ) from None
