"""Every function of the synthesised stack, started the way Lambda starts it: its asset from
cdk.out (found through the asset manifest), the layer and the runtime's boto3 and nothing else,
exactly the template's environment (references resolved to a stand-in stack on a moto server),
a realistic event for its trigger and a Lambda-like context. The effects are read back."""

from __future__ import annotations

from pathlib import Path

import pytest

from devkit import layer
from saga_index.index import keys
from saga_index.index.names import CONTROL_PK
from tests.support.rehearsal.process import DEV_ONLY_MODULES, Invocation
from tests.support.rehearsal.scenario import BACKFILL_HANDLERS, Rehearsal
from tests.support.rehearsal.stack import Synth

pytestmark = pytest.mark.rehearsal

MAX_ASSET_BYTES = 1_000_000


def _function_ids(synth_template: Synth) -> list[str]:
    return sorted(synth_template.of_type("AWS::Lambda::Function"))


# ---- every function: asset, handler, environment, start-up --------------------------------------


def test_given_the_synthesised_stack_when_rehearsed_then_every_function_was_invoked(
    rehearsal: Rehearsal, synth: Synth
) -> None:
    assert set(rehearsal.invocations) == set(_function_ids(synth))
    for logical_id, invocations in rehearsal.invocations.items():
        assert invocations, logical_id
        assert all(i.ok for i in invocations if i is not rehearsal.stale_worker), logical_id


def test_given_each_function_then_its_handler_resolves_to_a_file_inside_its_own_asset(
    rehearsal: Rehearsal,
) -> None:
    for logical_id, function in rehearsal.functions.items():
        module, _, name = function.properties["Handler"].rpartition(".")
        source = function.asset / Path(*module.split(".")).with_suffix(".py")
        assert source.is_file(), f"{logical_id}: {source} is not in the asset"
        assert f"def {name}(" in source.read_text(encoding="utf-8"), logical_id
        loaded = rehearsal.invocations[logical_id][0].modules[module]
        assert Path(loaded).resolve() == source.resolve(), logical_id


def test_given_a_function_process_then_nothing_of_the_project_venv_is_importable(
    rehearsal: Rehearsal, dependency_paths: tuple[Path, Path]
) -> None:
    # Resolved once: every invocation loads the same thousand-odd modules from the same places,
    # and resolving each root again for each of them was most of this test's time.
    allowed = {
        root.resolve()
        for root in [f.asset for f in rehearsal.functions.values()] + list(dependency_paths)
    }
    # The standard library of the interpreter the functions ran under (Python 3.13 when present).
    stdlib = layer.lambda_python().stdlib.resolve()
    judged: set[str] = set()
    for logical_id, probe in rehearsal.probes.items():
        assert probe == dict.fromkeys(DEV_ONLY_MODULES), f"{logical_id} imported {probe}"
        for invocation in rehearsal.invocations[logical_id]:
            for module, location in invocation.modules.items():
                # __main__: bootstrap.py, the stand-in for Lambda's runtime; a location already
                # judged for another module or invocation is judged the same again.
                if module in ("__main__", "__mp_main__") or location in judged:
                    continue
                path = Path(location).resolve()
                inside = [root for root in allowed if path.is_relative_to(root)]
                if inside or path.is_relative_to(stdlib):
                    assert "site-packages" not in path.parts or inside, (module, location)
                    judged.add(location)
                    continue
                raise AssertionError(f"{logical_id}: {module} came from {location}")


def test_given_the_template_environment_then_each_process_got_exactly_it(
    rehearsal: Rehearsal, synth: Synth
) -> None:
    for logical_id, function in rehearsal.functions.items():
        declared = synth.resources[logical_id]["Properties"]["Environment"]["Variables"]
        assert set(function.environment) == set(declared)
        # The migration state is the control record's, never the deploy's.
        assert not {"SAGA_INDEX_PHASE", "SAGA_INDEX_SHARDS"} & set(function.environment)
        assert "POWERTOOLS_TRACE_DISABLED" not in function.environment


