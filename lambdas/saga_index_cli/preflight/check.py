"""What a preflight check reports, and how a call that fails becomes a check that FAILED.

A check that cannot be made is never a pass. Its verdict says why, apart from a check that ran
and found something wrong (`fail`: not configured, not there): `unsupported` (the server does
not implement the call, e.g. point-in-time recovery and Contributor Insights on a local
dynalite), `unreachable` (no network path, no region, a service failing past its retries) or
`denied` (no credentials, or the caller may not), each naming the service, its endpoint, and the
permission the check needs (`checked_call`, `unavailable_check`; the kinds are
saga_index_cli.failures', the one home of exit 4).
The checks themselves: table.py (DynamoDB), stack.py (the deployed stack);
the command that runs them all: command.py.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from saga_index_cli.failures import FailureKind, service_failure

# A check's verdict: it passed, it ran and found something wrong, or it could not be made
# (one of failures.FailureKind's values). WARN: it ran and found something the runbook's step 1
# does not need but a later step does (the open-saga index before its own move): not a
# failure, so it changes no exit code, and its fix says which step needs it.
PASS, FAIL, WARN = "pass", "fail", "warn"

# IAM actions each check needs.
PERMISSION_DESCRIBE_TABLE = "dynamodb:DescribeTable"
PERMISSION_CONTINUOUS_BACKUPS = "dynamodb:DescribeContinuousBackups"
PERMISSION_CONTRIBUTOR_INSIGHTS = "dynamodb:DescribeContributorInsights"
PERMISSION_DESCRIBE_STACKS = "cloudformation:DescribeStacks"
PERMISSION_LIST_STACK_RESOURCES = "cloudformation:ListStackResources"
PERMISSION_GET_FUNCTION = "lambda:GetFunctionConfiguration"
PERMISSION_DESCRIBE_STATE_MACHINE = "states:DescribeStateMachine"
PERMISSIONS: tuple[str, ...] = (
    PERMISSION_DESCRIBE_TABLE,
    PERMISSION_CONTINUOUS_BACKUPS,
    PERMISSION_CONTRIBUTOR_INSIGHTS,
    PERMISSION_DESCRIBE_STACKS,
    PERMISSION_LIST_STACK_RESOURCES,
    PERMISSION_GET_FUNCTION,
    PERMISSION_DESCRIBE_STATE_MACHINE,
)


@dataclass(frozen=True)
class PreflightCheck:
    """One check's verdict: `fix` says what to do when it failed or warned (None when it
    passed). `ok` is whether the runbook's step 1 can go ahead: a warning is ok."""

    name: str
    ok: bool
    detail: str
    fix: str | None = None
    # Set when the check could not be made (a failures.FailureKind value); else pass/fail.
    unavailable: str | None = None
    # Set on an ok check that found what a later step of the runbook needs (verdict WARN).
    warning: bool = False

    @property
    def verdict(self) -> str:
        if self.ok:
            return WARN if self.warning else PASS
        return self.unavailable or FAIL

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "ok": self.ok,
            "verdict": self.verdict,
            "detail": self.detail,
            "fix": self.fix,
        }


class Unavailable(Exception):
    """A check could not be made: the call failed (denied, no credentials, no network)."""

    def __init__(self, err: BaseException, permission: str, resource: str) -> None:
        super().__init__(str(err))
        self.err = err
        self.permission = permission
        self.resource = resource


def error_code(err: BaseException) -> str | None:
    current: BaseException | None = err
    while current is not None:
        if isinstance(current, ClientError):
            return str(current.response.get("Error", {}).get("Code", "")) or None
        current = current.__cause__
    return None


def error_text(err: BaseException) -> str:
    current: BaseException | None = err
    while current is not None:
        if isinstance(current, ClientError):
            error = current.response.get("Error", {})
            code = error.get("Code") or type(current).__name__
            return f"{code} on {current.operation_name}: {error.get('Message') or current}"
        if isinstance(current, BotoCoreError):
            return f"{type(current).__name__}: {current}"
        current = current.__cause__
    return f"{type(err).__name__}: {err}"


def unavailable_check(name: str, failure: Unavailable) -> PreflightCheck:
    """The failure of a check that could not be made: why (its verdict), naming the service,
    its endpoint and the permission the check needs."""
    if is_not_found(failure.err):
        return PreflightCheck(
            name,
            False,
            f"could not check: {error_text(failure.err)}",
            f"{failure.resource} does not exist: check --table, --region and --endpoint-url",
        )
    kind = service_failure(failure.err)
    if kind is None:
        return PreflightCheck(
            name,
            False,
            f"could not check: {error_text(failure.err)}",
            f"this check needs {failure.permission} on {failure.resource}; the call failed as "
            "shown: check --table, --region and the service's endpoint option",
        )
    call = kind.call
    where = f"{call.service}" + (f" at {call.endpoint}" if call.endpoint else "")
    if kind.kind is FailureKind.UNSUPPORTED:
        detail = f"not supported by this server: {where} does not implement {call.operation}"
        fix = (
            f"nothing to fix here: this server (a local DynamoDB-compatible one?) lacks "
            f"{call.operation}; check it against AWS, where it needs {failure.permission} on "
            f"{failure.resource}"
        )
    elif kind.kind is FailureKind.DENIED:
        detail = f"denied: {where} refused {call.operation or 'the call'} ({kind.detail})"
        fix = (
            f"the caller may not call {failure.permission} on {failure.resource}, or has no "
            "valid credentials (AWS_PROFILE): grant it (preflight needs only read permissions), "
            "then run preflight again"
        )
    else:
        detail = f"could not reach {where} ({call.operation or 'the call'}: {kind.detail})"
        fix = (
            f"check the network path to {call.service} and --region (its endpoint option, "
            f"docs/cli.md), then run preflight again; this check needs {failure.permission} "
            f"on {failure.resource}"
        )
    return PreflightCheck(name, False, detail, fix, unavailable=kind.kind.value)


def checked_call(permission: str, resource: str, call: Callable[[], Any]) -> Any:
    try:
        return call()
    except (ClientError, BotoCoreError) as err:
        raise Unavailable(err, permission, resource) from err


def is_not_found(err: BaseException) -> bool:
    return error_code(err) in {"ResourceNotFoundException", "TableNotFoundException"}


def aws_command(region: str | None, *words: str) -> str:
    region_words = ("--region", region) if region else ()
    return shlex.join(("aws", *words[:2], *region_words, *words[2:]))
