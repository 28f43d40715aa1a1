"""The context every subcommand runs in: the global options, the control record read once per
invocation (a strongly consistent GetItem), and the clients.

The global --phase/--shards are READ overrides: a read command with them sees what a reader in
that phase (with that N) would see. Commands that write follow the record only, and refuse an
override that disagrees with it (`require_overrides_agree`). docs/cli.md: global options,
endpoints; docs/control-contract.md: the record.
"""

from __future__ import annotations

import logging
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import boto3
import click
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from saga_index.index import DEFAULT_SHARD_COUNT, InvalidInputError, SagaIndexError
from saga_index.layout_change.checks import RowsSeen, probe_shard_keys
from saga_index.layout_change.record import (
    DEFAULT_TIMING,
    ControlRecordUnavailableError,
    ControlState,
    ControlStore,
    ControlTiming,
    Phase,
    Routing,
    WallClock,
    layouts_for_phase,
    routing_for,
    utc_now,
)
from saga_index.layout_change.transitions import ReadinessCheck
from saga_index.store import SagaRepository, open_index_readiness
from saga_index.store.dynamo import DEFAULT_POLICY, RetryPolicy, make_client, retry_config
from saga_index_cli.failures import mark_client
from saga_index_cli.identity import caller_identity

log = logging.getLogger("saga_index.cli")


class OverrideDisagreesError(InvalidInputError):
    """A command that writes was given a --phase/--shards the record does not hold (exit 2)."""


class TableNotFoundError(SagaIndexError):
    """DynamoDB answered ResourceNotFoundException for the table (exit 1)."""


def is_table_missing(err: BaseException) -> bool:
    """Whether DynamoDB's ResourceNotFoundException is behind `err`: its cause or context, or
    one of a fan-out's partition failures (EnumerationError.failures)."""
    seen: set[int] = set()
    pending: list[BaseException] = [err]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if (
            isinstance(current, ClientError)
            and current.response.get("Error", {}).get("Code") == "ResourceNotFoundException"
        ):
            return True
        failures = getattr(current, "failures", None)
        if isinstance(failures, dict):
            pending.extend(f for f in failures.values() if isinstance(f, BaseException))
        pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return False


@dataclass(frozen=True)
class CliHooks:
    """What tests and the demo inject through `main(argv, hooks=...)`: who changes the record,
    the wall clock and how a wait passes on it (`--wait`), T (effectiveAt = changedAt + T +
    grace + margin) and the shard-key probe of the first `phase set` (one Query per possible
    shard key: tests that are not about it probe fewer). Production keeps the defaults: a
    shorter T here than the deployed functions' would make effectiveAt a lie, a narrower probe
    could miss a shard key."""

    identity: Callable[[CliContext], str] = caller_identity
    clock: WallClock = utc_now
    sleep: Callable[[float], None] = time.sleep
    timing: ControlTiming = DEFAULT_TIMING
    shard_key_probe: Callable[[Any, str], RowsSeen] = probe_shard_keys
    # Whether the open-saga index is there to move to (DescribeTable: IndexStatus, Backfilling).
    open_index_readiness: ReadinessCheck = open_index_readiness
    # How the control record's writes retry a refusal for now (attempts, back-off).
    control_retry: RetryPolicy = DEFAULT_POLICY


