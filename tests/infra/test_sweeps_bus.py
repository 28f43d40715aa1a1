"""The sweeps' event bus (created by the stack, or named by context) and the functions' wiring:
handlers, environment, timeouts."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from infra.config import ConfigError, StackConfig
from infra.sweeps import SWEEPS
from tests.infra.conftest import Synthesised, _synthesise
from tests.infra.template_tools import grants, render, resources, role_statements, split_control

pytestmark = pytest.mark.infra

EXISTING_BUS = "propflow-renewal-events"
HANDLER_SOURCE = Path(__file__).resolve().parents[2] / "lambdas" / "handlers" / "sweeps.py"
BASE_CONTEXT = {"tableName": "propflow-prod", "importExistingTable": False}


@pytest.fixture(scope="module")
def named_bus_synth(tmp_path_factory: pytest.TempPathFactory) -> Synthesised:
    return _synthesise(
        tmp_path_factory.mktemp("cdk-named-bus"),
        {"eventBusName": EXISTING_BUS, "importExistingTable": True},
    )


def functions_by_handler(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        resource["Properties"]["Handler"]: resource["Properties"]
        for resource in resources(template, "AWS::Lambda::Function").values()
    }


def test_given_no_bus_in_context_then_the_stack_creates_one_and_every_event_sweep_targets_it(
    owned_synth: Synthesised,
) -> None:
    template = owned_synth.template_json
    (bus_id,) = resources(template, "AWS::Events::EventBus")
    functions = functions_by_handler(template)
    for sweep in SWEEPS:
        env = functions[f"handlers.sweeps.{sweep.handler}"]["Environment"]["Variables"]
        if sweep.emits_events:
            assert render(env["EVENT_BUS_NAME"]) == "${" + bus_id + "}"
        else:
            assert "EVENT_BUS_NAME" not in env
    outputs = template["Outputs"]
    assert any(render(o["Value"]) == "${" + bus_id + "}" for o in outputs.values())


def test_given_a_bus_named_by_context_then_no_bus_is_created_and_the_sweeps_use_that_one(
    named_bus_synth: Synthesised,
) -> None:
    template = named_bus_synth.template_json
    assert resources(template, "AWS::Events::EventBus") == {}
    named_arn = (
        "arn:${AWS::Partition}:events:${AWS::Region}:${AWS::AccountId}:event-bus/" + EXISTING_BUS
    )
    functions = functions_by_handler(template)
    for sweep in SWEEPS:
        properties = functions[f"handlers.sweeps.{sweep.handler}"]
        role_id = render(properties["Role"]).removeprefix("${").removesuffix(".Arn}")
        statements = split_control(role_statements(template, role_id))[0]
        # The retry sweep's UpdateItem carries its own condition (saga rows only): not a bus.
        unconditioned = [s for s in statements if "Condition" not in s]
        put_events = {
            resource for action, resource in grants(unconditioned) if action == "events:PutEvents"
        }
        env = properties["Environment"]["Variables"]
        if sweep.emits_events:
            assert env["EVENT_BUS_NAME"] == EXISTING_BUS
            assert put_events == {named_arn}
        else:
            assert put_events == set()


def test_given_the_sweep_functions_then_each_carries_its_index_and_service_but_no_phase(
    owned_synth: Synthesised,
) -> None:
    functions = functions_by_handler(owned_synth.template_json)
    for sweep in SWEEPS:
        properties = functions[f"handlers.sweeps.{sweep.handler}"]
        env = properties["Environment"]["Variables"]
        # The phase and N come from the control record at run time, never from the deploy.
        assert "SAGA_INDEX_PHASE" not in env
        assert "SAGA_INDEX_SHARDS" not in env
        assert env["SAGA_INDEX_NAME"] == "renewal-saga-person-index"
        assert env["POWERTOOLS_SERVICE_NAME"] == sweep.job_name
        assert env["POWERTOOLS_METRICS_NAMESPACE"] == "RenewalSagaIndex"
        assert properties["TracingConfig"] == {"Mode": "Active"}
        # A run must end well inside the fastest schedule's 5-minute period.
        assert properties["Timeout"] < 5 * 60


def test_given_the_handler_paths_then_each_names_a_function_of_the_handler_module() -> None:
    # Read, not imported: importing would initialise Powertools before the component tests
    # set its environment.
    tree = ast.parse(HANDLER_SOURCE.read_text(encoding="utf-8"))
    defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    assert {sweep.handler for sweep in SWEEPS} <= defined


@pytest.mark.parametrize("bad", ["arn:aws:events:us-east-1:123456789012:event-bus/x", "a b", 7])
def test_given_an_invalid_bus_name_in_context_then_synth_stops_naming_the_key(bad: Any) -> None:
    with pytest.raises(ConfigError, match="eventBusName"):
        StackConfig.from_context({**BASE_CONTEXT, "eventBusName": bad})


def test_given_no_bus_name_in_context_then_the_config_leaves_it_to_the_stack() -> None:
    assert StackConfig.from_context(BASE_CONTEXT).event_bus_name is None
    assert StackConfig.from_context({**BASE_CONTEXT, "eventBusName": ""}).event_bus_name is None
