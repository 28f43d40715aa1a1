"""A phase change is a deploy that must never touch the table: synthesised in every phase, the
table resource is byte-identical, and the only differences anywhere in the template are the
ones listed here (the functions' SAGA_INDEX_PHASE, which alarms page). Import mode owns no table
and still points every policy at the named table and its index."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from saga_index.names import INDEX_NAME
from saga_index.names import PHASE_NAMES as PHASES
from tests.infra.conftest import Synthesised, _synthesise
from tests.infra.template_tools import as_list, render, resources

pytestmark = pytest.mark.infra

TABLE = "AWS::DynamoDB::Table"
BASELINE_PHASE = "legacy"  # cdk.json as committed: default_synth
TABLE_NAME = "propflow-prod"
ALARM_ACTION_KEYS = ("AlarmActions", "OKActions", "InsufficientDataActions")
_PHASE_VARIABLE = ("Properties", "Environment", "Variables", "SAGA_INDEX_PHASE")


@pytest.fixture(scope="session")
def phase_synths(
    default_synth: Synthesised, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, dict[str, Any]]:
    """phase -> template; each phase synthesised once per session (legacy is default_synth)."""
    assert default_synth.stack.config.phase == BASELINE_PHASE
    templates: dict[str, dict[str, Any]] = {BASELINE_PHASE: default_synth.template_json}
    for phase in PHASES:
        if phase != BASELINE_PHASE:
            synthesised = _synthesise(tmp_path_factory.mktemp(f"cdk-{phase}"), {"phase": phase})
            templates[phase] = synthesised.template_json
    return templates


def _differences(left: Any, right: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Paths (resource id, property, ...) where two JSON documents differ."""
    if isinstance(left, dict) and isinstance(right, dict):
        for key in sorted(set(left) | set(right), key=str):
            if key not in left or key not in right:
                yield (*path, key)
            else:
                yield from _differences(left[key], right[key], (*path, key))
    elif isinstance(left, list) and isinstance(right, list) and len(left) == len(right):
        for index, (a, b) in enumerate(zip(left, right, strict=True)):
            yield from _differences(a, b, (*path, index))
    elif left != right:
        yield path


def _expected_change(template: dict[str, Any], path: tuple[Any, ...]) -> bool:
    """What a phase change MAY change (infra/functions.py, infra/observability/): nothing else.

    - a function's SAGA_INDEX_PHASE (what the writers and readers do);
    - an alarm's actions (whether it pages) and its description (says "PAGES" or
      "informational in phase X", so on-call reads which it is);
    - the dashboard's body (its header names the phase).
    """
    if len(path) < 4 or path[0] != "Resources" or path[2] != "Properties":
        return False
    kind = template["Resources"][path[1]]["Type"]
    if kind == "AWS::Lambda::Function":
        return path[2:] == _PHASE_VARIABLE
    if kind == "AWS::CloudWatch::Alarm":
        return path[3] in (*ALARM_ACTION_KEYS, "AlarmDescription")
    if kind == "AWS::CloudWatch::Dashboard":
        return path[3] == "DashboardBody"
    return False


def test_given_every_phase_when_synthesised_then_the_table_resource_is_byte_identical(
    phase_synths: dict[str, dict[str, Any]],
) -> None:
    assert set(phase_synths) == set(PHASES)
    rendered = {
        phase: json.dumps(resources(template, TABLE), sort_keys=True)
        for phase, template in phase_synths.items()
    }
    (table_id,) = resources(phase_synths[BASELINE_PHASE], TABLE)
    baseline = rendered[BASELINE_PHASE]
    for phase, text in rendered.items():
        assert text == baseline, f"phase {phase} changes the table resource {table_id}"
    table = resources(phase_synths[BASELINE_PHASE], TABLE)[table_id]
    # What "byte-identical" protects: keys, the GSI, billing, PITR, retention, the name.
    props = table["Properties"]
    assert props["TableName"] == TABLE_NAME
    assert [g["IndexName"] for g in props["GlobalSecondaryIndexes"]] == [INDEX_NAME]
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert table["DeletionPolicy"] == table["UpdateReplacePolicy"] == "Retain"


@pytest.mark.parametrize("phase", [p for p in PHASES if p != BASELINE_PHASE])
def test_given_a_phase_change_then_only_the_phase_variable_and_alarm_actions_change(
    phase_synths: dict[str, dict[str, Any]], phase: str
) -> None:
    baseline, changed = phase_synths[BASELINE_PHASE], phase_synths[phase]
    assert set(baseline["Resources"]) == set(changed["Resources"]), "resources added/removed"
    differences = list(_differences(baseline, changed))
    unexpected = [path for path in differences if not _expected_change(baseline, path)]
    assert not unexpected, f"{BASELINE_PHASE} -> {phase} also changes {unexpected}"
    functions = resources(changed, "AWS::Lambda::Function")
    assert functions
    for logical_id, function in functions.items():
        variables = function["Properties"]["Environment"]["Variables"]
        assert variables["SAGA_INDEX_PHASE"] == phase, logical_id
        assert ("Resources", logical_id, *_PHASE_VARIABLE) in differences


def test_given_the_phases_then_alarm_actions_do_change_between_them(
    phase_synths: dict[str, dict[str, Any]],
) -> None:
    # The listed alarm-action differences are real (infra/observability/alarms.py pages per
    # phase); a diff helper that saw nothing would let the test above pass vacuously.
    changed_alarms = {
        path[1]
        for phase in PHASES
        for path in _differences(phase_synths[BASELINE_PHASE], phase_synths[phase])
        if path[0] == "Resources"
        and phase_synths[BASELINE_PHASE]["Resources"][path[1]]["Type"] == "AWS::CloudWatch::Alarm"
        and path[3] in ALARM_ACTION_KEYS
    }
    assert changed_alarms


def test_given_import_mode_then_no_table_and_every_data_grant_names_the_table_or_its_index(
    import_mode_synth: Synthesised,
) -> None:
    template = import_mode_synth.template_json
    assert resources(template, TABLE) == {}
    table_arn = (
        "arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/" + TABLE_NAME
    )
    allowed = {table_arn, f"{table_arn}/index/{INDEX_NAME}"}
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
