"""The dashboard on-call opens first: links to the on-call guide and the saved Logs Insights
queries, the alarms' states, drift (raw counts and what is wrong now), shards, throttles, the
backfill's progress, the sweeps and the depth of the scheduled jobs' queues.

Like the rest of the stack it does not know the migration state: the per-shard graph is a
CloudWatch SEARCH over whatever shards the drift guard reports, so it follows N without a deploy.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cw
from constructs import Construct

from infra.config import StackConfig
from infra.drift import DriftGuard
from infra.observability.alarms import Alarms
from infra.observability.descriptions import GUIDE_PAGE
from infra.observability.metrics import GUARD_PERIOD, SagaMetrics
from infra.observability.queries import QUERY_PREFIX, SavedQueries
from infra.schedules import ScheduledInvocation
from saga_index.index.jobs import SWEEP_NAMES, SWEEPS
from saga_index.index.names import (
    CONTEXT_OPERATIONS,
    DIMENSION_INDEX,
    DIMENSION_SERVICE,
    DIMENSION_SHARD,
    DIMENSION_TABLE,
    INDEX_THROTTLE_METRICS,
    METRIC_ANOMALIES,
    METRIC_ANOMALOUS_ROWS,
    METRIC_CONTROL_RECORD_MISSING,
    METRIC_LEGACY_ROWS,
    METRIC_MISROUTED_ROWS,
    METRIC_OPEN_INDEX_MISSING_ROWS,
    METRIC_OPEN_INDEX_STRAY_ROWS,
    METRIC_OPEN_INDEX_UNSTAMPED_ROWS,
    METRIC_RESTAMPED,
    METRIC_ROWS_PER_SHARD,
    METRIC_SAGAS_READ,
    METRIC_SHARD_SKEW,
    METRIC_SHARDED_ROWS,
    METRIC_SKIPPED,
    METRIC_STRAY_ROWS,
    METRIC_SWEEP_DURATION,
    METRIC_UNEXPECTED_LEGACY_ROWS,
    METRIC_UNEXPECTED_SHARDED_ROWS,
    METRIC_UNINDEXED_ROWS,
    METRICS_NAMESPACE,
    SERVICE_BACKFILL_WORKER,
    SERVICE_DRIFT_GUARD,
)

# The guard's every-run wrong-now counts (each pages when > 0); the scan's four are graphed per
# hour because they arrive once per scan interval.
WRONG_NOW_METRICS = (
    METRIC_UNEXPECTED_LEGACY_ROWS,
    METRIC_UNEXPECTED_SHARDED_ROWS,
    METRIC_MISROUTED_ROWS,
    METRIC_CONTROL_RECORD_MISSING,
)
SCAN_WRONG_NOW_METRICS = (
    METRIC_UNINDEXED_ROWS,
    METRIC_STRAY_ROWS,
    METRIC_OPEN_INDEX_MISSING_ROWS,
    METRIC_OPEN_INDEX_STRAY_ROWS,
)
# The backfill worker's counts graphed as its progress.
BACKFILL_METRICS = (METRIC_RESTAMPED, METRIC_SKIPPED, METRIC_ANOMALIES)
# (sweep, finding): each sweep counts its findings under its own service name.
SWEEP_FINDINGS: tuple[tuple[str, str], ...] = tuple(
    (job.name, finding) for job in SWEEPS for finding in job.findings
)


class Dashboard:
    """`.dashboard`, added to `scope` with the output DashboardName."""

    def __init__(
        self,
        scope: Construct,
        *,
        config: StackConfig,
        metrics: SagaMetrics,
        alarms: Alarms,
        drift_guard: DriftGuard,
        queries: SavedQueries,
        schedules: dict[str, ScheduledInvocation],
    ) -> None:
        self._metrics = metrics
        stack = cdk.Stack.of(scope)
        name = re.sub(r"[^A-Za-z0-9_-]", "_", f"{stack.stack_name}-{config.table_name}")
        dashboard = cw.Dashboard(
            scope,
            "Dashboard",
            dashboard_name=name[:255],
            default_interval=cdk.Duration.days(1),
        )
        _add_header(dashboard, config, alarms=alarms, drift_guard=drift_guard, queries=queries)
        dashboard.add_widgets(
            _graph(
                "Wrong now (each pages when > 0)",
                [
                    *(metrics.guard(name) for name in WRONG_NOW_METRICS),
                    *(
                        metrics.guard(name, period=cdk.Duration.hours(1))
                        for name in SCAN_WRONG_NOW_METRICS
                    ),
                ],
            ),
            _graph(
                "Raw counts: rows on the legacy key, on shard keys, without a usable personId; "
                "open sagas not stamped yet while the open index is adding (no page)",
                [
                    metrics.guard(METRIC_LEGACY_ROWS),
                    metrics.guard(METRIC_SHARDED_ROWS),
                    metrics.guard(METRIC_ANOMALOUS_ROWS),
                    # The open-index backfill's work left: from the scan, once per interval.
                    metrics.guard(METRIC_OPEN_INDEX_UNSTAMPED_ROWS, period=cdk.Duration.hours(1)),
                ],
            ),
        )
        dashboard.add_widgets(
            _graph("Rows per shard (every shard the guard reports)", [self._rows_per_shard()]),
            _graph("Shard skew (max / mean)", [metrics.guard(METRIC_SHARD_SKEW)]),
        )
        dashboard.add_widgets(
            cw.GraphWidget(
                title="GSI throttle events (left) and table ThrottledRequests (right)",
                left=[metrics.index(name) for name in INDEX_THROTTLE_METRICS],
                right=[
                    metrics.table_throttled_requests(operation) for operation in CONTEXT_OPERATIONS
                ],
                width=24,
                height=6,
            ),
        )
        dashboard.add_widgets(
            _graph(
                "Backfill progress (rows per 5 min)",
                [metrics.service(SERVICE_BACKFILL_WORKER, name) for name in BACKFILL_METRICS],
            ),
            _graph(
                "Sweep findings",
                [
                    metrics.service(service, name, label=f"{name} ({service})")
                    for service, name in SWEEP_FINDINGS
                ],
            ),
        )
        dashboard.add_widgets(
            _graph(
                "Sweep duration (max)",
                self._per_sweep(METRIC_SWEEP_DURATION, statistic="Maximum"),
            ),
            _graph(
                "Sagas read per sweep run (max)",
                self._per_sweep(METRIC_SAGAS_READ, statistic="Maximum"),
            ),
        )
        dashboard.add_widgets(_queues_graph(schedules))
        self.dashboard = dashboard
        cdk.CfnOutput(
            scope,
            "DashboardName",
            value=dashboard.dashboard_name,
            description="CloudWatch dashboard of the renewal-saga index",
        )

    def _rows_per_shard(self) -> cw.MathExpression:
        # A SEARCH matches the dimension set exactly: these are the dimensions the guard
        # publishes RowsPerShard with (SagaMetrics.guard plus the shard).
        schema = ",".join(
            (
                METRICS_NAMESPACE,
                DIMENSION_INDEX,
                DIMENSION_SHARD,
                DIMENSION_TABLE,
                DIMENSION_SERVICE,
            )
        )
        filters = " ".join(
            (
                f'MetricName="{METRIC_ROWS_PER_SHARD}"',
                f'{DIMENSION_SERVICE}="{SERVICE_DRIFT_GUARD}"',
                f'{DIMENSION_TABLE}="{self._metrics.table_name}"',
                f'{DIMENSION_INDEX}="{self._metrics.index_name}"',
            )
        )
        period = int(GUARD_PERIOD.to_seconds())
        return cw.MathExpression(
            expression=f"SEARCH('{{{schema}}} {filters}', 'Maximum', {period})",
            using_metrics={},
            # CloudWatch's dynamic label: each series is named by its Shard dimension.
            label=f"shard ${{PROP('Dim.{DIMENSION_SHARD}')}}",
            period=GUARD_PERIOD,
        )

    def _per_sweep(self, metric_name: str, *, statistic: str) -> list[cw.IMetric]:
        return [
            self._metrics.service(service, metric_name, statistic=statistic, label=service)
            for service in SWEEP_NAMES
        ]


def logs_insights_url(region: str) -> str:
    """The Logs Insights page of the CloudWatch console in `region` (its Queries pane lists the
    saved queries)."""
    return (
        f"https://{region}.console.aws.amazon.com/cloudwatch/home?region={region}"
        "#logsV2:logs-insights"
    )


def _links(config: StackConfig, queries: SavedQueries) -> str:
    names = ", ".join(f"`{name}`" for name in queries.definitions)
    return (
        f"**On-call guide:** [{GUIDE_PAGE}]({config.runbook_base_url}/{GUIDE_PAGE}) "
        "(each alarm's description links its section and names its first command). "
        f"**Logs Insights:** [open the console]({logs_insights_url(cdk.Aws.REGION)}); "
        f"the saved queries are in the folder `{QUERY_PREFIX.rstrip('/')}` of its Queries "
        f"pane: {names}."
    )


def _graph(
    title: str, metrics: Sequence[cw.IMetric] | Iterable[cw.IMetric], *, stacked: bool = False
) -> cw.GraphWidget:
    return cw.GraphWidget(title=title, left=list(metrics), width=12, height=6, stacked=stacked)


def _add_header(
    dashboard: cw.Dashboard,
    config: StackConfig,
    *,
    alarms: Alarms,
    drift_guard: DriftGuard,
    queries: SavedQueries,
) -> None:
    """The first row: what the dashboard shows and where the state lives, links, the alarms."""
    dashboard.add_widgets(
        cw.TextWidget(
            markdown=(
                f"# Renewal-saga index ({config.table_name})\n"
                "The migration state is the control record in the table "
                f"(`saga-index --table {config.table_name} status`), not this stack. "
                "Drift metrics come from the "
                f"`{SERVICE_DRIFT_GUARD}` function every 5 minutes; the base-table scan "
                f"every {drift_guard.scan_every} runs."
            ),
            width=24,
            height=2,
        ),
        cw.TextWidget(markdown=_links(config, queries), width=24, height=4),
        cw.AlarmStatusWidget(
            title="Alarms (every one pages)",
            alarms=list(alarms.alarms.values()),
            width=24,
            height=3,
        ),
    )


def _queues_graph(schedules: dict[str, ScheduledInvocation]) -> cw.GraphWidget:
    """Each scheduled job's dead-letter and failure queues: messages waiting."""
    return _graph(
        "Scheduled jobs' queues: messages waiting (each alarm counts arrivals)",
        [
            queue.metric_approximate_number_of_messages_visible(
                period=GUARD_PERIOD,
                statistic="Maximum",
                label=f"{job} {kind}",
            )
            for job, invocation in schedules.items()
            for kind, queue in (
                ("dead letters", invocation.dead_letter_queue),
                ("failed invocations", invocation.failure_queue),
            )
        ],
    )
