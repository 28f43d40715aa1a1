"""saga_index_cli.failures: which errors are "could not complete" (exit 4) and of which kind,
and that a marked client's failed call names its service, endpoint and operation."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.exceptions import (
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
)
from botocore.stub import Stubber

from saga_index.index.errors import InvalidInputError, SagaIndexError
from saga_index_cli.failures import (
    EXIT_FOUND,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    FailureKind,
    exit_code_of,
    mark_client,
    service_failure,
)


def client_error(code: str, operation: str = "Query") -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": f"{code} said no"}}, operation)


@pytest.mark.parametrize(
    ("err", "kind"),
    [
        (client_error("UnknownOperationException"), FailureKind.UNSUPPORTED),
        (client_error("AccessDeniedException"), FailureKind.DENIED),
        (client_error("UnrecognizedClientException"), FailureKind.DENIED),
        (client_error("ServiceUnavailable"), FailureKind.UNREACHABLE),
        (EndpointConnectionError(endpoint_url="http://127.0.0.1:9"), FailureKind.UNREACHABLE),
        (ConnectTimeoutError(endpoint_url="http://10.0.0.1"), FailureKind.UNREACHABLE),
        (NoCredentialsError(), FailureKind.DENIED),
    ],
)
def test_calls_that_could_not_complete_are_classified(err: Exception, kind: FailureKind) -> None:
    failure = service_failure(err)
    assert failure is not None
    assert failure.kind is kind
    assert exit_code_of(err) == EXIT_UNAVAILABLE


@pytest.mark.parametrize(
    "err",
    [
        client_error("ResourceNotFoundException"),
        client_error("ConditionalCheckFailedException"),
        client_error("ValidationException"),
        SagaIndexError("a held lease"),
    ],
)
def test_what_a_service_answered_keeps_its_own_exit_code(err: Exception) -> None:
    assert service_failure(err) is None
    assert exit_code_of(err) == EXIT_FOUND


def test_bad_input_is_exit_2() -> None:
    assert exit_code_of(InvalidInputError("bad")) == EXIT_USAGE


def test_the_failure_behind_a_wrapper_and_a_fan_outs_partitions_is_found() -> None:
    class Enumeration(SagaIndexError):
        def __init__(self, failures: dict[str, BaseException]) -> None:
            super().__init__("a partition could not be read")
            self.failures = failures

    inner = EndpointConnectionError(endpoint_url="http://127.0.0.1:9")
    try:
        try:
            raise Enumeration({"RenewalSaga#3": inner})
        except Enumeration as err:
            raise SagaIndexError("could not list the sagas") from err
    except SagaIndexError as outer:
        failure = service_failure(outer)
    assert failure is not None
    assert failure.call.endpoint == "http://127.0.0.1:9"


def _stubbed(service: str, **kwargs: Any) -> tuple[Any, Stubber]:
    client = mark_client(
        boto3.client(
            service,
            region_name="eu-west-1",
            aws_access_key_id="k",
            aws_secret_access_key="s",
            **kwargs,
        )
    )
    return client, Stubber(client)


def test_a_marked_clients_error_names_its_service_endpoint_and_operation() -> None:
    client, stub = _stubbed("dynamodb", endpoint_url="http://127.0.0.1:8000")
    stub.add_client_error("describe_continuous_backups", "UnknownOperationException", "")
    with stub, pytest.raises(ClientError) as raised:
        client.describe_continuous_backups(TableName="t")
    failure = service_failure(raised.value)
    assert failure is not None
    assert failure.kind is FailureKind.UNSUPPORTED
    assert (failure.call.service, failure.call.endpoint, failure.call.operation) == (
        "DynamoDB",
        "http://127.0.0.1:8000",
        "DescribeContinuousBackups",
    )
    assert failure.message().startswith(
        "could not complete: DynamoDB at http://127.0.0.1:8000 does not support the call "
        "(DescribeContinuousBackups)"
    )
