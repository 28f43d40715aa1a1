"""The TypeScript client package (clients/typescript) against the Python library, on dynalite.

In each state of the record (legacy, migrating mid-backfill, sharded, resharding mid-move,
rolling-back mid-move, a deleted STATE item) the rows the Python code wrote are read by the
package, imported by its name (its built ESM entry, `dist/esm/index.js`) as an outside service would
(clients/typescript/conformance/reader.mjs), and by the Python repository: both must return the
same rows. Rows the package's `writeKeys` stamped must be found by the Python reads and judged
clean by the drift checks. `make test` builds the package before pytest runs.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from devkit.contract_states import path_through
from devkit.seed import SeedSpec, build_dataset, saga_item, write_items
from saga_index.index import OPEN_STATES, Person, keys
from saga_index.index.errors import InvalidPersonIdError
from saga_index.index.keys import validate_person_id
from saga_index.index.layout import LEGACY, Layout
from saga_index.index.names import CONTROL_PK
from saga_index.layout_change.checks.drift import DriftChecker
from saga_index.layout_change.record.encode import state_item
from saga_index.layout_change.record.errors import ControlItemInvalidError
from saga_index.layout_change.record.items import STATE_SK
from saga_index.layout_change.record.routing import Routing, routing_for
from saga_index.layout_change.record.state import ControlState
from saga_index.layout_change.record.store import ControlStore
from saga_index.layout_change.record.times import format_time
from saga_index.layout_change.record.timing import utc_now
from saga_index.layout_change.transitions.rules import plan_move, transition_for
from saga_index.store.dynamo.codec import serialize
from saga_index.store.repository import SagaRepository
from tests.support.backends import Backend, make_backend
from tests.support.control_fixtures import START, Clock, set_phase
from tests.support.control_seed import delete_state, seed_state

pytestmark = pytest.mark.conformance

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "clients" / "typescript"
READER = PACKAGE / "conformance" / "reader.mjs"
S16, S32 = Layout.sharded(16), Layout.sharded(32)
# Persons whose keys are easy to get wrong: a prefix of another id, NFC and NFD, an emoji.
SPECIAL_PERSONS = ("tenant", "tenant#42", "Jos\u00e9", "Jose\u0301", "\U0001f600")
DATASET = build_dataset(
    SeedSpec(
        open_sagas=10,
        terminal_sagas=20,
        persons=24,
        anomalies=2,
        property_managers=2,
        messages_per_open_person=1,
        min_item_bytes=900,
        max_item_bytes=1100,
    )
)


@dataclass(frozen=True)
class Scenario:
    """A state of the record, and the layouts its rows were written under (alternating)."""

    current: Layout
    moving_to: Layout | None
    row_layouts: tuple[Layout, ...]
    delete_state: bool = False


SCENARIOS = {
    "legacy": Scenario(LEGACY, None, (LEGACY,)),
    "migrating-mid-backfill": Scenario(LEGACY, S16, (LEGACY, S16)),
    "sharded": Scenario(S16, None, (S16,)),
    "resharding-mid-move": Scenario(S16, S32, (S16, S32)),
    "rolling-back-mid-move": Scenario(S16, LEGACY, (S16, LEGACY)),
    "state-deleted-mid-migration": Scenario(LEGACY, S16, (LEGACY, S16), delete_state=True),
}


def _plant(backend: Backend, scenario: Scenario) -> ControlState:
    # legacy is planted as the end of a rollback (the migration came back), version 3.
    previous = (S16, LEGACY) if scenario.current == LEGACY else None
    seed_state(
        backend.client,
        backend.table_name,
        scenario.current,
        scenario.moving_to,
        version=3 if previous else 1,
        previous=previous,
    )
    if scenario.delete_state:
        delete_state(backend.client, backend.table_name)
    return ControlStore(backend.client, backend.table_name).read()


def _seed_rows(backend: Backend, scenario: Scenario) -> None:
    layouts = scenario.row_layouts
    items = [
        saga_item(record, layouts[n % len(layouts)].shard_count)
        for n, record in enumerate(DATASET.sagas)
    ]
    write_items(backend.client, backend.table_name, items, workers=2)
    for n, person in enumerate(SPECIAL_PERSONS):
        layout = layouts[n % len(layouts)]
        backend.put_saga(f"special-{n}", person, gsi4pk=layout.key_for(person), state="NEGOTIATING")


def _writes(scenario_name: str) -> list[dict[str, str]]:
    return [
        {
            "sagaId": f"ts-{scenario_name}-{n}",
            "personId": f"ts-writer-{scenario_name}-{n}",
            "openedAt": f"2026-11-0{n + 1}T08:00:00.000Z",
            "state": "OPENED" if n % 2 else "SIGNED",
        }
        for n in range(4)
    ]


def _node(backend: Backend, request: dict[str, Any]) -> dict[str, Any]:
    """Run the outside reader on `backend`'s server; its JSON output."""
    node = shutil.which("node")
    assert node, "node (>= 20) must be on PATH"
    assert (PACKAGE / "dist" / "esm" / "index.js").is_file(), (
        "clients/typescript/dist/esm/index.js is missing: build the package first "
        "(make ts-client, or npm ci && npm run build in clients/typescript)"
    )
    assert backend.endpoint_url is not None
    result = subprocess.run(
        [node, str(READER), "--endpoint", backend.endpoint_url, "--table", backend.table_name],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "AWS_REGION": "us-east-1"},
    )
    assert result.returncode == 0, result.stderr
    assert "NodeVersionSupportWarning" not in result.stderr, result.stderr
    parsed: dict[str, Any] = json.loads(result.stdout)
    return parsed


