"""`saga-index watch` against moto CloudWatch, with DynamoDB's metrics put for the GSI."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from saga_index.index import names
from saga_index.store.watch import read_throttle_window
from saga_index_cli.context import CliContext
from saga_index_cli.main import main

TABLE = "propflow-prod"


@pytest.fixture
def cloudwatch() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("cloudwatch", region_name="us-east-1")


def put(
    cloudwatch: Any,
    metric: str,
    value: float,
    *,
    ago: timedelta,
    index: str = names.INDEX_NAME,
    table: str = TABLE,
) -> None:
    cloudwatch.put_metric_data(
        Namespace="AWS/DynamoDB",
        MetricData=[
            {
                "MetricName": metric,
                "Dimensions": [
                    {"Name": "TableName", "Value": table},
                    {"Name": "GlobalSecondaryIndexName", "Value": index},
                ],
                "Value": value,
                "Unit": "Count",
                "Timestamp": datetime.now(UTC) - ago,
            }
        ],
    )


def active_index(cloudwatch: Any) -> None:
    """The index is read every hour: CloudWatch has consumed-capacity data for it."""
    for hours in range(0, 24 * 8, 6):
        put(cloudwatch, "ConsumedReadCapacityUnits", 40, ago=timedelta(hours=hours, minutes=1))


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(["--table", TABLE, *argv])
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


def test_no_throttle_in_the_window_exits_0(
    cloudwatch: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    active_index(cloudwatch)
    code, out, _ = run(capsys, "watch", "--json")
    report = json.loads(out)
    assert code == 0
    assert report["ok"] is True
    assert report["verdict"] == "none"
    assert report["throttleEvents"] == 0
    assert report["indexActivity"]["ConsumedReadCapacityUnits"] > 0


def test_a_key_range_throttle_on_the_gsi_exits_1_with_when_and_how_many(
    cloudwatch: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    active_index(cloudwatch)
    put(cloudwatch, "ReadKeyRangeThroughputThrottleEvents", 4, ago=timedelta(days=3))
    put(cloudwatch, "WriteThrottleEvents", 2, ago=timedelta(days=1))
    code, out, _ = run(capsys, "watch", "--days", "7", "--json")
    report = json.loads(out)
    assert code == 1
    assert report["verdict"] == "throttled"
    assert report["throttled"] is True
    assert report["throttleEvents"] == 6
    assert report["indexThrottles"]["ReadKeyRangeThroughputThrottleEvents"] == 4
    assert report["indexThrottles"]["WriteThrottleEvents"] == 2
    assert [h["metric"] for h in report["throttleHours"]] == [
        "ReadKeyRangeThroughputThrottleEvents",
        "WriteThrottleEvents",
    ]
    assert report["firstThrottle"] < report["lastThrottle"]


def test_a_throttle_before_the_window_does_not_count(
    cloudwatch: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    active_index(cloudwatch)
    put(cloudwatch, "ReadThrottleEvents", 9, ago=timedelta(days=5))
    code_short, _, _ = run(capsys, "watch", "--days", "2", "--json")
    code_long, _, _ = run(capsys, "watch", "--days", "7", "--json")
    assert (code_short, code_long) == (0, 1)


def test_throttles_of_another_index_or_table_do_not_count(
    cloudwatch: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    active_index(cloudwatch)
    put(cloudwatch, "ReadThrottleEvents", 5, ago=timedelta(hours=3), index="other-index")
    put(cloudwatch, "ReadThrottleEvents", 5, ago=timedelta(hours=3), table="other-table")
    code, _, _ = run(capsys, "watch", "--json")
    assert code == 0


def test_no_data_at_all_cannot_vouch_and_exits_1(
    cloudwatch: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "watch")
    assert code == 1
    assert "verdict: NO DATA" in out


def test_human_report_names_each_metric_and_the_verdict(
    cloudwatch: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    active_index(cloudwatch)
    put(cloudwatch, "WriteKeyRangeThroughputThrottleEvents", 1, ago=timedelta(hours=5))
    code, out, _ = run(capsys, "watch")
    assert code == 1
    assert "WriteKeyRangeThroughputThrottleEvents: 1" in out
    assert "verdict: THROTTLED (1 event(s)" in out


@pytest.mark.parametrize("days", ["0", "456", "seven"])
def test_a_window_outside_1_to_455_days_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], days: str
) -> None:
    code, out, err = run(capsys, "watch", "--days", days)
    assert (code, out) == (2, "")
    assert "--days" in err


def test_every_page_of_get_metric_data_is_read(cloudwatch: Any) -> None:
    active_index(cloudwatch)
    put(cloudwatch, "ReadThrottleEvents", 3, ago=timedelta(hours=2))
    pages: list[dict[str, Any]] = []
    real = cloudwatch.get_metric_data

    def two_pages(**request: Any) -> dict[str, Any]:
        # Split the answer: the first page carries half the results and a NextToken.
        response = real(**{k: v for k, v in request.items() if k != "NextToken"})
        results = response["MetricDataResults"]
        page = (
            {"MetricDataResults": results[len(results) // 2 :]}
            if "NextToken" in request
            else {"MetricDataResults": results[: len(results) // 2], "NextToken": "more"}
        )
        pages.append(page)
        return page

    cloudwatch.get_metric_data = two_pages
    report = read_throttle_window(cloudwatch, TABLE, names.INDEX_NAME, days=7)
    assert len(pages) == 2
    assert report.index_throttles["ReadThrottleEvents"] == 3
    assert report.index_activity["ConsumedReadCapacityUnits"] > 0


# ---- which endpoint CloudWatch is read from ---------------------------------------------------


@pytest.fixture
def cloudwatch_endpoints(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The endpoint of every CloudWatch client the CLI makes (the real client, recorded)."""
    for variable in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_CLOUDWATCH"):
        monkeypatch.delenv(variable, raising=False)  # the shell's own must not decide
    seen: list[str] = []
    real = CliContext.aws_client

    def recording(cli: CliContext, service: str, *, endpoint_url: str | None = None) -> Any:
        client = real(cli, service, endpoint_url=endpoint_url)
        if service == "cloudwatch":
            seen.append(client.meta.endpoint_url)
        return client

    monkeypatch.setattr(CliContext, "aws_client", recording)
    return seen


