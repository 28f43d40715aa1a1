"""Deploys carry no migration state: the phase and N live in the control record in the table
(docs/control-contract.md), so a phase change is never a deploy and a deploy never changes the
phase. The template is byte-identical whatever the record says (or when there is none), no
function's environment names a phase or a shard count, and a deploy command that still passes
`-c phase=...` or `-c shardCount=...` stops synth saying where the phase lives now."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from devkit import schema
from infra.config import ConfigError, StackConfig, load_cdk_json_context
from infra.stack import build_app
from saga_index.index.layout import LEGACY, Layout
from saga_index.index.names import (
    CONTROL_PK,
    INDEX_NAME,
    OPEN_INDEX_NAME,
    RETIRED_ENV_PHASE,
    RETIRED_ENV_SHARDS,
)
from saga_index.layout_change.record.phase import SINGLE_COUNT_PHASES
from saga_index.layout_change.record.state import ControlState, Transition
from saga_index.layout_change.record.store import ControlStore
from tests.infra.conftest import OWNED_TABLE, Synthesised, _synthesise
from tests.infra.template_tools import as_list, render, resources

pytestmark = pytest.mark.infra

REPO_ROOT = Path(__file__).resolve().parents[2]
TABLE = "AWS::DynamoDB::Table"
TABLE_NAME = "propflow-prod"
CHANGED_AT = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def _transition(
    version: int, layout: Layout, moving_to: Layout | None, previous: Layout
) -> Transition:
    return Transition(
        version=version,
        layout=layout,
        moving_to=moving_to,
        previous_layout=previous,
        previous_moving_to=None,
        changed_at=CHANGED_AT,
        changed_by="test",
        reason="deploys carry no migration state",
        effective_at=CHANGED_AT + timedelta(seconds=45),
    )


MIGRATING_16 = _transition(1, LEGACY, Layout.sharded(16), LEGACY)
SHARDED_32 = _transition(2, Layout.sharded(32), None, LEGACY)
# What the control record holds in each synth, and (to show the environment does not leak in
# either) what the synthesising process's SAGA_INDEX_* variables say.
RECORDS: dict[str, tuple[ControlState | None, dict[str, str]]] = {
    "migrating to 16 shards": (
        ControlState(transition=MIGRATING_16),
        {RETIRED_ENV_PHASE: "migrating", RETIRED_ENV_SHARDS: "16"},
    ),
    "sharded with 32 shards": (
        ControlState(transition=SHARDED_32, backfill_paused=True),
        {RETIRED_ENV_PHASE: "sharded", RETIRED_ENV_SHARDS: "32"},
    ),
}


@contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """Set `values` for the block, restoring the caller's environment after (pytest's own
    MonkeyPatch: this fixture is module-scoped, so the function-scoped one does not serve)."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in values.items():
            patch.setenv(name, value)
        yield


@pytest.fixture(scope="module")
def templates_by_record(
    owned_synth: Synthesised, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, bytes]:
    """The template file, byte for byte, synthesised with each control record in the table
    (moto), and with no table at all (owned_synth)."""
    templates = {"no table, no record": owned_synth.template_path.read_bytes()}
    credentials = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    with _environment(credentials), mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        schema.create_table(client, TABLE_NAME, owned_synth.template_json)
        store = ControlStore(client, TABLE_NAME)
        for n, (label, (state, variables)) in enumerate(RECORDS.items()):
            client.delete_item(
                TableName=TABLE_NAME, Key={"PK": {"S": CONTROL_PK}, "SK": {"S": "STATE"}}
            )
            if state is not None:
                assert store.restore(state)
                assert state.transition is not None
                store.put_history(state.transition)
            assert store.read().phase == (state.phase if state else "legacy")
            with _environment(variables):
                synthesised = _synthesise(tmp_path_factory.mktemp(f"cdk-record-{n}"), OWNED_TABLE)
            templates[label] = synthesised.template_path.read_bytes()
    return templates


