"""The fast engine's refusals as the AWS SDK for JavaScript v3 parses them (the TypeScript
package's services meet the engine too): tests/conformance/engine_sdk_v3.mjs asserts the SDK's
error classes, names, ThrottlingReasons and CancellationReasons, with the SDK the TypeScript
package installs (`npm ci` in clients/typescript)."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from devkit.engine import Engine, ProxyOptions

pytestmark = pytest.mark.conformance

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "clients" / "typescript"
SCRIPT = Path(__file__).with_name("engine_sdk_v3.mjs")


@pytest.fixture
def engine() -> Iterator[Engine]:
    # A second of in-flight time: the script's plain write meets the transaction still ongoing.
    with Engine(options=ProxyOptions(in_flight=1.0, wcu_ceiling=3)) as running:
        yield running


def test_the_sdk_for_javascript_parses_every_refusal_as_dynamodb_s(engine: Engine) -> None:
    node = shutil.which("node")
    assert node is not None, "node is not on PATH"
    sdk = PACKAGE / "node_modules" / "@aws-sdk" / "client-dynamodb"
    assert sdk.exists(), f"{sdk} is missing: run `npm ci` in {PACKAGE}"

    done = subprocess.run(
        [node, str(SCRIPT), str(PACKAGE), engine.endpoint_url, "engine-sdk-v3"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["throttle"]["name"] == "ThrottlingException"
    assert seen["throttle"]["throttlingReasons"][0]["reason"] == (
        "TableWriteKeyRangeThroughputExceeded"
    )
    assert seen["conflict"]["name"] == "TransactionConflictException"
    assert seen["cancelled"]["CancellationReasons"][1]["Code"] == "TransactionConflict"
    assert seen["conditionFailed"]["CancellationReasons"][0]["Code"] == "ConditionalCheckFailed"