@dataclass
class CliContext:
    table: str | None
    endpoint_url: str | None
    region: str | None
    # READ overrides (None: follow the record).
    phase_override: Phase | None
    shards_override: int | None
    max_attempts: int
    hooks: CliHooks = field(default_factory=CliHooks)
    _client: Any = field(default=None, repr=False)
    _state: ControlState | None = field(default=None, repr=False)

    def require_table(self) -> str:
        if not self.table:
            raise click.UsageError(
                "no table given: pass --table NAME or set SAGA_TABLE_NAME", ctx=None
            )
        return self.table

    def aws_client(
        self, service: str, *, endpoint_url: str | None = None, config: Config | None = None
    ) -> Any:
        """A client of another AWS service (CloudWatch, Step Functions, CloudFormation, ...).

        Its endpoint is its own: `endpoint_url` (a command's --<service>-endpoint-url), else
        botocore's resolution ($AWS_ENDPOINT_URL_<SERVICE>, then $AWS_ENDPOINT_URL, then AWS).
        Never --endpoint-url, which is DynamoDB's only. `config` (timeouts, a shorter retry
        policy) is merged over the --max-attempts retry policy.
        """
        base = retry_config(self.max_attempts)
        return mark_client(
            boto3.client(
                service,
                region_name=self.region,
                endpoint_url=endpoint_url,
                config=base if config is None else base.merge(config),
            )
        )

    @property
    def client(self) -> Any:
        """The DynamoDB client: --endpoint-url (or $AWS_ENDPOINT_URL_DYNAMODB) when given."""
        if self._client is None:
            self._client = mark_client(
                make_client(
                    region=self.region,
                    endpoint_url=self.endpoint_url,
                    max_attempts=self.max_attempts,
                )
            )
        return self._client

    # ---- the record ----------------------------------------------------------------------

    def table_not_found(self) -> TableNotFoundError:
        """The error naming the table DynamoDB says does not exist, and where it looked."""
        meta = self.client.meta
        return TableNotFoundError(
            f"table {self.table!r} does not exist in region {meta.region_name} at "
            f"{meta.endpoint_url}: check --table (or SAGA_TABLE_NAME), --region and "
            "--endpoint-url, and that the stack is deployed there"
        )

    def control_store(self) -> ControlStore:
        return ControlStore(self.client, self.require_table(), retry=self.hooks.control_retry)

    def read_state(self) -> ControlState:
        """The record (strongly consistent), read once per invocation."""
        if self._state is None:
            store = self.control_store()
            try:
                self._state = store.read()
            except (ClientError, BotoCoreError) as err:
                raise ControlRecordUnavailableError(
                    f"could not read the control record of table {store.table_name!r} "
                    f"({type(err).__name__}: {err}). Every command follows it: check the table "
                    "name, region and access; a read can bypass it with both --phase and "
                    "--shards"
                ) from err
        return self._state

    def now(self) -> datetime:
        return self.hooks.clock()

    def command_prefix(self) -> str:
        """`saga-index` with the global options that name this invocation's table, endpoint
        and region, so a command printed as advice runs as it is, in any shell."""
        words = ["saga-index"]
        for option, value in (
            ("--table", self.table),
            ("--endpoint-url", self.endpoint_url),
            ("--region", self.region),
        ):
            if value:
                words += [option, value]
        return shlex.join(words)

    def reread_state(self) -> ControlState:
        """The record read again (strongly consistent), replacing the one this invocation read:
        a command that waited reads what the record says now."""
        self._state = None
        return self.read_state()

    def changed_by(self) -> str:
        return self.hooks.identity(self)

    @property
    def overridden(self) -> bool:
        return self.phase_override is not None or self.shards_override is not None

    def require_overrides_agree(self, state: ControlState) -> None:
        """For commands that write: a --phase/--shards that disagrees with the record is exit 2
        (the operator believes something the record does not say)."""
        where = f"(phase {state.phase.value}, version {state.version})"
        if self.phase_override is not None and self.phase_override is not state.phase:
            raise OverrideDisagreesError(
                f"--phase {self.phase_override.value} disagrees with the record {where}: "
                "commands that write follow the record; drop --phase (see `saga-index phase show`)"
            )
        if self.shards_override is not None:
            record_n = record_shard_count(state)
            if record_n != self.shards_override:
                held = "no shard count" if record_n is None else f"shard count {record_n}"
                hint = (
                    " (N of legacy -> migrating is `phase set migrating --shards N`)"
                    if record_n is None
                    else ""
                )
                raise OverrideDisagreesError(
                    f"--shards {self.shards_override} disagrees with the record, which holds "
                    f"{held} {where}: commands that write follow the record; drop the global "
                    f"--shards{hint}"
                )

    # ---- reads ---------------------------------------------------------------------------

    def routing(self) -> Routing:
        """The record's routing, or the one a reader in --phase (with --shards) would follow.
        Both overrides given: the record is not read at all."""
        if not self.overridden:
            state = self.read_state()
            # A read must not answer from the empty legacy key of a table whose record was
            # lost after a move (docs/control-contract.md, "A lost record").
            self.control_store().refuse_if_lost(state)
            return routing_for(state, self.now())
        phase = self.phase_override
        shards = self.shards_override
        if phase is None or shards is None:
            state = self.read_state()
            phase = phase or state.phase
            shards = shards or record_shard_count(state) or DEFAULT_SHARD_COUNT
        routing = Routing.between(*layouts_for_phase(phase, shards))
        log.info(
            "reading as a reader in phase %s would (read override): %s",
            phase.value,
            describe_routing(routing),
        )
        return routing

    def repository(self) -> SagaRepository:
        table = self.require_table()
        return SagaRepository(self.client, table, plan=self.routing())

    def shard_count_for_keys(self) -> int:
        """N for `shard`: --shards, else the record's N when a table is given, else the default
        N of `phase set migrating`."""
        if self.shards_override is not None:
            return self.shards_override
        if not self.table:
            return DEFAULT_SHARD_COUNT
        return record_shard_count(self.read_state()) or DEFAULT_SHARD_COUNT


def record_shard_count(state: ControlState) -> int | None:
    """The N a state names: its target's when sharded (migrating, resharding), else its current
    layout's (sharded, rolling-back); None when it names no sharded layout (legacy)."""
    return state.target.shard_count or state.layout.shard_count


def describe_routing(routing: Routing) -> str:
    if not routing.moving:
        return f"writes and reads {routing.source}"
    return f"writes {routing.target}; reads {routing.source}, then {routing.target}"


pass_cli = click.make_pass_decorator(CliContext)
