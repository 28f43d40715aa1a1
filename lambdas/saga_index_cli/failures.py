"""The one home of the exit codes (docs/cli.md, "Exit codes"), and of "could not complete"
(exit 4): an AWS service that could not be reached, refused the call, or does not support it,
told apart from everything a command finds (exit 1) and from "not yet" (exit 5: RetryLaterError,
or a write DynamoDB throttled or met a transaction conflict on past the retries).

Every client the CLI builds is marked (`mark_client`): a failed call carries which service, at
which endpoint, failed in which operation, so the message can name all three whatever code met
the failure (a command, the repository's fan-out, a scan). `service_failure` walks an error's
causes (and a fan-out's partition failures) for such a call and says which of the three kinds
it is; None when the error is anything else (a missing table, a lost compare-and-set, a
validation error), which keeps its own exit code.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Any

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    HTTPClientError,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
)
from botocore.exceptions import ConnectionError as BotocoreConnectionError

from saga_index_cli.exit_codes import ExitCode
from saga_index_cli.waiting import watch_client

# The names the CLI's modules use; the codes and their meanings are ExitCode's (exit_codes.py).
EXIT_OK, EXIT_FOUND, EXIT_USAGE = ExitCode.OK, ExitCode.FOUND, ExitCode.USAGE
EXIT_REFUSED, EXIT_UNAVAILABLE = ExitCode.REFUSED, ExitCode.UNAVAILABLE
# 5: not yet, the same command may succeed later unchanged (`retryAt` names when, if known).
# 6: interrupted, partly done: a run wrote rows, then failed or was stopped (its report says
# what it did); never "nothing written".
EXIT_RETRY_LATER, EXIT_PARTIAL = ExitCode.RETRY_LATER, ExitCode.PARTIAL

# Where a marked client's failed call leaves its service, endpoint and operation: the parsed
# error response (which becomes ClientError.response), or an attribute of a transport error.
CALL_KEY = "SagaIndexCall"
_CALL_ATTRIBUTE = "saga_index_call"

# botocore's service ids, as an operator reads them.
_SERVICE_NAMES = {
    "dynamodb": "DynamoDB",
    "cloudwatch": "CloudWatch",
    "sfn": "Step Functions",
    "cloudformation": "CloudFormation",
    "lambda": "Lambda",
    "sts": "STS",
}

# Error codes of a call the service (or a server standing in for it) does not implement.
UNSUPPORTED_CODES = frozenset(
    {
        "UnknownOperationException",
        "UnknownOperation",
        "UnsupportedOperation",
        "UnsupportedOperationException",
        "NotImplemented",
        "InvalidAction",
    }
)
# Error codes of a call the service refused: who is calling, or what they may do.
DENIED_CODES = frozenset(
    {
        "AccessDenied",
        "AccessDeniedException",
        "UnauthorizedOperation",
        "UnauthorizedException",
        "UnrecognizedClientException",
        "InvalidClientTokenId",
        "InvalidSignatureException",
        "SignatureDoesNotMatch",
        "IncompleteSignature",
        "MissingAuthenticationToken",
        "ExpiredToken",
        "ExpiredTokenException",
        "AuthFailure",
    }
)
# Error codes of a single-item write (the control record's, a repair) that lost to other
# traffic past botocore's retries: the same write may succeed a moment later (exit 5).
_TRANSIENT_WRITE_CODES = frozenset(
    {
        "TransactionConflictException",
        "ThrottlingException",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
    }
)
_WRITE_OPERATIONS = frozenset({"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems"})

# Error codes of a service that kept failing or throttling past botocore's retries.
_UNAVAILABLE_CODES = frozenset(
    {
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "InternalServerError",
        "InternalFailure",
        "InternalServerException",
        "ThrottlingException",
        "Throttling",
        "RequestLimitExceeded",
        "ProvisionedThroughputExceededException",
    }
)


class FailureKind(Enum):
    UNREACHABLE = "unreachable"
    DENIED = "denied"
    UNSUPPORTED = "unsupported"

    def words(self) -> str:
        return {
            FailureKind.UNREACHABLE: "could not be reached",
            FailureKind.DENIED: "refused the call",
            FailureKind.UNSUPPORTED: "does not support the call",
        }[self]


@dataclass(frozen=True)
class ServiceCall:
    service: str
    endpoint: str | None
    operation: str | None


@dataclass(frozen=True)
class ServiceFailure:
    """A call that could not complete: which kind, which call, and botocore's own words."""

    kind: FailureKind
    call: ServiceCall
    detail: str

    def message(self) -> str:
        where = f" at {self.call.endpoint}" if self.call.endpoint else ""
        operation = f" ({self.call.operation})" if self.call.operation else ""
        return (
            f"could not complete: {self.call.service}{where} {self.kind.words()}{operation}: "
            f"{self.detail}. {self.advice()}"
        )

    def advice(self) -> str:
        if self.kind is FailureKind.UNSUPPORTED:
            return (
                f"This server does not implement {self.call.operation or 'it'} (a local "
                "DynamoDB-compatible server lacks some operations): run it against AWS"
            )
        if self.kind is FailureKind.DENIED:
            return "Check the credentials (AWS_PROFILE) and the caller's permissions (docs/cli.md)"
        return (
            f"Check the network path to {self.call.service}, --region and its endpoint "
            "(docs/cli.md, Endpoints), then run the command again"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "service": self.call.service,
            "endpoint": self.call.endpoint,
            "operation": self.call.operation,
            "detail": self.detail,
        }


