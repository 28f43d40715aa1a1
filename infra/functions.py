"""The one place that builds Lambda functions: every function of the stack comes from here.

All functions share one code asset (lambdas/, without the operator CLI), the Powertools layer
pinned to the SAME version as requirements.txt, JSON logs, active tracing, a retained log group,
the environment that names the table and its index, and read access to the control record.

Tracing (docs/observability.md, "Tracing"): the code imports no tracer. With context
`otelLayerArn` every function also gets AWS's managed ADOT layer and AWS_LAMBDA_EXEC_WRAPPER=
/opt/otel-instrument: the layer's wrapper traces each invocation and every botocore call and
sends the spans over UDP to the X-Ray daemon that active tracing runs, with the function's role
(xray:PutTraceSegments, which active tracing already grants). Application Signals stays off
(OTEL_AWS_APPLICATION_SIGNALS_ENABLED=false): traces only, no extra permission. Without the key
the functions keep Lambda's own active-tracing segments and synth warns (OTEL_LAYER_WARNING).

Each function has a role of its own that may write logs only to the function's own log group
(logs:CreateLogStream and logs:PutLogEvents on that group's ARN). Not AWSLambdaBasicExecutionRole:
that managed policy grants logs:CreateLogGroup, CreateLogStream and PutLogEvents on every log
group of the account ("*").

No function's environment carries the migration phase or the shard count: every function reads
them from the control record at run time (docs/control-contract.md), so a deploy of the same
code is the same whatever the migration state, and a phase change needs no deploy.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from infra.config import StackConfig
from infra.table import SagaTable
from saga_index.index.names import (
    ENV_INDEX,
    ENV_POWERTOOLS_LOG_LEVEL,
    ENV_POWERTOOLS_NAMESPACE,
    ENV_POWERTOOLS_SERVICE,
    ENV_TABLE,
    METRICS_NAMESPACE,
)

LAMBDAS_DIR = Path(__file__).resolve().parent.parent / "lambdas"
POWERTOOLS_VERSION = "3.37.0"  # keep equal to requirements.txt
RUNTIME = lambda_.Runtime.PYTHON_3_13
ARCHITECTURE = lambda_.Architecture.ARM_64
# What the asset must never carry: the operator CLI, caches, build debris.
ASSET_EXCLUDES = [
    "saga_index_cli",
    "**/__pycache__",
    "**/*.pyc",
    "*.egg-info",
    ".mypy_cache",
    ".pytest_cache",
]
# What the runtime needs to write a function's logs to the group it is configured with.
LOG_WRITE_ACTIONS = ("logs:CreateLogStream", "logs:PutLogEvents")
# The synth warning when no ADOT layer is configured (acknowledgeable by this id).
OTEL_LAYER_WARNING = "renewal-saga-index:otel-layer-missing"
# What the managed ADOT layer needs from a function (aws-otel-python-instrumentation,
# lambda-layer/src/otel-instrument). Application Signals, on by default, would add span-derived
# metrics that need logs:PutLogEvents on /aws/application-signals/data (AWS's
# CloudWatchLambdaApplicationSignalsExecutionRolePolicy): off, traces only. The wrapper names
# the distro and configurator only when Application Signals is on; otherwise
# opentelemetry-instrument takes whichever entry point it meets first, which may be upstream's
# (OTLP to localhost, where nothing listens in Lambda).
# Named here, AWS's configurator sends the spans over UDP to the X-Ray daemon
# (AWS_XRAY_DAEMON_ADDRESS).
OTEL_WRAPPER = "/opt/otel-instrument"
OTEL_ENVIRONMENT = {
    "AWS_LAMBDA_EXEC_WRAPPER": OTEL_WRAPPER,
    "OTEL_AWS_APPLICATION_SIGNALS_ENABLED": "false",
    "OTEL_PYTHON_DISTRO": "aws_distro",
    "OTEL_PYTHON_CONFIGURATOR": "aws_configurator",
}
# The span's service name (the wrapper's default is the generated function name).
ENV_OTEL_SERVICE = "OTEL_SERVICE_NAME"


def powertools_layer_parameter(architecture: lambda_.Architecture = ARCHITECTURE) -> str:
    """AWS publishes one public SSM parameter per Powertools release whose value is its layer ARN;
    resolving it at deploy time pins the layer to the version the code was tested with."""
    # jsii Architecture objects never compare equal with ==, even for the same value: use names.
    arch = "arm64" if architecture.name == lambda_.Architecture.ARM_64.name else "x86_64"
    return f"/aws/service/powertools/python/{arch}/python3.13/{POWERTOOLS_VERSION}"


class SagaFunctions(Construct):
    """Factory for the stack's functions. `function(...)` adds one; `.table` is the saga table
    every function is configured for. Every function may read the control record (each handler
    follows it); the constructs grant the rest of their access themselves."""

    def __init__(
        self, scope: Construct, construct_id: str, *, config: StackConfig, table: SagaTable
    ) -> None:
        super().__init__(scope, construct_id)
        self.config = config
        self.table = table
        self.code = lambda_.Code.from_asset(str(LAMBDAS_DIR), exclude=ASSET_EXCLUDES)
        layer_arn = config.powertools_layer_arn or ssm.StringParameter.value_for_string_parameter(
            self, powertools_layer_parameter()
        )
        self.powertools = lambda_.LayerVersion.from_layer_version_arn(
            self, "PowertoolsLayer", layer_arn
        )
        self.otel: lambda_.ILayerVersion | None = None
        if config.otel_layer_arn is not None:
            self.otel = lambda_.LayerVersion.from_layer_version_arn(
                self, "OtelLayer", config.otel_layer_arn
            )
        else:
            # A warning, not an error: a dev stack may do without; production never silently.
            cdk.Annotations.of(self).add_warning_v2(
                OTEL_LAYER_WARNING,
                "No OpenTelemetry layer: the functions keep only Lambda's own active-tracing "
                "segments (no span per DynamoDB call). Set context otelLayerArn to the ARN of "
                "AWS's managed ADOT layer (AWSOpenTelemetryDistroPython) for this region "
                "(docs/deploy.md, docs/observability.md).",
            )

    @property
    def layers(self) -> list[lambda_.ILayerVersion]:
        """The ADOT layer first, Powertools last: Lambda extracts layers in order and a later
        one wins a file both carry (typing_extensions, wrapt), so the code keeps exactly the
        Powertools layer's packages, the ones it is tested with."""
        return [self.powertools] if self.otel is None else [self.otel, self.powertools]

    def tracing_environment(self, service: str) -> dict[str, str]:
        """The ADOT wrapper's variables when the layer is configured; nothing otherwise."""
        if self.otel is None:
            return {}
        return {**OTEL_ENVIRONMENT, ENV_OTEL_SERVICE: service}

    def base_environment(self, service: str) -> dict[str, str]:
        return {
            ENV_TABLE: self.table.table.table_name,
            ENV_INDEX: self.table.index_name,
            ENV_POWERTOOLS_SERVICE: service,
            ENV_POWERTOOLS_NAMESPACE: METRICS_NAMESPACE,
            ENV_POWERTOOLS_LOG_LEVEL: "INFO",
        }

    def function(
        self,
        construct_id: str,
        *,
        handler: str,
        description: str,
        service: str,
        timeout: cdk.Duration | None = None,
        memory_size: int = 256,
        environment: Mapping[str, str] | None = None,
        reserved_concurrent_executions: int | None = None,
    ) -> lambda_.Function:
        log_group = logs.LogGroup(
            self,
            f"{construct_id}Logs",
            retention=logs.RetentionDays.THREE_MONTHS,
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )
        role = iam.Role(
            self,
            f"{construct_id}Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"Lambda {construct_id}: its own log group, and the grants its "
            "construct adds",
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=list(LOG_WRITE_ACTIONS), resources=[log_group.log_group_arn]
            )
        )
        fn = lambda_.Function(
            self,
            construct_id,
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler=handler,
            code=self.code,
            description=description,
            timeout=timeout or cdk.Duration.minutes(1),
            memory_size=memory_size,
            layers=self.layers,
            environment={
                **self.base_environment(service),
                **self.tracing_environment(service),
                **(environment or {}),
            },
            tracing=lambda_.Tracing.ACTIVE,
            logging_format=lambda_.LoggingFormat.JSON,
            application_log_level_v2=lambda_.ApplicationLogLevel.INFO,
            system_log_level_v2=lambda_.SystemLogLevel.WARN,
            log_group=log_group,
            role=role,
            reserved_concurrent_executions=reserved_concurrent_executions,
        )
        self.table.grant_control_read(fn)
        self._acknowledge_findings(fn)
        return fn

    @staticmethod
    def _acknowledge_findings(fn: lambda_.Function) -> None:
        """What every function of the factory shares, acknowledged on the function and its role
        only. cdk-nag 3 honours only the bracketed finding ids here (measured)."""
        cdk.Validations.of(fn).acknowledge(
            cdk.Acknowledgment(
                id="AwsSolutions-L1",
                reason="Python 3.13 is the newest runtime the pinned Powertools layer "
                f"({POWERTOOLS_VERSION}) is published for.",
            )
        )
        if fn.role is None:
            return
        cdk.Validations.of(fn.role).acknowledge(
            cdk.Acknowledgment(
                id="AwsSolutions-IAM5[Resource::*]",
                reason="Active tracing: xray:PutTraceSegments and xray:PutTelemetryRecords "
                "support no resource-level permissions, so CDK grants them on '*'.",
            ),
        )