def test_the_dynamodb_endpoint_url_is_not_cloudwatchs(
    cloudwatch: Any, capsys: pytest.CaptureFixture[str], cloudwatch_endpoints: list[str]
) -> None:
    # Given a local DynamoDB endpoint (nothing listens there) and CloudWatch in AWS (moto)
    active_index(cloudwatch)
    # When watch runs with --endpoint-url
    code, out, _ = run(capsys, "--endpoint-url", "http://127.0.0.1:9", "watch", "--json")
    # Then CloudWatch is read at its own endpoint, not the DynamoDB one
    assert code == 0
    assert json.loads(out)["verdict"] == "none"
    assert cloudwatch_endpoints == ["https://monitoring.us-east-1.amazonaws.com"]


def test_cloudwatch_endpoint_url_comes_from_its_option_or_its_environment_variable(
    cloudwatch: Any,
    capsys: pytest.CaptureFixture[str],
    cloudwatch_endpoints: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Nothing listens on port 9: one attempt each, refused at once: exit 4, could not complete
    code, _, err = run(
        capsys,
        "--max-attempts",
        "1",
        "watch",
        "--cloudwatch-endpoint-url",
        "http://127.0.0.1:9",
    )
    assert code == 4
    assert "could not complete: CloudWatch at http://127.0.0.1:9 could not be reached" in err
    assert "(GetMetricData)" in err
    monkeypatch.setenv("AWS_ENDPOINT_URL_CLOUDWATCH", "http://localhost:9")
    code, _, _ = run(capsys, "--max-attempts", "1", "watch")
    assert code == 4
    assert cloudwatch_endpoints == ["http://127.0.0.1:9", "http://localhost:9"]