def _described(state: ControlState) -> dict[str, Any]:
    routing = routing_for(state)
    return {
        "condition": state.condition.value,
        "phase": state.phase.value,
        "version": state.version,
        "layout": str(state.layout),
        "movingTo": None if state.moving_to is None else str(state.moving_to),
        "source": str(routing.source),
        "target": str(routing.target),
        "openIndex": str(state.open_index),
    }


def _plain(rows: Any) -> Any:
    """Python rows in the JSON the Node reader prints (Decimal to number, set to sorted list)."""

    def convert(value: Any) -> Any:
        if isinstance(value, Decimal):
            return int(value) if value == value.to_integral_value() else float(value)
        if isinstance(value, set | frozenset):
            return sorted(value)
        raise TypeError(f"unexpected {type(value).__name__} in a saga row")

    return json.loads(json.dumps(rows, default=convert))


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_given_rows_python_wrote_when_the_package_reads_them_then_both_return_the_same_rows(
    name: str, synthesized_template: dict[str, Any], dynalite_endpoint: str
) -> None:
    scenario = SCENARIOS[name]
    backend = make_backend("dynalite", synthesized_template, endpoint_url=dynalite_endpoint)
    # A second table in the same state holds only rows the package stamps: drift judges them.
    stamped_only = make_backend("dynalite", synthesized_template, endpoint_url=dynalite_endpoint)
    state = _plant(backend, scenario)
    _plant(stamped_only, scenario)
    _seed_rows(backend, scenario)
    writes = _writes(name)
    persons = [
        *sorted({s.person_id for s in DATASET.sagas if s.person_id is not None})[:8],
        *SPECIAL_PERSONS,
        *(w["personId"] for w in writes),
    ]

    seen = _node(
        backend, {"persons": persons, "writes": writes, "stampOnly": stamped_only.table_name}
    )

    routing = routing_for(state)
    assert seen["state"] == _described(state)
    repo = SagaRepository(backend.client, backend.table_name, plan=routing)
    assert seen["all"] == _plain(repo.get_all_sagas().items)
    assert seen["open"] == _plain(repo.get_all_open_sagas().items)
    # The page iterators: the same rows, in read order (sorted here as the repository sorts).
    assert sorted(seen["pagedAll"], key=_row_order) == seen["all"]
    assert sorted(seen["pagedOpen"], key=_row_order) == seen["open"]
    for person in persons:
        expected = _plain(repo.get_sagas_by_person(person).items)
        assert seen["byPerson"][person] == expected, person
        assert seen["byPersons"][person] == expected, person
    # The rows the package stamped: Python finds each by person, on the key it would stamp.
    for write, stamped in zip(writes, seen["written"], strict=True):
        found = repo.get_sagas_by_person(write["personId"]).items
        assert [row["sagaId"] for row in found] == [write["sagaId"]]
        assert stamped["GSI4PK"] == routing.write_key(write["personId"])
        assert stamped["GSI4SK"] == keys.gsi4sk(write["personId"], write["openedAt"])
    assert len(seen["all"]) == len(DATASET.sagas) + len(SPECIAL_PERSONS) + len(writes) - (
        0 if LEGACY in (routing.source, routing.target) else len(DATASET.anomalies)
    )
    _assert_drift_clean(stamped_only, len(writes))


