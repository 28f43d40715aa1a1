"""The dashboard on-call opens first: the alarms' states, drift, shards, throttles, the backfill's
progress and the sweeps."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cw
from constructs import Construct

from infra.config import StackConfig
from infra.drift import DriftGuard
from infra.observability.alarms import Alarms
from infra.observability.metrics import SagaMetrics
from saga_index.names import (
    CONTEXT_OPERATIONS,
    DIMENSION_SHARD,
    FINDING_PREPARE_RETRIES_EXHAUSTED,
    FINDING_PREPARE_RETRY_REQUESTED,
    FINDING_STUCK,
    FINDING_WORKFLOW_UNHEALTHY,
    INDEX_THROTTLE_METRICS,
    JOB_RETRY_FAILED_PREPARE,
    JOB_STUCK_SAGA_SWEEP,
    JOB_WORKFLOW_HEALTH_SWEEP,
    METRIC_ANOMALIES,
    METRIC_ANOMALOUS_ROWS,
    METRIC_LEGACY_ROWS,
    METRIC_MISROUTED_ROWS,
    METRIC_RESTAMPED,
    METRIC_ROWS_PER_SHARD,
    METRIC_SAGAS_READ,
    METRIC_SHARD_SKEW,
    METRIC_SHARDED_ROWS,
    METRIC_SKIPPED,
    METRIC_STRAY_ROWS,
    METRIC_SWEEP_DURATION,
    METRIC_UNINDEXED_ROWS,
    SERVICE_BACKFILL_WORKER,
    SERVICE_DRIFT_GUARD,
    SWEEP_JOBS,
)

SHARDS_PER_WIDGET = 64  # CloudWatch draws at most a few hundred series per graph
# The backfill worker's counts graphed as its progress.
BACKFILL_METRICS = (METRIC_RESTAMPED, METRIC_SKIPPED, METRIC_ANOMALIES)
# (sweep, finding): each sweep counts its findings under its own service name.
SWEEP_FINDINGS: tuple[tuple[str, str], ...] = (
    (JOB_WORKFLOW_HEALTH_SWEEP, FINDING_WORKFLOW_UNHEALTHY),
    (JOB_RETRY_FAILED_PREPARE, FINDING_PREPARE_RETRY_REQUESTED),
    (JOB_RETRY_FAILED_PREPARE, FINDING_PREPARE_RETRIES_EXHAUSTED),
    (JOB_STUCK_SAGA_SWEEP, FINDING_STUCK),
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
        shards = config.shard_count
        dashboard.add_widgets(
            cw.TextWidget(
                markdown=(
                    f"# Renewal-saga index ({config.table_name})\n"
                    f"Phase **{config.phase}**, N = **{shards}** shards. "
                    "On-call guide: `docs/observability.md`. Drift metrics come from the "
                    f"`{SERVICE_DRIFT_GUARD}` function every 5 minutes; the base-table scan "
                    f"every {drift_guard.scan_every} runs."
                ),
                width=24,
                height=2,
            ),
            cw.AlarmStatusWidget(
                title="Alarms (paging and informational)",
                alarms=list(alarms.alarms.values()),
                width=24,
                height=3,
            ),
        )
        dashboard.add_widgets(
            _graph(
                "Legacy rows (GSI4PK = legacy key) and sharded rows",
                [metrics.guard(METRIC_LEGACY_ROWS), metrics.guard(METRIC_SHARDED_ROWS)],
            ),
            _graph(
                "Misrouted, unindexed and stray rows",
                [
                    metrics.guard(METRIC_MISROUTED_ROWS),
                    metrics.guard(METRIC_UNINDEXED_ROWS, period=cdk.Duration.hours(1)),
                    metrics.guard(METRIC_STRAY_ROWS, period=cdk.Duration.hours(1)),
                    metrics.guard(METRIC_ANOMALOUS_ROWS),
                ],
            ),
        )
        shard_widgets: list[cw.IWidget] = []
        for first in range(0, shards, SHARDS_PER_WIDGET):
            last = min(shards, first + SHARDS_PER_WIDGET) - 1
            shard_widgets.append(
                _graph(
                    f"Rows per shard ({first}..{last})",
                    [
                        metrics.guard(
                            METRIC_ROWS_PER_SHARD, extra_dimensions={DIMENSION_SHARD: str(n)}
                        ).with_(label=f"shard {n}")
                        for n in range(first, last + 1)
                    ],
                    stacked=True,
                )
            )
        shard_widgets.append(_graph("Shard skew (max / mean)", [metrics.guard(METRIC_SHARD_SKEW)]))
        dashboard.add_widgets(*shard_widgets)
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
        self.dashboard = dashboard
        cdk.CfnOutput(
            scope,
            "DashboardName",
            value=dashboard.dashboard_name,
            description="CloudWatch dashboard of the renewal-saga index",
        )

    def _per_sweep(self, metric_name: str, *, statistic: str) -> list[cw.IMetric]:
        return [
            self._metrics.service(service, metric_name, statistic=statistic, label=service)
            for service in SWEEP_JOBS
        ]


def _graph(
    title: str, metrics: Sequence[cw.IMetric] | Iterable[cw.IMetric], *, stacked: bool = False
) -> cw.GraphWidget:
    return cw.GraphWidget(title=title, left=list(metrics), width=12, height=6, stacked=stacked)
