"""`saga-index preflight`: what the runbook assumes before its step 1, checked, read-only.

Checks, each reported PASS or FAIL with what to do when it fails:

- `table`: the table exists and is ACTIVE (or UPDATING) (DescribeTable);
- `index`: the index renewal-saga-person-index exists, is ACTIVE, is keyed GSI4PK/GSI4SK and
  projects ALL (the same DescribeTable);
- `open-index`: the open-saga index renewal-saga-open-index exists, is ACTIVE with its own
  backfill finished, keyed OpenSagaPK/GSI4SK and projects ALL (the same DescribeTable). The
  layout's runbook does not need it, so missing or still building it is a WARN (exit
  unchanged) whose fix says how to add it and that `saga-index open-index set adding` needs
  it, and a FAIL with `--open-index` (preflight before that move: runbook O0); an index of
  that name built otherwise is a FAIL;
- `point-in-time-recovery`: ON (DescribeContinuousBackups);
- `contributor-insights-table`, `contributor-insights-index`: ENABLED for the table and for the
  index (DescribeContributorInsights, with IndexName for the index). In import mode
  (`importExistingTable=true`) the stack can set neither this nor point-in-time recovery, so
  the operator must: the fix is the AWS CLI command;
- `stack`: the stack exists, its last operation completed, and its `TableName` output names the
  table checked here (DescribeStacks);
- `functions`: every function the code expects (the sweeps, the drift guard, the backfill's
  plan, worker and verify: saga_index.index.names) is a resource of the stack (ListStackResources,
  which says which generated name is which construct) and exists in Lambda
  (GetFunctionConfiguration: a function deleted outside CloudFormation still shows
  CREATE_COMPLETE in the stack), is not Failed, and runs the service it is named for;
- `state-machine`: the stack's state machine exists in Step Functions (DescribeStateMachine)
  and is the one the stack output `BackfillStateMachineArn...` names.

A check that cannot be made never passes silently: its verdict says why, apart from a check
that ran and found something wrong (`fail`): `unsupported` (the server does not implement the
call: dynalite has no point-in-time recovery or Contributor Insights), `unreachable` (no network
path to the service) or `denied` (no credentials, or the caller may not), naming the service,
its endpoint and the permission it needs. Every check runs, whatever the others found. Exit 0
every check passed (a WARN included); 1 a check found something wrong; 4 none did, but some
could not be made.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import click

from saga_index.index import names
from saga_index_cli.context import CliContext, pass_cli
from saga_index_cli.endpoints import service_endpoint_option
from saga_index_cli.failures import EXIT_FOUND, EXIT_OK, EXIT_UNAVAILABLE
from saga_index_cli.output import emit, json_option
from saga_index_cli.preflight.check import FAIL, WARN, PreflightCheck
from saga_index_cli.preflight.stack import (
    StackReport,
    check_functions,
    check_stack,
    check_state_machine,
)
from saga_index_cli.preflight.table import (
    check_contributor_insights,
    check_index,
    check_open_index,
    check_point_in_time_recovery,
    check_table,
    describe_table,
)
from saga_index_cli.stack import (
    DeployedStack,
    StackDescription,
    StackLookupError,
    describe_stack,
    read_stack,
    stack_name_option,
)

EXIT_PASSED, EXIT_FAILED, EXIT_INCOMPLETE = EXIT_OK, EXIT_FOUND, EXIT_UNAVAILABLE


@dataclass(frozen=True)
class Clients:
    dynamodb: Any
    cloudformation: Any
    lambda_: Any
    stepfunctions: Any


@dataclass(frozen=True)
class PreflightReport:
    checks: tuple[PreflightCheck, ...]
    stack: StackReport

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def found(self) -> list[PreflightCheck]:
        """The checks that ran and found something wrong."""
        return [c for c in self.checks if c.verdict == FAIL]

    @property
    def warnings(self) -> list[PreflightCheck]:
        """The checks that found what a later step needs, not step 1 (verdict WARN)."""
        return [c for c in self.checks if c.verdict == WARN]

    @property
    def not_made(self) -> list[PreflightCheck]:
        """The checks that could not be made (unsupported, unreachable, denied)."""
        return [c for c in self.checks if not c.ok and c.verdict != FAIL]

    @property
    def exit_code(self) -> int:
        """1 when a check found something (the more useful answer), else 4 when a check could
        not be made, else 0."""
        if self.found:
            return EXIT_FAILED
        return EXIT_INCOMPLETE if self.not_made else EXIT_PASSED

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "failed": [c.name for c in self.found],
            "warnings": [c.name for c in self.warnings],
            "notChecked": {c.name: c.verdict for c in self.not_made},
            "checks": [c.to_json() for c in self.checks],
            "stack": self.stack.to_json(),
        }


def run_preflight(
    clients: Clients, table: str, stack_name: str, *, open_index: bool = False
) -> PreflightReport:
    """Every check, in the runbook's order; none is skipped because another failed.
    `open_index`: before the open-saga index's move, which needs that index ready."""
    region = clients.dynamodb.meta.region_name
    described = describe_table(clients.dynamodb, table)
    stack = StackReport(name=stack_name)
    description: StackDescription | StackLookupError
    deployed: DeployedStack | StackLookupError
    try:
        description = describe_stack(clients.cloudformation, stack_name)
    except StackLookupError as err:
        description = err
    try:
        deployed = read_stack(clients.cloudformation, stack_name)
    except StackLookupError as err:
        deployed = err
    checks = (
        check_table(described, table),
        check_index(described, table),
        check_open_index(
            described, region, clients.dynamodb.meta.endpoint_url, required=open_index
        ),
        check_point_in_time_recovery(clients.dynamodb, table, region),
        check_contributor_insights(clients.dynamodb, table, region, index=None),
        check_contributor_insights(clients.dynamodb, table, region, index=names.INDEX_NAME),
        check_stack(description, stack, table),
        check_functions(deployed, clients.lambda_, stack),
        check_state_machine(deployed, description, clients.stepfunctions, stack),
    )
    return PreflightReport(checks=checks, stack=stack)