# The open-saga index's states (on sharded(16)): the states to plant, which open rows the backfill
# has stamped so far (every n-th), and whether the STATE item is then deleted.
OPEN_INDEX_SCENARIOS: dict[str, tuple[tuple[str, ...], int, bool]] = {
    "open-index-adding-mid-backfill": (("adding",), 2, False),
    "open-index-open": (("adding", "open"), 1, False),
    "open-index-open-state-deleted": (("adding", "open"), 1, True),
}
PAGE_LIMIT = 7


@pytest.mark.parametrize("name", list(OPEN_INDEX_SCENARIOS))
def test_given_the_open_index_when_the_package_reads_and_writes_then_python_agrees(
    name: str, synthesized_template: dict[str, Any], dynalite_endpoint: str
) -> None:
    """Open sagas read over GSI4 or the open index as the record says, in both languages; the
    package's pages resume in Python; the package stamps OpenSagaPK where Python would."""
    states, stamp_every, deleted = OPEN_INDEX_SCENARIOS[name]
    # The stack's table has the open index (dynalite builds an index only at CreateTable).
    backend = make_backend("dynalite", synthesized_template, endpoint_url=dynalite_endpoint)
    stamped_only = make_backend("dynalite", synthesized_template, endpoint_url=dynalite_endpoint)
    for table in (backend, stamped_only):
        _open_index(*states)(table)
        if deleted:
            delete_state(table.client, table.table_name)
    _seed_open_index_rows(backend, stamp_every)
    writes = _writes(name)
    persons = [*sorted({s.person_id for s in DATASET.sagas if s.person_id})[:4], "ghost"]

    seen = _node(
        backend,
        {
            "persons": persons,
            "writes": writes,
            "stampOnly": stamped_only.table_name,
            "pageLimit": PAGE_LIMIT,
        },
    )

    state = ControlStore(backend.client, backend.table_name).read()
    routing = routing_for(state)
    repo = SagaRepository(backend.client, backend.table_name, plan=routing)
    assert seen["state"] == _described(state)
    assert seen["openReadKeys"] == _open_read_keys(routing)
    open_sagas = _plain(repo.get_all_open_sagas().items)
    assert seen["open"] == open_sagas
    assert sorted(seen["pagedOpen"], key=_row_order) == open_sagas
    # Which index answered is plain: the ghost is open on GSI4 only.
    reads_gsi4 = routing.open_enumeration_keys() is None
    assert ("ghost" in {r["sagaId"] for r in open_sagas}) is reads_gsi4
    assert seen["all"] == _plain(repo.get_all_sagas().items)
    for person in persons:
        assert seen["byPerson"][person] == _plain(repo.get_sagas_by_person(person).items)
    _assert_pages_agree(repo, seen["openPages"], open_sagas)
    for write, stamped in zip(writes, seen["written"], strict=True):
        is_open = write["state"] in OPEN_STATES
        expected = routing.open_write_key(write["personId"]) if is_open else None
        assert stamped.get("OpenSagaPK") == expected, write
    _assert_drift_clean(stamped_only, len(writes))


def _seed_open_index_rows(backend: Backend, stamp_every: int) -> None:
    """The dataset on sharded(16), every `stamp_every`-th open saga stamped with its OpenSagaPK
    (as writers and the backfill stamp them), and a ghost: open, on GSI4 only."""
    items = []
    opened = 0
    for record in DATASET.sagas:
        item = saga_item(record, 16)
        if record.state in OPEN_STATES and record.person_id:
            if opened % stamp_every == 0:
                item["OpenSagaPK"] = {"S": Person.of(record.person_id).open_index_pk(16)}
            opened += 1
        items.append(item)
    write_items(backend.client, backend.table_name, items, workers=2)
    backend.put_saga("ghost", "ghost", gsi4pk=S16.key_for("ghost"), state="NEGOTIATING")


