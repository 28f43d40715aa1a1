"""What a preflight check reports, and how a call that fails becomes a check that FAILED.

A check that cannot be made (access denied, no credentials, no network) is never a pass: it
fails, saying which permission on which resource it needed (`checked_call`, `unavailable_check`).
The checks themselves: table.py (DynamoDB), stack.py (the deployed stack);
the command that runs them all: command.py.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

# Error codes that mean "the caller may not", as opposed to "it is not there".
_DENIED_CODES = frozenset(
    {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "UnauthorizedException"}
)

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
class Check:
    """One check's verdict: `fix` says what to do when it failed (None when it passed)."""

    name: str
    ok: bool
    detail: str
    fix: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "detail": self.detail, "fix": self.fix}


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


def unavailable_check(name: str, failure: Unavailable) -> Check:
    """The failure of a check that could not be made, naming the permission it needs."""
    code = error_code(failure.err)
    if is_not_found(failure.err):
        fix = f"{failure.resource} does not exist: check --table, --region and --endpoint-url"
    elif code in _DENIED_CODES:
        fix = (
            f"the caller may not call {failure.permission} on {failure.resource}: grant it "
            "(preflight needs only read permissions), then run preflight again"
        )
    else:
        fix = (
            f"check the credentials (AWS_PROFILE), --region and the network path to the "
            f"service (its endpoint option); this check needs {failure.permission} on "
            f"{failure.resource}"
        )
    return Check(name, False, f"could not check: {error_text(failure.err)}", fix)


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