def test_given_the_assets_then_they_hold_only_the_function_code_and_stay_small(
    rehearsal: Rehearsal,
) -> None:
    forbidden = {"tests", ".venv", "cdk.out", "node_modules", "__pycache__", "cli", "build"}
    for function in {f.asset for f in rehearsal.functions.values()}:
        files = [p for p in function.rglob("*") if p.is_file()]
        names = {part for p in files for part in p.relative_to(function).parts}
        assert not names & forbidden, f"{function} carries {names & forbidden}"
        assert not [p for p in files if p.suffix == ".pyc" or p.name == "__main__.py"]
        assert {p.relative_to(function).parts[0] for p in files} == {"handlers", "saga_index"}
        assert sum(p.stat().st_size for p in files) < MAX_ASSET_BYTES


# ---- the effects ---------------------------------------------------------------------------


def _events(rehearsal: Rehearsal, detail_type: str) -> list[str]:
    return sorted(
        e["detail"]["sagaId"] for e in rehearsal.events if e["detail-type"] == detail_type
    )


def _only(rehearsal: Rehearsal, handler: str) -> list[Invocation]:
    return rehearsal.invocations[rehearsal.by_handler[handler]]


def test_given_legacy_rows_when_the_drift_guard_runs_then_it_counts_them_and_prints_emf(
    rehearsal: Rehearsal,
) -> None:
    first, after_backfill = _only(rehearsal, "handlers.drift_guard.handler")
    # 15 movable rows + 1 without personId on the legacy key, 3 already on their shards.
    assert first.result["legacyRows"] == 16
    assert first.result["shardedRows"] == 3
    assert first.metric("LegacyRows", service="drift-guard") == [16.0]
    # The STATE item was deleted: the guard pages, and judges over the history's layouts
    # (legacy -> 16 shards), where nothing is out of place.
    assert first.result["phase"] == "migrating"
    assert first.metric("ControlRecordMissing") == [1.0]
    assert first.metric("UnexpectedLegacyRows") == [0.0]
    assert first.metric("UnexpectedShardedRows") == [0.0]
    assert first.metric("MisroutedRows") == [0.0]
    assert after_backfill.result["legacyRows"] == 1  # the anomaly stays, on purpose
    assert after_backfill.result["shardedRows"] == 18
    assert after_backfill.metric("LegacyRows") == [1.0]
    assert after_backfill.metric("ShardedRows") == [18.0]


def test_given_due_sagas_when_the_sweeps_run_then_their_events_reach_the_bus(
    rehearsal: Rehearsal,
) -> None:
    assert _events(rehearsal, "SagaWorkflowUnhealthy") == ["stale-heartbeat"]
    assert _events(rehearsal, "SagaPrepareRetryRequested") == ["failed-prepare"]
    assert "stuck" in _events(rehearsal, "SagaStuck")
    assert {e["source"] for e in rehearsal.events} == {"propflow.renewal-saga"}
    claimed = next(r for r in rehearsal.rows_after if r["sagaId"] == "failed-prepare")
    assert claimed["prepareAttempts"] == 1
    (snapshot,) = _only(rehearsal, "handlers.sweeps.agent_metrics_snapshot")
    assert snapshot.metric("OpenSagas", State="PREPARE_FAILED") == [1.0]
    # With the STATE item missing the sweeps read every layout the history names: legacy rows
    # and the rows already on their shards.
    assert snapshot.result["sagasRead"] == 19


def test_given_the_state_machine_inputs_when_the_backfill_runs_then_every_legacy_row_is_restamped(
    rehearsal: Rehearsal,
) -> None:
    before = {r["sagaId"]: r["GSI4PK"] for r in rehearsal.rows_before}
    after = {r["sagaId"]: r for r in rehearsal.rows_after}
    assert sum(1 for key in before.values() if key == keys.LEGACY_GSI4PK) == 16
    assert after.pop("no-person")["GSI4PK"] == keys.LEGACY_GSI4PK
    for saga_id, row in after.items():
        assert row["GSI4PK"] == keys.shard_gsi4pk_for_person(
            row["personId"], rehearsal.shard_count
        ), saga_id
    workers = _only(rehearsal, BACKFILL_HANDLERS["worker"])
    assert sum(sum(w.metric("Restamped", service="backfill-worker")) for w in workers) == 15
    verify, after_late_write = _only(rehearsal, BACKFILL_HANDLERS["verify"])
    assert verify.result["verification"]["ok"] is True
    assert verify.metric("SourceKeyRows") == [1.0]
    assert verify.metric("UnexpectedSourceKeyRows") == [0.0]
    assert after_late_write.result["verification"]["ok"] is False
    assert after_late_write.metric("UnexpectedSourceKeyRows") == [1.0]


