"""`saga-index watch`: ADR-0085's third "done" signal, the watch window: did the renewal-saga
GSI throttle in the last days? (CloudWatch, through its own endpoint, never --endpoint-url.)
Prints a human report (or, with --json, ONE JSON object) on stdout; exit 0 clean, 1 throttles
(or no data), 4 CloudWatch could not be reached or refused the call (failures.py).
"""

from __future__ import annotations

import click

from saga_index.index import names
from saga_index.store import (
    DEFAULT_DAYS,
    MAX_DAYS,
    WatchReport,
    read_throttle_window,
)
from saga_index_cli.context import CliContext, pass_cli
from saga_index_cli.endpoints import service_endpoint_option
from saga_index_cli.output import emit, json_option
from saga_index_cli.signals import EXIT_CLEAN, EXIT_FOUND


@click.command("watch")
@click.option(
    "--days",
    type=click.IntRange(1, MAX_DAYS),
    default=DEFAULT_DAYS,
    show_default=True,
    help="Length of the watch window, ending now.",
)
@json_option
@service_endpoint_option("cloudwatch", "CLOUDWATCH", "CloudWatch")
@pass_cli
def watch_command(
    cli: CliContext, days: int, as_json: bool, cloudwatch_endpoint_url: str | None
) -> None:
    """Did the renewal-saga GSI throttle in the last --days days? (CloudWatch, hourly sums)

    Reads the index's throttle metrics (Read/WriteThrottleEvents, the key-range, provisioned,
    on-demand-maximum and account-limit throttle events; dimensions TableName +
    GlobalSecondaryIndexName) and its consumed capacity. Table-level ThrottledRequests (no
    index dimension) is shown as context only.

    Exit 0 no throttle, 1 throttles found; also 1 when CloudWatch holds no data at all for
    the index in the window (wrong table, index or region: the watch cannot vouch for
    anything); 4 CloudWatch could not be reached, refused the call or does not support it
    (the message names its endpoint and GetMetricData): nothing was judged.
    """
    cloudwatch = cli.aws_client("cloudwatch", endpoint_url=cloudwatch_endpoint_url)
    report = read_throttle_window(cloudwatch, cli.require_table(), names.INDEX_NAME, days=days)
    if as_json:
        emit(report.to_dict())
    else:
        _print_watch(report)
    raise click.exceptions.Exit(EXIT_CLEAN if report.ok else EXIT_FOUND)


def _print_watch(report: WatchReport) -> None:
    summary = report.to_dict()
    lines = [
        f"GSI throttle watch: table {report.table_name}, index {report.index_name}, "
        f"{summary['start']} .. {summary['end']}",
        *(f"  {name}: {value}" for name, value in summary["indexThrottles"].items()),
        *(f"  {name} (activity): {value}" for name, value in summary["indexActivity"].items()),
        *(
            f"  table ThrottledRequests {op} (context): {value}"
            for op, value in summary["tableThrottledRequests"].items()
        ),
    ]
    for hour in summary["throttleHours"]:
        lines.append(f"  throttled: {hour['timestamp']} {hour['metric']} x{hour['events']}")
    verdict = report.verdict
    if verdict == "throttled":
        lines.append(
            f"verdict: THROTTLED ({summary['throttleEvents']} event(s), first "
            f"{summary['firstThrottle']}, last {summary['lastThrottle']})"
        )
    elif verdict == "no-data":
        lines.append(
            "verdict: NO DATA: CloudWatch has no metric at all for this index in the window; "
            "check --table, --region and the account"
        )
    else:
        lines.append("verdict: none: no throttle of the index in the window")
    click.echo("\n".join(lines))