def test_given_different_control_records_when_synthesised_then_the_template_is_byte_identical(
    templates_by_record: dict[str, bytes],
) -> None:
    assert len(templates_by_record) == len(RECORDS) + 1
    baseline_label, baseline = next(iter(templates_by_record.items()))
    for label, template in templates_by_record.items():
        assert template == baseline, f"the template with {label!r} differs from {baseline_label!r}"


@pytest.mark.parametrize("synth", ["owned_synth", "import_mode_synth"])
def test_given_either_mode_then_no_function_is_told_a_phase_or_a_shard_count(
    synth: str, request: pytest.FixtureRequest
) -> None:
    template = request.getfixturevalue(synth).template_json
    functions = resources(template, "AWS::Lambda::Function")
    assert functions
    for logical_id, function in functions.items():
        variables = function["Properties"]["Environment"]["Variables"]
        assert RETIRED_ENV_PHASE not in variables, logical_id
        assert RETIRED_ENV_SHARDS not in variables, logical_id
        words = {word for name in variables for word in name.split("_")}
        assert not {"PHASE", "SHARD", "SHARDS"} & words, logical_id
        assert not set(SINGLE_COUNT_PHASES) & {str(value) for value in variables.values()}, (
            logical_id
        )


# ---- a stale deploy line ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value"),
    [("phase", "sharded"), ("phase", "legacy"), ("shardCount", 32), ("shardCount", "16")],
)
def test_given_a_stale_phase_or_shard_count_on_the_deploy_line_then_synth_stops_naming_the_cli(
    key: str, value: Any
) -> None:
    with pytest.raises(ConfigError) as raised:
        build_app(context_overrides={key: value})
    message = str(raised.value)
    assert repr(key) in message
    assert repr(value) in message
    assert "control record" in message
    assert "saga-index phase set" in message


def test_given_a_stale_phase_on_the_cdk_command_line_then_app_py_exits_with_the_message() -> None:
    # How `cdk deploy -c phase=sharded` reaches the app: through CDK_CONTEXT_JSON.
    result = subprocess.run(
        [sys.executable, "app.py"],
        cwd=REPO_ROOT,
        env={**os.environ, "CDK_CONTEXT_JSON": json.dumps({"phase": "sharded"})},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode != 0
    assert "saga-index phase set" in result.stderr
    assert "Traceback" not in result.stderr


def test_given_the_committed_configuration_then_it_carries_no_migration_state() -> None:
    context = load_cdk_json_context()
    assert "phase" not in context
    assert "shardCount" not in context
    assert not {"phase", "shard_count"} & set(StackConfig.__dataclass_fields__)


# ---- import mode --------------------------------------------------------------------------


def test_given_import_mode_then_no_table_and_every_data_grant_names_the_table_or_its_index(
    import_mode_synth: Synthesised,
) -> None:
    template = import_mode_synth.template_json
    assert resources(template, TABLE) == {}
    table_arn = (
        "arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/" + TABLE_NAME
    )
    allowed = {
        table_arn,
        f"{table_arn}/index/{INDEX_NAME}",
        f"{table_arn}/index/{OPEN_INDEX_NAME}",
    }
    data_statements = 0
    for logical_id, policy in resources(template, "AWS::IAM::Policy").items():
        for statement in render(policy["Properties"]["PolicyDocument"]["Statement"]):
            if not any(a.startswith("dynamodb:") for a in as_list(statement["Action"])):
                continue
            data_statements += 1
            targets = set(as_list(statement["Resource"]))
            assert targets <= allowed, f"{logical_id}: {statement}"
    assert data_statements >= len(resources(template, "AWS::Lambda::Function")) - 1
    for logical_id, function in resources(template, "AWS::Lambda::Function").items():
        variables = function["Properties"]["Environment"]["Variables"]
        assert variables["SAGA_TABLE_NAME"] == TABLE_NAME, logical_id
        assert variables["SAGA_INDEX_NAME"] == INDEX_NAME, logical_id
