"""Release gates on the synthesised template: cdk-nag (AwsSolutions) and cfn-lint."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk.assertions import Template

from infra.functions import OTEL_LAYER_WARNING
from infra.observability.pager import UNSUBSCRIBED_WARNING
from infra.stack import build_app
from tests.infra.conftest import Synthesised

pytestmark = pytest.mark.infra

# W3005: redundant DependsOn that CDK itself generates; nothing to fix on our side.
CFN_LINT_IGNORED = "W3005"


# The report also carries construct annotations; this warning is the stack telling the truth
# about the test fixtures (nobody subscribed to the pager), asserted in test_alarms_template.py.
EXPECTED_WARNINGS = {f"Annotation::{UNSUBSCRIBED_WARNING}", f"Annotation::{OTEL_LAYER_WARNING}"}


def _violations(outdir: Path) -> list[str]:
    report = json.loads((outdir / "validation-report.json").read_text(encoding="utf-8"))
    return [
        violation["ruleName"]
        for plugin in report["pluginReports"]
        for violation in plugin.get("violations", [])
        if violation["ruleName"] not in EXPECTED_WARNINGS
    ]


@pytest.mark.parametrize("synth", ["owned_synth", "import_mode_synth"])
def test_given_either_mode_when_synthesised_with_cdk_nag_then_there_are_no_findings(
    synth: str, request: pytest.FixtureRequest
) -> None:
    synthesised: Synthesised = request.getfixturevalue(synth)
    assert _violations(synthesised.outdir) == []


def test_given_a_noncompliant_resource_when_synthesised_then_cdk_nag_fails_synth(
    tmp_path: Path,
) -> None:
    # Proves the gate is wired: without this, a removed plugin would leave the test above green.
    _app, stack = build_app(outdir=tmp_path)
    dynamodb.Table(
        stack,
        "NoPitr",
        partition_key=dynamodb.Attribute(name="k", type=dynamodb.AttributeType.STRING),
    )

    with pytest.raises(RuntimeError, match="ValidationFailed"):
        Template.from_stack(stack)

    assert "AwsSolutions-DDB3" in _violations(tmp_path)


@pytest.mark.parametrize("synth", ["owned_synth", "import_mode_synth"])
def test_given_either_mode_when_linted_with_cfn_lint_then_it_passes(
    synth: str, request: pytest.FixtureRequest
) -> None:
    synthesised: Synthesised = request.getfixturevalue(synth)
    cfn_lint = Path(sys.executable).parent / "cfn-lint"

    # The template path goes first: after --ignore-checks it would be read as a check id.
    result = subprocess.run(
        [str(cfn_lint), str(synthesised.template_path), "--ignore-checks", CFN_LINT_IGNORED],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert result.returncode == 0, f"cfn-lint failed:\n{result.stdout}\n{result.stderr}"