def render(report: PreflightReport) -> str:
    width = max(len(c.verdict) for c in report.checks)
    lines = [f"{c.verdict.upper():<{width}}  {c.name}: {c.detail}" for c in report.checks]
    stack = report.stack
    if any(f.name for f in stack.functions) or stack.state_machine:
        lines += ["", f"stack {stack.name}: which is which"]
        for function in stack.functions:
            lines.append(f"  {function.construct:<34} {function.name or '(missing)'}")
        for other in stack.other_functions:
            lines.append(f"  {other['construct']:<34} {other['name']} (not expected)")
        if stack.state_machine:
            lines.append(f"  {stack.state_machine['construct']:<34} {stack.state_machine['arn']}")
    failed = [c for c in report.checks if not c.ok]
    warned = report.warnings
    if warned:
        lines += ["", "Warnings (step 1 does not need these; a later step does):"]
        lines += [f"  {c.name}: {c.fix}" for c in warned]
    also_warned = f"; {len(warned)} warned: {', '.join(c.name for c in warned)}" if warned else ""
    if failed:
        lines += ["", "To fix:"]
        lines += [f"  {c.name}: {c.fix}" for c in failed]
        not_made = ", ".join(f"{c.name} ({c.verdict})" for c in report.not_made)
        lines += [
            "",
            f"{len(report.found)} of {len(report.checks)} checks failed"
            + (f"; {len(report.not_made)} could not be made: {not_made}" if not_made else "")
            + also_warned,
        ]
    elif warned:
        lines += ["", f"no check failed{also_warned}"]
    else:
        lines += ["", f"all {len(report.checks)} checks passed"]
    return "\n".join(lines)


