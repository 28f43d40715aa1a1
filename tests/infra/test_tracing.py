"""Tracing as synthesised (docs/observability.md, "Tracing"): with context otelLayerArn every
function carries AWS's managed ADOT layer and the wrapper's variables, traces only; without it,
Lambda's own active tracing and a synth warning naming the key; a malformed ARN stops synth;
and the handlers' code imports no tracer."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Annotations, Match

from infra.config import OTEL_LAYER_ARN_KEY, ConfigError
from infra.functions import OTEL_ENVIRONMENT, OTEL_LAYER_WARNING, OTEL_WRAPPER
from infra.stack import build_app
from tests.infra.conftest import OWNED_TABLE, Synthesised, _synthesise

pytestmark = pytest.mark.infra

OTEL_LAYER = "arn:aws:lambda:eu-west-1:615299751070:layer:AWSOpenTelemetryDistroPython:18"
RUNTIME_PY = Path(__file__).resolve().parents[2] / "lambdas" / "handlers" / "runtime.py"
TRACERS = ("aws_xray_sdk", "opentelemetry")


@pytest.fixture(scope="module")
def otel_synth(tmp_path_factory: pytest.TempPathFactory) -> Synthesised:
    return _synthesise(
        tmp_path_factory.mktemp("cdk-otel"), {**OWNED_TABLE, OTEL_LAYER_ARN_KEY: OTEL_LAYER}
    )


def _functions(synth: Synthesised) -> dict[str, dict[str, Any]]:
    functions = synth.template.find_resources("AWS::Lambda::Function")
    assert functions, "no functions synthesised"
    return {logical_id: resource["Properties"] for logical_id, resource in functions.items()}


def _validation_violations(synth: Synthesised) -> list[dict[str, Any]]:
    report = json.loads((synth.outdir / "validation-report.json").read_text(encoding="utf-8"))
    return [v for plugin in report["pluginReports"] for v in plugin.get("violations", [])]


def test_given_an_otel_layer_then_every_function_runs_under_its_wrapper_traces_only(
    otel_synth: Synthesised,
) -> None:
    for logical_id, function in _functions(otel_synth).items():
        layers = function["Layers"]
        # ADOT first, Powertools last: a later layer wins the files both carry.
        assert len(layers) == 2, logical_id
        assert layers[0] == OTEL_LAYER, logical_id
        variables = function["Environment"]["Variables"]
        assert variables["AWS_LAMBDA_EXEC_WRAPPER"] == OTEL_WRAPPER == "/opt/otel-instrument"
        assert variables["OTEL_AWS_APPLICATION_SIGNALS_ENABLED"] == "false", logical_id
        assert variables["OTEL_PYTHON_DISTRO"] == "aws_distro", logical_id
        assert variables["OTEL_PYTHON_CONFIGURATOR"] == "aws_configurator", logical_id
        # The span's service is the function's Powertools service, not its generated name.
        assert variables["OTEL_SERVICE_NAME"] == variables["POWERTOOLS_SERVICE_NAME"], logical_id
        # The wrapper sends spans to the X-Ray daemon that active tracing runs.
        assert function["TracingConfig"] == {"Mode": "Active"}, logical_id


def test_given_an_otel_layer_then_the_only_difference_is_the_layer_and_its_variables(
    otel_synth: Synthesised, owned_synth: Synthesised
) -> None:
    # Same roles, same permissions: traces only needs nothing beyond active tracing's grants.
    with_otel = _functions(otel_synth)
    without = _functions(owned_synth)
    assert set(with_otel) == set(without)
    for logical_id, function in with_otel.items():
        plain = without[logical_id]
        assert function["Layers"][1:] == plain["Layers"], logical_id
        added = set(function["Environment"]["Variables"]) - set(plain["Environment"]["Variables"])
        assert added == {*OTEL_ENVIRONMENT, "OTEL_SERVICE_NAME"}, logical_id
        rest = {k: v for k, v in function.items() if k not in ("Layers", "Environment")}
        assert rest == {k: v for k, v in plain.items() if k not in ("Layers", "Environment")}
    assert otel_synth.template.find_resources("AWS::IAM::Policy") == (
        owned_synth.template.find_resources("AWS::IAM::Policy")
    )


def test_given_an_otel_layer_then_synth_is_nag_clean_and_warns_nothing(
    otel_synth: Synthesised,
) -> None:
    Annotations.from_stack(otel_synth.stack).has_no_warning(
        "*", Match.string_like_regexp(OTEL_LAYER_ARN_KEY)
    )
    names = {v["ruleName"] for v in _validation_violations(otel_synth)}
    assert not {n for n in names if not n.startswith("Annotation::")}, names
    assert f"Annotation::{OTEL_LAYER_WARNING}" not in names
    cfn_lint = Path(sys.executable).parent / "cfn-lint"
    # W3005: redundant DependsOn that CDK itself generates (as in test_nag_and_lint.py).
    linted = subprocess.run(
        [str(cfn_lint), str(otel_synth.template_path), "--ignore-checks", "W3005"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert linted.returncode == 0, f"cfn-lint failed:\n{linted.stdout}\n{linted.stderr}"


def test_given_no_otel_layer_then_functions_keep_active_tracing_and_synth_warns(
    owned_synth: Synthesised,
) -> None:
    for logical_id, function in _functions(owned_synth).items():
        assert len(function["Layers"]) == 1, logical_id  # Powertools only
        variables = function["Environment"]["Variables"]
        assert not {k for k in variables if k.startswith("OTEL_")}, logical_id
        assert "AWS_LAMBDA_EXEC_WRAPPER" not in variables, logical_id
        assert function["TracingConfig"] == {"Mode": "Active"}, logical_id
    Annotations.from_stack(owned_synth.stack).has_warning(
        "*", Match.string_like_regexp(f"otelLayerArn.*{OTEL_LAYER_WARNING}")
    )


@pytest.mark.parametrize(
    "value",
    [
        "AWSOpenTelemetryDistroPython:18",
        "arn:aws:lambda:eu-west-1:615299751070:layer:AWSOpenTelemetryDistroPython",
        "arn:aws:lambda:eu-west-1:615299751070:function:AWSOpenTelemetryDistroPython:18",
        18,
    ],
)
def test_given_a_malformed_otel_layer_arn_then_synth_stops_naming_the_key(value: Any) -> None:
    with pytest.raises(ConfigError) as raised:
        build_app(context_overrides={**OWNED_TABLE, OTEL_LAYER_ARN_KEY: value})
    assert repr(OTEL_LAYER_ARN_KEY) in str(raised.value)
    assert repr(value) in str(raised.value)


def test_the_handler_runtime_imports_no_tracer() -> None:
    tree = ast.parse(RUNTIME_PY.read_text(encoding="utf-8"))
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            imported |= {f"{node.module}.{alias.name}" for alias in node.names}
    assert "aws_lambda_powertools.Logger" in imported  # the parse found the imports
    assert not {name for name in imported if name.startswith(TRACERS)}, imported
    assert not {name for name in imported if name.rpartition(".")[2] == "Tracer"}, imported
