"""bench.tracing without running it: its pins are exact and agree with what the functions deploy,
and its span check fails loudly when an option traced nothing (or the baseline traced
something). The measurement itself is `python -m bench --only tracing` (bench/tracing.py)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from bench import BENCHMARKS, tracing
from devkit.layer import pinned_versions

REQUIREMENTS = sorted(tracing.REQUIREMENTS_DIR.glob("*.txt"))
HEADER = b'{"format":"json","version":1}\n'


def _xray(document: dict[str, object]) -> bytes:
    return HEADER + json.dumps(document).encode()


def _otlp(payload: bytes) -> bytes:
    return HEADER + b"T1S" + base64.b64encode(payload)


def test_the_bench_is_registered() -> None:
    assert "bench.tracing" in BENCHMARKS


def test_every_option_and_shared_stack_has_a_pin_file() -> None:
    names = {path.stem for path in REQUIREMENTS}
    assert names == {*tracing.SHARED, *tracing.OPTION_DIRS.values()}
    assert set(tracing.OPTIONS) == {tracing.BASELINE, *tracing.OPTION_DIRS}


@pytest.mark.parametrize("path", REQUIREMENTS, ids=[p.name for p in REQUIREMENTS])
def test_every_pin_file_pins_every_line_exactly(path: Path) -> None:
    pins = tracing.read_pins(path)
    names = [pin.partition("==")[0].lower().replace("_", "-") for pin in pins]
    assert len(names) == len(set(names)), f"{path.name} pins a package twice"


def test_the_shared_stacks_are_the_versions_the_functions_deploy() -> None:
    deployed = pinned_versions()  # requirements.txt
    shared = {
        pin.partition("==")[0].lower().replace("_", "-"): pin.partition("==")[2]
        for name in tracing.SHARED
        for pin in tracing.read_pins(tracing.REQUIREMENTS_DIR / f"{name}.txt")
    }
    for package in ("boto3", "botocore", "aws-lambda-powertools"):
        assert shared[package] == deployed[package], package


@pytest.mark.parametrize(
    "line",
    ["aws-xray-sdk>=2.15.0", "aws-xray-sdk", "aws-lambda-powertools[tracer]==3.37.0", "-e ."],
)
def test_a_line_that_is_not_an_exact_pin_is_refused_with_file_and_line(
    tmp_path: Path, line: str
) -> None:
    path = tmp_path / "option.txt"
    path.write_text(f"# a comment\nwrapt==2.5.2\n{line}\n", encoding="utf-8")
    with pytest.raises(tracing.TracingBenchError, match=r"option\.txt:3: .*not an exact pin"):
        tracing.read_pins(path)


def test_a_pin_file_without_pins_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "empty.txt"
    path.write_text("# nothing\n\n", encoding="utf-8")
    with pytest.raises(tracing.TracingBenchError, match="no pins"):
        tracing.read_pins(path)


def test_xray_segments_are_found_nested_in_the_handler_subsegment() -> None:
    document = {
        "name": "## handler",
        "subsegments": [{"name": "dynamodb", "namespace": "aws", "aws": {"operation": "GetItem"}}],
    }
    run = tracing.ColdStart(0.1, {"found": True}, [_xray(document)])
    assert tracing.spans_seen("powertools-xray", run.datagrams) == {
        "handler": True,
        "dynamodbGetItem": True,
    }
    tracing.check("powertools-xray", run)


def test_adot_spans_are_found_in_the_otlp_payload() -> None:
    payload = b"\n(opentelemetry.instrumentation.aws_lambda\x12\x06...DynamoDB.GetItem..."
    run = tracing.ColdStart(0.1, {"found": True}, [_otlp(payload)])
    for option in ("adot", "adot-fast-start"):
        assert tracing.spans_seen(option, run.datagrams) == {
            "handler": True,
            "dynamodbGetItem": True,
        }
        tracing.check(option, run)


@pytest.mark.parametrize("option", ["powertools-xray", "adot", "adot-fast-start"])
def test_an_option_that_sent_no_span_for_the_call_fails_the_run(option: str) -> None:
    handler_only = [
        _xray({"name": "## handler", "subsegments": []}),
        _otlp(b"opentelemetry.instrumentation.aws_lambda"),
    ]
    for datagrams in ([], handler_only):
        run = tracing.ColdStart(0.1, {"found": True}, datagrams)
        with pytest.raises(tracing.TracingBenchError, match=r"dynamodbGetItem.*means nothing"):
            tracing.check(option, run)


def test_a_baseline_that_sent_anything_fails_the_run() -> None:
    run = tracing.ColdStart(0.1, {"found": True}, [_xray({"name": "## handler"})])
    with pytest.raises(tracing.TracingBenchError, match="no tracing installed"):
        tracing.check(tracing.BASELINE, run)
    tracing.check(tracing.BASELINE, tracing.ColdStart(0.1, {"found": True}, []))


def test_a_handler_that_did_not_read_the_item_fails_the_run() -> None:
    run = tracing.ColdStart(0.1, {"found": False}, [])
    with pytest.raises(tracing.TracingBenchError, match="returned"):
        tracing.check(tracing.BASELINE, run)


def test_runs_below_one_are_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        tracing.run(runs=0)
    with pytest.raises(SystemExit) as exited:
        tracing.main(["--runs", "0"])
    assert exited.value.code == 2
