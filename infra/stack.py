"""The RenewalSagaIndex stack: composes the capability constructs, and the app that holds it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks
from constructs import Construct

from infra.backfill import SagaBackfill
from infra.config import PAGER_JSON_PATH, StackConfig, load_cdk_json_context, load_pager_config
from infra.drift import DriftGuard
from infra.functions import SagaFunctions
from infra.observability.alarms import Alarms
from infra.observability.dashboard import Dashboard
from infra.observability.metrics import SagaMetrics
from infra.observability.notifications import BackfillNotifications
from infra.observability.pager import Pager
from infra.observability.queries import SavedQueries
from infra.sweeps import SagaSweeps
from infra.table import SagaTable
from saga_index.index.names import FUNCTIONS_CONSTRUCT, OUTPUT_TABLE_NAME

STACK_NAME = "RenewalSagaIndex"


class RenewalSagaIndexStack(cdk.Stack):
    def __init__(self, scope: Construct, construct_id: str, *, config: StackConfig) -> None:
        # No env: the stack must synthesise offline with no account or region lookups.
        super().__init__(
            scope,
            construct_id,
            stack_name=STACK_NAME,
            description="Renewal-saga table and its sharded GSI4 (ADR-0085)",
        )
        self.config = config
        self.saga_table = SagaTable(
            self,
            "SagaTable",
            table_name=config.table_name,
            import_existing=config.import_existing_table,
        )
        self.functions = SagaFunctions(
            self, FUNCTIONS_CONSTRUCT, config=config, table=self.saga_table
        )
        cdk.CfnOutput(
            self,
            OUTPUT_TABLE_NAME,
            value=self.saga_table.table.table_name,
            description="Name of the DynamoDB table that holds the renewal-saga rows",
        )
        self.sweeps = SagaSweeps(
            self, "Sweeps", functions=self.functions, event_bus_name=config.event_bus_name
        )
        self.drift_guard = DriftGuard(self, "DriftGuard", functions=self.functions)
        self.backfill = SagaBackfill(self, "Backfill", functions=self.functions)
        # One scope for the pager, the alarms, the saved queries and the dashboard: its id
        # prefixes their logical IDs and output keys (infra/observability/__init__.py says why
        # they must not change).
        observability = Construct(self, "Observability")
        metrics = SagaMetrics(self.saga_table)
        self.pager = Pager(observability, config=config)
        self.alarms = Alarms(
            observability,
            config=config,
            metrics=metrics,
            pager=self.pager,
            drift_guard=self.drift_guard,
            sweeps=self.sweeps,
            backfill=self.backfill,
        )
        self.notifications = BackfillNotifications(
            observability, pager=self.pager, state_machine=self.backfill.state_machine
        )
        self.queries = SavedQueries(
            observability,
            drift_guard=self.drift_guard,
            sweeps=self.sweeps,
            backfill=self.backfill,
        )
        self.dashboard = Dashboard(
            observability,
            config=config,
            metrics=metrics,
            alarms=self.alarms,
            drift_guard=self.drift_guard,
            queries=self.queries,
            schedules={
                **self.sweeps.schedules,
                self.drift_guard.job.name: self.drift_guard.schedule,
            },
        )
        self._keep_deployable()

    def _keep_deployable(self) -> None:
        # CloudFormation rejects a template whose Resources section is empty, which is what
        # import mode leaves while the stack owns nothing else. A wait-condition handle is a
        # free no-op resource; it stops being added once any real resource joins the stack.
        if not any(isinstance(child, cdk.CfnResource) for child in self.node.find_all()):
            cdk.CfnWaitConditionHandle(self, "ImportModePlaceholder")


def build_app(
    context_overrides: Mapping[str, Any] | None = None,
    outdir: str | Path | None = None,
    pager_config: str | Path = PAGER_JSON_PATH,
) -> tuple[cdk.App, RenewalSagaIndexStack]:
    """The app exactly as `cdk synth` builds it: cdk.json context, overrides on top, the pager's
    subscriptions from pager.json, cdk-nag on.

    Under the CLI (or `python app.py` with CDK_CONTEXT_JSON set), `-c` values arrive through the
    environment and cdk.App merges them over the context passed here, so they still win.
    `pager_config` is for tests; deploys always read the committed pager.json.
    """
    context = {**load_cdk_json_context(), **(context_overrides or {})}
    app = cdk.App(context=context, outdir=None if outdir is None else str(outdir))
    # cdk-nag 3 runs as a policy-validation plugin: Aspects.of(app).add(...) crashes on 3.0.2.
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    config = StackConfig.from_node(app.node, load_pager_config(Path(pager_config)))
    stack = RenewalSagaIndexStack(app, STACK_NAME, config=config)
    return app, stack