def _assert_pages_agree(
    repo: SagaRepository, pages: list[dict[str, Any]], open_sagas: list[dict[str, Any]]
) -> None:
    """The package's pages hold every open saga once, and Python resumes each of its cursors
    with the rows the package's next page holds (one cursor format for both)."""
    assert sorted(i for page in pages for i in page["sagaIds"]) == sorted(
        r["sagaId"] for r in open_sagas
    )
    assert any(page["cursor"] and _cursor_inside_a_key(page["cursor"]) for page in pages)
    first = repo.page_of_open_sagas(limit=PAGE_LIMIT)
    assert ([r["sagaId"] for r in first.rows], first.cursor) == (
        pages[0]["sagaIds"],
        pages[0]["cursor"],
    )
    for page, following in itertools.pairwise(pages):
        resumed = repo.page_of_open_sagas(limit=PAGE_LIMIT, cursor=page["cursor"])
        assert [r["sagaId"] for r in resumed.rows] == following["sagaIds"]
        assert resumed.cursor == following["cursor"]


def _cursor_inside_a_key(cursor: str) -> bool:
    """Whether the cursor resumes inside a partition (its position names a row)."""
    document = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    return document["after"] is not None


def _row_order(row: dict[str, Any]) -> tuple[str, str, str]:
    return (str(row.get("GSI4SK", "")), str(row.get("PK", "")), str(row.get("SK", "")))


def _assert_drift_clean(backend: Backend, rows: int) -> None:
    """Every row of `backend` was stamped by writeKeys: drift must find nothing wrong."""
    state = ControlStore(backend.client, backend.table_name).read()
    report = DriftChecker(backend.client, backend.table_name, state=state).check(
        scan_unindexed=True
    )
    assert report.scanned_saga_rows == rows
    counts = (
        report.misrouted_rows,
        report.anomalous_rows,
        report.unexpected_legacy_rows,
        report.unexpected_sharded_rows,
        report.unindexed_rows,
        report.stray_rows,
    )
    assert counts == (0, 0, 0, 0, 0, 0), report.to_dict()


PERSON_ID_CASES: dict[str, Callable[[], Any]] = {
    "empty": lambda: "",
    "lone surrogate": lambda: "ab\ud800",
    "too long": lambda: "a" * 1023,
    "too long in CJK": lambda: "\u4e2d" * 342,
}