def test_given_the_backfill_when_it_ran_then_it_held_the_lease_and_recorded_its_completion(
    rehearsal: Rehearsal,
) -> None:
    (plan,) = _only(rehearsal, BACKFILL_HANDLERS["plan"])
    run = plan.result["run"]
    assert run["holder"] == rehearsal.backfill_holder
    assert (run["source"], run["target"]) == (
        {"kind": "legacy", "shardCount": None},
        {"kind": "sharded", "shardCount": rehearsal.shard_count},
    )
    state = rehearsal.control_after
    assert state is not None
    assert state.lease is None  # released by the verifier
    completion = state.last_backfill
    assert completion is not None
    assert (completion.holder, completion.lease_token) == (
        rehearsal.backfill_holder,
        run["leaseToken"],
    )
    assert (completion.complete, completion.verified, completion.restamped) == (True, True, 15)
    # The verifier invoked again after the late write found the lease already released with
    # this run's completion: it reports, and records nothing over it.
    assert completion.state_version == state.version == run["stateVersion"]


def test_given_a_released_lease_when_a_worker_of_the_run_is_invoked_then_it_writes_nothing(
    rehearsal: Rehearsal,
) -> None:
    stale = rehearsal.stale_worker
    assert stale is not None
    assert not stale.ok
    assert stale.error is not None
    assert stale.error.startswith("LeaseLostError: ")
    assert "released" in stale.error
    # Its only calls: the heartbeat the condition refused, and the read that said why (its
    # ticket carries the lease's epoch: nothing is read before). No saga row and no fence slot
    # is touched.
    assert [(c["operation"], c["leadingKeys"]) for c in stale.calls] == [
        ("UpdateItem", [CONTROL_PK]),
        ("GetItem", [CONTROL_PK]),
    ]


def test_given_no_otel_layer_then_no_function_traces_by_itself_or_imports_a_tracer(
    rehearsal: Rehearsal,
) -> None:
    # Tracing is the deployment's (docs/observability.md, "Tracing"): with otelLayerArn the ADOT
    # layer's wrapper traces each invocation; without it (this synth), Lambda's active tracing
    # records the invocation and the code sends nothing. AWS_XRAY_DAEMON_ADDRESS is set as Lambda
    # sets it under active tracing (a socket of the test): no function sent it a datagram.
    assert rehearsal.segments == []
    for logical_id, invocations in rehearsal.invocations.items():
        assert invocations, logical_id
        for invocation in invocations:
            roots = {module.partition(".")[0] for module in invocation.modules}
            assert "handlers" in roots, logical_id  # the probe saw the function's modules
            assert not roots & {"aws_xray_sdk", "opentelemetry"}, logical_id


def test_given_each_function_then_the_layer_it_deploys_with_is_the_one_rehearsed(
    rehearsal: Rehearsal, synth: Synth
) -> None:
    # The published layer carries compiled code (pydantic_core): a layer of the wrong
    # architecture fails every import on the first invocation, however well the code ran here.
    pins = layer.pinned_versions()
    parameters = synth.template.get("Parameters", {})
    for logical_id, function in rehearsal.functions.items():
        (architecture,) = function.properties["Architectures"]
        runtime = function.properties["Runtime"]
        (layer_ref,) = function.properties["Layers"]
        parameter = parameters[layer_ref["Ref"]]
        assert parameter["Type"] == "AWS::SSM::Parameter::Value<String>"
        assert parameter["Default"] == (
            f"/aws/service/powertools/python/{architecture}/{runtime}/"
            f"{pins['aws-lambda-powertools']}"
        ), logical_id
