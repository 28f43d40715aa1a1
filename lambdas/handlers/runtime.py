"""What every Lambda entry point shares: Powertools (one decorator order, the logger set up once),
the boto3 clients and the control-record provider of the execution environment, the Scheduler
payload and the index dimensions.

A function runs with its asset, the Powertools layer and the runtime's boto3 only: nothing here
may need a package the layer does not carry (pydantic-settings, for one).

No tracer is imported here: tracing is the deployment's (docs/observability.md, "Tracing"). With
the ADOT layer infra/functions.py attaches, its wrapper traces the invocation and every botocore
call without this code knowing; without it, Lambda's active tracing records the invocation.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar, Self

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging import utils as logging_utils
from aws_lambda_powertools.metrics import MetricUnit, single_metric
from aws_lambda_powertools.utilities.parser import event_parser
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from handlers.settings import HandlerSettings
from saga_index.index import names
from saga_index.layout_change.record import ControlProvider, ControlStore, Routing
from saga_index.store.dynamo import make_client
from saga_index.sweeps import make_events_client

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

# One execution environment runs one function: its service and namespace come from the
# environment infra gives it (POWERTOOLS_SERVICE_NAME, POWERTOOLS_METRICS_NAMESPACE), read here.
logger = Logger()
metrics = Metrics()

# The domain library logs through stdlib logging; in Lambda, give it the same JSON format and
# context keys. Only there: the copy detaches those loggers from the root logger, which would
# take their records away from any other code sharing the process (a test session).
if os.environ.get(names.ENV_LAMBDA_FUNCTION_NAME):
    logging_utils.copy_config_to_registered_loggers(source_logger=logger, include={"saga_index"})

Handler = Callable[[Any, LambdaContext], dict[str, Any]]


def entry_point(
    model: type[BaseModel] | None = None,
    *,
    log_event: bool | None = None,
    publishes_metrics: bool = True,
) -> Callable[[Handler], Handler]:
    """Wraps a handler in the Powertools decorators, always in this order, outermost first: the
    logger's Lambda context, the metrics flush, then the event parser (`model`: the handler
    receives the parsed model). `log_event` None leaves it to POWERTOOLS_LOGGER_LOG_EVENT."""

    def wrap(handler: Handler) -> Handler:
        wrapped: Handler = handler if model is None else event_parser(model=model)(handler)
        if publishes_metrics:
            wrapped = metrics.log_metrics(wrapped, raise_on_empty_metrics=False)
        return logger.inject_lambda_context(wrapped, log_event=log_event)

    return wrap


class Clients:
    """The boto3 clients of the execution environment: made on first use (never at import) and
    reused by warm invocations."""

    def __init__(self) -> None:
        self._dynamodb: dict[int, DynamoDBClient] = {}
        self._pinned_dynamodb: DynamoDBClient | None = None
        self._events: Any = None

    def dynamodb(self, max_attempts: int) -> DynamoDBClient:
        if self._pinned_dynamodb is not None:
            return self._pinned_dynamodb
        if max_attempts not in self._dynamodb:
            self._dynamodb[max_attempts] = make_client(max_attempts=max_attempts)
        return self._dynamodb[max_attempts]

    def events(self) -> Any:
        if self._events is None:
            self._events = make_events_client()
        return self._events

    def use(self, *, dynamodb: DynamoDBClient | None = None, events: Any = None) -> None:
        """Hands in the clients to use (tests: moto's, or one with a fault injected); None drops
        that cache, so the next call makes a client again."""
        self._dynamodb.clear()
        self._pinned_dynamodb = dynamodb
        self._events = events


clients = Clients()


class Control:
    """The control-record provider of the execution environment: ONE ControlProvider (a strongly
    consistent GetItem cached for at most T seconds), made on first use and shared by every warm
    invocation, so a sweep's queries cost one record read per T, not one per invocation.

    Keyed on the client and the table it reads: a test that hands in another client (or table)
    gets a provider for it."""

    def __init__(self) -> None:
        self._provider: ControlProvider | None = None
        self._key: tuple[int, str, bool] | None = None
        self._pinned: ControlProvider | None = None

    def provider(
        self, client: DynamoDBClient, table_name: str, *, refuse_lost: bool = True
    ) -> ControlProvider:
        """`refuse_lost`: the store routes readers and writers, so a lost record fails loudly
        (ControlStore's lost-record rule); False only for the drift guard, which judges the
        rows of a record that says "never migrated" instead of refusing it."""
        if self._pinned is not None:
            return self._pinned
        key = (id(client), table_name, refuse_lost)
        if self._provider is None or self._key != key:
            self._provider = ControlProvider(
                ControlStore(client, table_name, refuse_lost=refuse_lost)
            )
            self._key = key
        return self._provider

    def use(self, provider: ControlProvider | None = None) -> None:
        """Hands in the provider to use (tests: one with an injected clock and T); None drops
        the cache, so the next call makes a provider again."""
        self._provider = None
        self._key = None
        self._pinned = provider


control = Control()


def control_provider(settings: HandlerSettings, *, refuse_lost: bool = True) -> ControlProvider:
    """The provider of this function's table, on its DynamoDB client (`refuse_lost`:
    Control.provider)."""
    return control.provider(
        clients.dynamodb(settings.max_attempts), settings.table_name, refuse_lost=refuse_lost
    )


def current_routing(settings: HandlerSettings) -> Routing:
    """The routing this invocation follows: read at most T seconds ago (one GetItem per T).
    Every log line of the invocation names the phase it follows."""
    routing = control_provider(settings).routing()
    logger.append_keys(phase=routing.phase.value)
    return routing


class ScheduledPayload(BaseModel):
    """What infra/schedules.py's ScheduledInvocation sends; every field optional so a manual
    test invocation with {} still runs (at the invocation time).

    Parsed with `for_invocation`, a scheduledTime further than CLOCK_TOLERANCE from the
    invocation clock is refused: the sweeps take it as "now" and the retry sweep writes it into
    its claims, so one manual invoke with a time in 2099 would keep that saga's next retry from
    ever being due. 20 minutes is more than any job's period, which is also the longest an
    event may wait in Lambda's asynchronous queue (infra/schedules.py; a unit test holds the
    tolerance to the longest period plus a 5-minute margin), so an on-time firing delivered as
    late as its maximum event age is still accepted; clock skew between Scheduler and Lambda is
    far below it; and a time up to 20 minutes ahead postpones a saga's next retry by no more
    than that, once.
    Parsed with `model_validate` (no clock), only the shape is checked."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    CLOCK_TOLERANCE: ClassVar[timedelta] = timedelta(minutes=20)
    # The validation context's key for the invocation clock (an aware datetime).
    INVOKED_AT: ClassVar[str] = "invokedAt"

    job: str | None = None
    scheduled_time: AwareDatetime | None = Field(default=None, alias="scheduledTime")
    execution_id: str | None = Field(default=None, alias="executionId")
    attempt: int | None = Field(default=None, ge=0)

    @field_validator("scheduled_time")
    @classmethod
    def _near_the_invocation_clock(
        cls, value: datetime | None, info: ValidationInfo
    ) -> datetime | None:
        invoked_at = (info.context or {}).get(cls.INVOKED_AT)
        if value is None or invoked_at is None:
            return value
        if abs(value - invoked_at) > cls.CLOCK_TOLERANCE:
            minutes = int(cls.CLOCK_TOLERANCE.total_seconds() // 60)
            raise ValueError(
                f"{value.isoformat()} is more than {minutes} minutes from the invocation clock "
                f"({invoked_at.isoformat()}): a schedule sends the time it fires at; invoke "
                "by hand with a time within that window, or with no scheduledTime at all"
            )
        return value

    @classmethod
    def for_invocation(cls, event: Any, *, invoked_at: datetime | None) -> Self:
        """The payload, its scheduledTime checked against `invoked_at` (None: not checked)."""
        return cls.model_validate(event, context={cls.INVOKED_AT: invoked_at})


def index_dimensions(settings: HandlerSettings) -> dict[str, str]:
    return {
        names.DIMENSION_TABLE: settings.table_name,
        names.DIMENSION_INDEX: settings.index_name,
    }


def add_index_dimensions(settings: HandlerSettings) -> None:
    """The table and index dimensions of this invocation's metrics. Per invocation, not default
    dimensions: a flush clears them, so nothing stale carries over."""
    for name, value in index_dimensions(settings).items():
        metrics.add_dimension(name=name, value=value)


def publish_apart(
    settings: HandlerSettings, name: str, unit: MetricUnit, value: float, **dimensions: str
) -> None:
    """One datapoint in an EMF document of its own, with the service, table and index dimensions
    plus `dimensions`: EMF gives every metric of a document the same dimensions, so a datapoint
    with one of its own (a shard, a state) cannot join the invocation's document."""
    service = {names.DIMENSION_SERVICE: metrics.service} if metrics.service else {}
    with single_metric(
        name=name,
        unit=unit,
        value=value,
        namespace=metrics.namespace,
        default_dimensions={**service, **index_dimensions(settings), **dimensions},
    ):
        pass