def service_name(client: Any) -> str:
    service_id = str(client.meta.service_model.service_id).lower().replace(" ", "")
    return _SERVICE_NAMES.get(service_id, str(client.meta.service_model.service_id))


def mark_client(client: Any) -> Any:
    """Register the hooks that make `client`'s failed calls name their service, endpoint and
    operation, and its slow calls show on a terminal what they wait for (waiting.py); returns
    `client`."""
    service = service_name(client)
    endpoint = client.meta.endpoint_url

    def after_call(http_response: Any, parsed: Any, model: Any, **_: Any) -> None:
        if getattr(http_response, "status_code", 200) >= 300 and isinstance(parsed, dict):
            parsed[CALL_KEY] = {"service": service, "endpoint": endpoint, "operation": model.name}

    def after_call_error(exception: BaseException, event_name: str = "", **_: Any) -> None:
        operation = event_name.rsplit(".", 1)[-1] or None
        setattr(exception, _CALL_ATTRIBUTE, ServiceCall(service, endpoint, operation))

    client.meta.events.register("after-call.*", after_call)
    client.meta.events.register("after-call-error.*", after_call_error)
    watch_client(client, service, endpoint)
    return client


def _errors(err: BaseException) -> Iterator[BaseException]:
    """`err`, its causes and contexts, and a fan-out's partition failures, each once."""
    seen: set[int] = set()
    pending: list[BaseException] = [err]
    while pending:
        current = pending.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        failures = getattr(current, "failures", None)
        if isinstance(failures, dict):
            pending.extend(f for f in failures.values() if isinstance(f, BaseException))
        pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)


def _kind(err: BaseException) -> FailureKind | None:
    if isinstance(err, ClientError):
        code = str(err.response.get("Error", {}).get("Code", ""))
        if code in UNSUPPORTED_CODES:
            return FailureKind.UNSUPPORTED
        if code in DENIED_CODES:
            return FailureKind.DENIED
        if code in _UNAVAILABLE_CODES:
            return FailureKind.UNREACHABLE
        return None
    if isinstance(err, NoCredentialsError | PartialCredentialsError):
        return FailureKind.DENIED
    # Connection refused, DNS, TLS, timeouts, a connection dropped mid-response; no region.
    if isinstance(err, BotocoreConnectionError | HTTPClientError | NoRegionError):
        return FailureKind.UNREACHABLE
    return None


def _call(err: BaseException) -> ServiceCall:
    if isinstance(err, ClientError):
        marked = err.response.get(CALL_KEY)
        if isinstance(marked, dict):
            return ServiceCall(marked["service"], marked["endpoint"], marked["operation"])
        return ServiceCall("AWS", None, err.operation_name)
    marked_call = getattr(err, _CALL_ATTRIBUTE, None)
    if isinstance(marked_call, ServiceCall):
        return marked_call
    endpoint = getattr(err, "kwargs", {}).get("endpoint_url")
    return ServiceCall("AWS", endpoint, None)


def _detail(err: BaseException) -> str:
    if isinstance(err, ClientError):
        error = err.response.get("Error", {})
        message = error.get("Message") or ""
        code = error.get("Code") or type(err).__name__
        return f"{code}: {message}" if message else str(code)
    return f"{type(err).__name__}: {err}"


def classify(err: BaseException) -> ServiceFailure | None:
    """`err` itself as a ServiceFailure (no walk through its causes), or None."""
    if not isinstance(err, ClientError | BotoCoreError):
        return None
    kind = _kind(err)
    if kind is None:
        return None
    return ServiceFailure(kind, _call(err), _detail(err))


def service_failure(err: BaseException) -> ServiceFailure | None:
    """The first call behind `err` that could not complete, or None."""
    for current in _errors(err):
        failure = classify(current)
        if failure is not None:
            return failure
    return None


def transient_write(err: BaseException) -> ClientError | None:
    """The write behind `err` that DynamoDB throttled or that met a transaction conflict past
    botocore's retries, or None."""
    for current in _errors(err):
        if isinstance(current, ClientError):
            code = str(current.response.get("Error", {}).get("Code", ""))
            if code in _TRANSIENT_WRITE_CODES and current.operation_name in _WRITE_OPERATIONS:
                return current
    return None


def retry_later(err: BaseException) -> Any:
    """The RetryLaterError behind `err` (itself or a cause), or None."""
    from saga_index.index import RetryLaterError

    for current in _errors(err):
        if isinstance(current, RetryLaterError):
            return current
    return None


def retry_at_of(err: BaseException) -> str | None:
    """When the command `err` ended may succeed, in the record's time format; None when no
    time is known (or `err` is not a "not yet")."""
    from saga_index.layout_change.record import format_time

    later = retry_later(err)
    if later is None or later.retry_at is None:
        return None
    return format_time(later.retry_at)


def exit_code_of(err: BaseException) -> ExitCode:
    """The exit code `main` gives an error a command raised (a report written before the error
    reaches main names the same code)."""
    from saga_index.index import InvalidInputError, RetryLaterError
    from saga_index.layout_change.transitions import PreconditionFailedError

    if isinstance(err, RetryLaterError):
        return EXIT_RETRY_LATER
    if isinstance(err, InvalidInputError):
        return EXIT_USAGE
    if isinstance(err, PreconditionFailedError):
        return EXIT_REFUSED
    if retry_later(err) is not None or transient_write(err) is not None:
        return EXIT_RETRY_LATER
    return EXIT_UNAVAILABLE if service_failure(err) is not None else EXIT_FOUND
