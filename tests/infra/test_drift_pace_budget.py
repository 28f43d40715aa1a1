"""The drift guard's paced index reads fit its run, computed from the synthesised function (its
timeout, its per-key pace) at a stated scale: 100x today's rows with a 100x history."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from handlers.drift_guard import SAFETY_MARGIN_SECONDS
from handlers.settings import DriftGuardSettings
from infra.drift import DriftGuard
from saga_index.index import names
from saga_index.index.jobs import DRIFT_GUARD
from saga_index.store.dynamo import PARTITION_READ_UNITS, KeyReadPace
from tests.infra.template_tools import resources

# The layout lab's figures at 100x rows with a 100x history (docs/layouts.md, "The drift guard's
# run"): one run reads 339,222 read units in adr-n16 (every key of the state in full), 21,655 of
# them on its largest shard key; in legacy all 339,312 are on the one key.
FULL_READ_UNITS_100X = 339_222
LARGEST_KEY_UNITS_100X = 21_655
LEGACY_KEY_UNITS_100X = 339_312
WORKERS = 16  # DriftChecker's max_workers: keys read at once


def _drift_function(template: Template) -> dict[str, Any]:
    functions = [
        properties
        for resource in resources(template.to_json(), "AWS::Lambda::Function").values()
        if names.ENV_DRIFT_PERIOD_MINUTES
        in (properties := resource["Properties"]).get("Environment", {}).get("Variables", {})
    ]
    assert len(functions) == 1
    return functions[0]


def _budget_and_pace(template: Template) -> tuple[float, KeyReadPace, dict[str, str]]:
    function = _drift_function(template)
    env = function["Environment"]["Variables"]
    pace = KeyReadPace(units_per_key=float(env[names.ENV_DRIFT_KEY_READ_UNITS]))
    return function["Timeout"] - SAFETY_MARGIN_SECONDS, pace, env


def test_the_pace_is_a_tenth_of_a_partition_and_a_run_ends_before_the_next(
    owned_template: Template,
) -> None:
    budget, pace, env = _budget_and_pace(owned_template)
    timeout = _drift_function(owned_template)["Timeout"]
    assert pace.units_per_key <= 0.10 * PARTITION_READ_UNITS
    assert timeout < DRIFT_GUARD.period_minutes * 60
    assert (timeout, budget) == (240, 220)
    # The handler reads the same value the stack sets.
    settings = DriftGuardSettings.model_validate({**env, names.ENV_TABLE: "table"})
    assert settings.index_read_units_per_key == pace.units_per_key


def test_a_sharded_16_index_at_100x_rows_and_history_is_read_within_one_run(
    owned_template: Template,
) -> None:
    budget, pace, _ = _budget_and_pace(owned_template)
    # Every key as large as the largest, all 16 at once: 21,655 units at 172 units/s, 126 s of
    # the 220 s budget, at most 16 x 300 = 4,800 units/s on the table in any second.
    seconds = pace.seconds_for_keys([LARGEST_KEY_UNITS_100X] * 16, workers=WORKERS)
    assert seconds == pytest.approx(125.9, abs=0.1)
    assert seconds <= budget
    # sharded(64) reads the same units over four times the keys, 16 at a time: no longer.
    assert pace.seconds_for_keys([FULL_READ_UNITS_100X / 64] * 64, workers=WORKERS) <= budget


def test_a_legacy_index_at_100x_rows_and_history_cannot_be_read_in_one_run(
    owned_template: Template,
) -> None:
    # The one key holds every row: 1,973 s at the pace, nine runs' budget. The guard fails such
    # a run loudly (KeyReadIncompleteError) rather than publish part of a count.
    budget, pace, _ = _budget_and_pace(owned_template)
    assert pace.seconds_for(LEGACY_KEY_UNITS_100X) == pytest.approx(1972.7, abs=0.1)
    assert pace.seconds_for(LEGACY_KEY_UNITS_100X) > budget


def test_a_pace_the_handler_would_refuse_fails_synth() -> None:
    stack = cdk.Stack(cdk.App(), "S")
    with pytest.raises(ValueError, match="above 128 and at most 3000"):
        DriftGuard(stack, "G", functions=None, index_read_units_per_key=128)  # type: ignore[arg-type]
