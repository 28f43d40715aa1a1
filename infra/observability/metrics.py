"""The CloudWatch metrics of the saga table and its index, as the alarms and the dashboard read
them: the functions' own (EMF, namespace METRICS_NAMESPACE) and DynamoDB's (AWS/DynamoDB)."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cw

from infra.table import SagaTable
from saga_index.index.names import (
    DIMENSION_INDEX,
    DIMENSION_SERVICE,
    DIMENSION_TABLE,
    DYNAMODB_DIMENSION_INDEX,
    DYNAMODB_DIMENSION_OPERATION,
    DYNAMODB_DIMENSION_TABLE,
    DYNAMODB_NAMESPACE,
    METRICS_NAMESPACE,
    SERVICE_DRIFT_GUARD,
    TABLE_THROTTLED_REQUESTS,
)

# The drift guard runs every 5 minutes; the other graphs and alarms use the same period.
GUARD_PERIOD = cdk.Duration.minutes(5)


class SagaMetrics:
    """Metric factory bound to one table and index (the dimensions every function publishes)."""

    def __init__(self, table: SagaTable) -> None:
        self.table_name = table.table.table_name
        self.index_name = table.index_name

    def service(
        self,
        service: str,
        metric_name: str,
        *,
        period: cdk.Duration = GUARD_PERIOD,
        statistic: str = "Sum",
        extra_dimensions: dict[str, str] | None = None,
        label: str | None = None,
    ) -> cw.Metric:
        """A metric a function publishes under its Powertools service name."""
        return cw.Metric(
            namespace=METRICS_NAMESPACE,
            metric_name=metric_name,
            dimensions_map={
                DIMENSION_SERVICE: service,
                DIMENSION_TABLE: self.table_name,
                DIMENSION_INDEX: self.index_name,
                **(extra_dimensions or {}),
            },
            statistic=statistic,
            period=period,
            label=label,
        )

    def guard(
        self,
        metric_name: str,
        *,
        period: cdk.Duration = GUARD_PERIOD,
        statistic: str = "Maximum",
        extra_dimensions: dict[str, str] | None = None,
    ) -> cw.Metric:
        """A drift-guard metric (a count per run, so Maximum by default)."""
        return self.service(
            SERVICE_DRIFT_GUARD,
            metric_name,
            period=period,
            statistic=statistic,
            extra_dimensions=extra_dimensions,
        )

    def index(self, metric_name: str, *, period: cdk.Duration = GUARD_PERIOD) -> cw.Metric:
        """One of DynamoDB's per-index metrics of the saga GSI (Sum)."""
        return cw.Metric(
            namespace=DYNAMODB_NAMESPACE,
            metric_name=metric_name,
            dimensions_map={
                DYNAMODB_DIMENSION_TABLE: self.table_name,
                DYNAMODB_DIMENSION_INDEX: self.index_name,
            },
            statistic="Sum",
            period=period,
        )

    def table_throttled_requests(self, operation: str) -> cw.Metric:
        """DynamoDB's ThrottledRequests of the table for one operation (Sum)."""
        return cw.Metric(
            namespace=DYNAMODB_NAMESPACE,
            metric_name=TABLE_THROTTLED_REQUESTS,
            dimensions_map={
                DYNAMODB_DIMENSION_TABLE: self.table_name,
                DYNAMODB_DIMENSION_OPERATION: operation,
            },
            statistic="Sum",
            period=GUARD_PERIOD,
            label=f"{TABLE_THROTTLED_REQUESTS} {operation}",
        )