def test_given_unusable_person_ids_then_the_package_refuses_them_with_the_python_messages() -> None:
    node = shutil.which("node")
    assert node
    script = (
        "import { validatePersonId } from '@propflow/renewal-saga-index';"
        "const out = {};"
        "for (const [name, id] of Object.entries(JSON.parse(process.argv[1]))) {"
        "  try { validatePersonId(id, '2026-07-10T12:00:00.000Z'); out[name] = null; }"
        "  catch (e) { out[name] = `${e.name}: ${e.message}`; } }"
        "process.stdout.write(JSON.stringify(out));"
    )
    cases = {name: make() for name, make in PERSON_ID_CASES.items()}
    result = subprocess.run(
        [node, "--input-type=module", "-e", script, json.dumps(cases)],
        cwd=PACKAGE,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    for name, person_id in cases.items():
        with pytest.raises(InvalidPersonIdError) as refused:
            validate_person_id(person_id, "2026-07-10T12:00:00.000Z")
        assert seen[name] == f"InvalidPersonIdError: {refused.value}", name


_CONFIGURATION_PROBE = """
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import {
  IncompleteEnumerationError, SagaIndex, SagaIndexConfigurationError,
} from '@propflow/renewal-saga-index';
const [endpoint, table] = process.argv.slice(1);
const client = new DynamoDBClient({
  region: 'us-east-1', endpoint, maxAttempts: 1,
  credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
});
const cases = {
  wrongIndex: { tableName: table, indexName: 'no-such-index' },
  missingTable: { tableName: `${table}-missing` },
};
const out = {};
for (const [name, options] of Object.entries(cases)) {
  try {
    await new SagaIndex({ client, ...options }).getAllOpenSagas();
    out[name] = null;
  } catch (e) {
    out[name] = {
      configuration: e instanceof SagaIndexConfigurationError,
      transient: e instanceof IncompleteEnumerationError,
      errorName: e.errorName ?? null,
      message: e.message,
    };
  }
}
client.destroy();
process.stdout.write(JSON.stringify(out));
"""


def test_given_a_wrong_index_or_a_missing_table_then_the_package_reports_configuration(
    synthesized_template: dict[str, Any], dynalite_endpoint: str
) -> None:
    """What a real server answers for a misconfiguration reaches the caller as
    SagaIndexConfigurationError (fix it), never as IncompleteEnumerationError (retry it)."""
    node = shutil.which("node")
    assert node
    backend = make_backend("dynalite", synthesized_template, endpoint_url=dynalite_endpoint)
    result = subprocess.run(
        [
            node,
            "--input-type=module",
            "-e",
            _CONFIGURATION_PROBE,
            dynalite_endpoint,
            backend.table_name,
        ],
        cwd=PACKAGE,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    assert seen["wrongIndex"]["configuration"], seen
    assert not seen["wrongIndex"]["transient"], seen
    assert seen["wrongIndex"]["errorName"] == "ValidationException"
    assert "check indexName" in seen["wrongIndex"]["message"]
    assert "no-such-index" in seen["wrongIndex"]["message"]
    assert seen["missingTable"]["configuration"], seen
    assert not seen["missingTable"]["transient"], seen
    assert seen["missingTable"]["errorName"] == "ResourceNotFoundException"
    assert "does not exist where the client looks" in seen["missingTable"]["message"]


# ---- the record alone: every state, every person of the shard vectors ----------------------

VECTOR_PERSONS = list(
    dict.fromkeys(
        v["personId"]
        for v in json.loads((ROOT / "docs" / "shard-vectors.json").read_text(encoding="utf-8"))[
            "vectors"
        ]
    )
)


def _through(*phases: str, shards: int = 16, clock: Any = None) -> Callable[[Backend], None]:
    def plant(backend: Backend) -> None:
        store = ControlStore(backend.client, backend.table_name)
        moments = clock or Clock()
        for number, phase in enumerate(phases):
            if number and isinstance(moments, Clock):
                # Past the previous effectiveAt and the in-flight margin: a completing move,
                # forced or not, is refused before then.
                moments.advance(120)
            set_phase(
                store,
                phase,
                changed_by="conformance",
                reason=f"to {phase}",
                shard_count=shards if phase == "migrating" else None,
                force=True,
                clock=moments,
            )

    return plant


def _then_delete_state(plant: Callable[[Backend], None]) -> Callable[[Backend], None]:
    def planted(backend: Backend) -> None:
        plant(backend)
        delete_state(backend.client, backend.table_name)

    return planted


def _seeded(current: Layout, moving_to: Layout | None) -> Callable[[Backend], None]:
    return lambda backend: seed_state(backend.client, backend.table_name, current, moving_to)


def _abandoned_reshard_then_deleted(backend: Backend) -> None:
    """sharded(16), then a `phase set resharding --shards 32` whose STATE write failed (its
    intent marked abandoned), then the STATE item deleted: every reader follows sharded(16)."""
    _through("migrating", "sharded")(backend)
    store = ControlStore(backend.client, backend.table_name)
    state = store.read()
    plan = plan_move(state, "resharding", shard_count=32)
    at = START + timedelta(seconds=600)
    intent = transition_for(
        plan, at, changed_by="conformance", reason="split", effective_delay=timedelta(seconds=75)
    )
    assert store.put_intent(intent)
    assert store.abandon_intent(intent)
    delete_state(backend.client, backend.table_name)


def _broken(backend: Backend) -> None:
    _through("migrating")(backend)
    backend.client.update_item(
        TableName=backend.table_name,
        Key={"PK": {"S": CONTROL_PK}, "SK": {"S": STATE_SK}},
        UpdateExpression="SET #phase = :p",
        ExpressionAttributeNames={"#phase": "phase"},
        ExpressionAttributeValues={":p": {"S": "sharded"}},
    )


def _open_index_state(
    *states: str, shards: int | None = None, then: tuple[str, int] | None = None
) -> ControlState:
    """sharded(16), then the open index through `states` (each `open-index set` 10 minutes
    after the one before, the first with --shards `shards`), then optionally a layout move."""
    steps: list[tuple[str, float, int | None]] = [("migrating", 0, 16), ("sharded", 600, None)]
    for n, open_state in enumerate(states):
        steps.append((f"open-index:{open_state}", 1200 + 600 * n, shards if n == 0 else None))
    if then is not None:
        steps.append((then[0], 1200 + 600 * len(states), then[1]))
    return path_through(*steps)


def _open_index(
    *states: str, shards: int | None = None, then: tuple[str, int] | None = None
) -> Callable[[Backend], None]:
    """Plant that state's STATE item and its HISTORY item, as `open-index set` writes them."""

    def plant(backend: Backend) -> None:
        state = _open_index_state(*states, shards=shards, then=then)
        assert state.transition is not None
        backend.client.put_item(TableName=backend.table_name, Item=serialize(state_item(state)))
        ControlStore(backend.client, backend.table_name).put_history(state.transition)

    return plant


def _open_read_keys(routing: Routing) -> list[str] | None:
    keys_read = routing.open_enumeration_keys()
    return None if keys_read is None else list(keys_read)


RECORDS: dict[str, Callable[[Backend], None]] = {
    "never-migrated": lambda backend: None,
    "migrating-16": _through("migrating"),
    "migrating-1": _through("migrating", shards=1),
    "migrating-1024": _through("migrating", shards=1024),
    # Written with this machine's clock: writers still stamp the legacy key (before effectiveAt).
    "migrating-just-now": _through("migrating", clock=utc_now),
    "sharded-16": _through("migrating", "sharded"),
    "rolling-back-16": _through("migrating", "rolling-back"),
    "back-to-migrating": _through("migrating", "sharded", "rolling-back", "migrating"),
    "legacy-again": _through("migrating", "rolling-back", "legacy"),
    "resharding-16-32": _seeded(S16, S32),
    "resharding-64-32": _seeded(Layout.sharded(64), S32),
    "missing-after-sharded": _then_delete_state(_through("migrating", "sharded")),
    "missing-after-rollback": _then_delete_state(_through("migrating", "rolling-back", "legacy")),
    "missing-after-an-abandoned-reshard": _abandoned_reshard_then_deleted,
    "broken-phase": _broken,
    # The open-saga index's states, on sharded(16) (the start-plus-30s clock is before them all).
    "open-index-adding": _open_index("adding"),
    "open-index-adding-8": _open_index("adding", shards=8),
    "open-index-open": _open_index("adding", "open"),
    "open-index-removing": _open_index("adding", "removing"),
    "open-index-off-again": _open_index("adding", "removing", "off"),
    "open-index-open-then-resharding": _open_index("adding", "open", then=("resharding", 32)),
    "missing-after-open-index-open": _then_delete_state(_open_index("adding", "open")),
}


# The writers' wall clock: 30 s after the transitions `_through` writes on the test clock (before
# their effectiveAt: writers still stamp the prior layout), or this machine's clock (after them,
# before migrating-just-now's).
CLOCKS = {"start-plus-30s": START + timedelta(seconds=30), "machine": None}


@pytest.mark.parametrize("clock", list(CLOCKS))
def test_given_records_python_wrote_when_the_package_routes_then_every_person_agrees(
    clock: str, synthesized_template: dict[str, Any], dynalite_endpoint: str
) -> None:
    now = CLOCKS[clock]
    tables: dict[str, Backend] = {}
    for name, plant in RECORDS.items():
        tables[name] = make_backend(
            "dynalite", synthesized_template, endpoint_url=dynalite_endpoint
        )
        plant(tables[name])
    first = next(iter(tables.values()))
    request: dict[str, Any] = {
        "tables": [b.table_name for b in tables.values()],
        "persons": VECTOR_PERSONS,
    }
    if now is not None:
        request["now"] = format_time(now)

    seen = _node(first, {"routes": request})["routes"]

    for name, backend in tables.items():
        got = seen[backend.table_name]
        if name == "broken-phase":
            # Refused as the Python decoder refuses it: the same kind, the same attribute.
            with pytest.raises(ControlItemInvalidError) as refused:
                ControlStore(backend.client, backend.table_name).read()
            assert got == {
                "error": "RecordUnavailableError",
                "refusal": {
                    "kind": refused.value.kind.value,
                    "attribute": refused.value.attribute,
                },
            }
            assert got["refusal"] == {"kind": "inconsistent", "attribute": "phase"}
            continue
        state = ControlStore(backend.client, backend.table_name).read()
        routing = routing_for(state, now)
        assert got["state"] == _described(state), name
        assert got["stages"] == [list(stage) for stage in routing.enumeration_stages()], name
        expected = [
            {
                "personId": p,
                "writeKey": routing.write_key(p),
                "readKeys": list(routing.read_keys(p)),
                "openWriteKey": routing.open_write_key(p),
            }
            for p in VECTOR_PERSONS
        ]
        assert got["persons"] == expected, name
        assert got["openReadKeys"] == _open_read_keys(routing), name
        if name == "migrating-just-now" or (now is not None and name == "migrating-16"):
            # The switch is exercised: before effectiveAt writers stamp the prior (legacy) key.
            assert {p["writeKey"] for p in expected} == {keys.LEGACY_GSI4PK}


# ---- the package's own suites fail on vectors it disagrees with ----------------------------


def test_given_tampered_vectors_when_the_package_suites_run_then_they_fail_naming_the_cases(
    tmp_path: Path,
) -> None:
    node = shutil.which("node")
    assert node
    compiled = PACKAGE / "dist-test" / "test"
    assert (compiled / "contract.test.js").is_file(), (
        "clients/typescript/dist-test is missing: run `npm test` in clients/typescript "
        "(make ts-client) first"
    )
    contract = json.loads((ROOT / "docs" / "contract-vectors.json").read_text(encoding="utf-8"))
    before = next(
        c for c in contract["routing"] if c["name"] == "migrating(16): before effectiveAt"
    )
    # Writers switching at once instead of at effectiveAt.
    before["persons"][0]["writeKey"] = before["persons"][0]["readKeys"][-1]
    refused = next(c for c in contract["records"] if not c["valid"])
    refused["valid"] = True
    # Writers stamping OpenSagaPK at once instead of at effectiveAt.
    early = next(
        c
        for c in contract["openIndex"]
        if c["name"] == "sharded(16), open index adding(16): before effectiveAt"
    )
    early["expect"]["persons"][0]["openWriteKey"] = Person.of(
        early["expect"]["persons"][0]["personId"]
    ).open_index_pk(16)
    shards = json.loads((ROOT / "docs" / "shard-vectors.json").read_text(encoding="utf-8"))
    victim = next(v for v in shards["vectors"] if v["shardCount"] == 64)
    victim["shard"] = (victim["shard"] + 1) % 64
    corpus = json.loads((ROOT / "docs" / "contract-corpus.json").read_text(encoding="utf-8"))
    # A mutated record said to be refused at an attribute no reader names.
    case = next(c for c in corpus["cases"] if "refusal" in c["expect"])
    case["expect"]["refusal"]["attribute"] = "noSuchAttribute"
    mutated_base = corpus["bases"][case["base"]]["name"]
    (tmp_path / "contract-vectors.json").write_text(json.dumps(contract), encoding="utf-8")
    (tmp_path / "shard-vectors.json").write_text(json.dumps(shards), encoding="utf-8")
    (tmp_path / "contract-corpus.json").write_text(json.dumps(corpus), encoding="utf-8")

    result = subprocess.run(
        [
            node,
            "--test",
            "--test-reporter=tap",
            str(compiled / "contract.test.js"),
            str(compiled / "shard.test.js"),
            str(compiled / "corpus.test.js"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "SAGA_INDEX_VECTORS_DIR": str(tmp_path)},
    )

    assert result.returncode == 1, result.stdout
    failed = {
        line.split(" - ", 1)[1].strip()
        for line in result.stdout.splitlines()
        if line.strip().startswith("not ok") and " - " in line
    }
    assert {
        "migrating(16): before effectiveAt",
        early["name"],
        refused["name"],
        "every vector: the hashed bytes, the shard and the key",
    } <= failed, result.stdout
    assert any(name.startswith(f"{mutated_base} (") for name in failed), result.stdout