@click.command("preflight")
@json_option
@stack_name_option("The deployed CloudFormation stack (its name or ARN).")
@service_endpoint_option("cloudformation", "CLOUDFORMATION", "CloudFormation")
@service_endpoint_option("lambda", "LAMBDA", "Lambda")
@service_endpoint_option("stepfunctions", "SFN", "Step Functions")
@click.option(
    "--open-index",
    "open_index",
    is_flag=True,
    help="Before the open-saga index's move (runbook O0): the open-index check FAILs (exit 1) "
    "instead of warning while that index is missing or still being built.",
)
@pass_cli
def preflight_command(
    cli: CliContext,
    as_json: bool,
    stack_name: str,
    cloudformation_endpoint_url: str | None,
    lambda_endpoint_url: str | None,
    stepfunctions_endpoint_url: str | None,
    open_index: bool,
) -> None:
    """Check what the runbook assumes before its step 1 (read-only).

    \b
    table                       the table exists and is ACTIVE (or UPDATING)
    index                       renewal-saga-person-index exists, is ACTIVE, keyed
                                GSI4PK/GSI4SK, projects ALL
    open-index                  renewal-saga-open-index exists, is ACTIVE, not backfilling,
                                keyed OpenSagaPK/GSI4SK, projects ALL (WARN while missing or
                                building: `open-index set adding` needs it, step 1 does not;
                                FAIL with --open-index)
    point-in-time-recovery      ENABLED on the table
    contributor-insights-table  ENABLED on the table
    contributor-insights-index  ENABLED on the index
    stack                       the stack exists, its last operation completed, and its
                                TableName output is --table
    functions                   every expected function (the four sweeps, drift guard,
                                backfill plan/worker/verify) is in the stack and in Lambda;
                                lists which generated name is which construct
    state-machine               the stack's state machine exists, ACTIVE, and is the one
                                its BackfillStateMachineArn... output names

    Needs dynamodb:DescribeTable, dynamodb:DescribeContinuousBackups,
    dynamodb:DescribeContributorInsights, cloudformation:DescribeStacks,
    cloudformation:ListStackResources, lambda:GetFunctionConfiguration and
    states:DescribeStateMachine.

    \b
    Each check's verdict:
      PASS         as the runbook needs it
      WARN         not needed for step 1, needed by a later step: the fix says which
      FAIL         it ran and found something wrong (not configured, not there)
      UNSUPPORTED  the server does not implement the call (dynalite: point-in-time
                   recovery, Contributor Insights)
      UNREACHABLE  no network path to the service (its endpoint is named)
      DENIED       no credentials, or the caller may not (the permission is named)

    \b
    --json: {"ok", "failed": [names], "warnings": [names], "notChecked": {name: verdict},
    "checks": [{"name", "ok", "verdict", "detail", "fix"}], "stack": {"name", "status",
    "outputs", "functions": [{"construct", "service", "name", "logicalId", "resourceStatus",
    "exists", "state", "problem"}], "otherFunctions", "stateMachine": {"construct",
    "logicalId", "arn", "resourceStatus", "exists", "status"}}}

    Exit 0 every check passed (a WARN too); 1 a check FAILED; 4 none failed but some could
    not be made (UNSUPPORTED, UNREACHABLE, DENIED); 2 bad usage.
    """
    table = cli.require_table()
    clients = Clients(
        dynamodb=cli.client,
        cloudformation=cli.aws_client("cloudformation", endpoint_url=cloudformation_endpoint_url),
        lambda_=cli.aws_client("lambda", endpoint_url=lambda_endpoint_url),
        stepfunctions=cli.aws_client("stepfunctions", endpoint_url=stepfunctions_endpoint_url),
    )
    report = run_preflight(clients, table, stack_name, open_index=open_index)
    if as_json:
        emit(report.to_json())
    else:
        click.echo(render(report))
    raise click.exceptions.Exit(report.exit_code)
