"""`saga-index backfill`: move saga rows between the control record's layouts, rate-capped, one
run at a time; and `backfill throttle|pause|resume`, which change a running backfill.

Where rows move is the record's (docs/control-contract.md): forward while it says `migrating`
(legacy -> sharded(N)) or `sharded` (rows repaired later), rollback while it says `rolling-back`
(sharded(N) -> legacy). `--direction` only says which the operator expects; it must agree.

Locally (the default) the same worker code as the deployed Lambda runs here, one thread per
segment, with a progress bar on stderr: this process takes the record's lease (holder
user@host/pid), heartbeats it every few seconds (which also applies the record's throttle and
pause), and releases it with the run's completion, which `phase set` checks. With
--state-machine-arn the deployed state machine runs it (its plan step takes the lease for the
execution) and this command follows the execution to its end. The cutover sequence around it
is in docs/runbook.md.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import signal
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

import boto3
import click
from botocore.exceptions import BotoCoreError, ClientError
from pydantic import ValidationError
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from saga_index.backfill.leasing import CONTROL_POLL_SECONDS, token_for_execution
from saga_index.backfill.local import LocalBackfill, backfill_locally
from saga_index.backfill.messages import (
    DEFAULT_MAX_WRITES_PER_SECOND,
    DEFAULT_TOTAL_SEGMENTS,
    MAX_TOTAL_SEGMENTS,
    BackfillRequest,
    BackfillSummary,
    RunTicket,
    SegmentCounts,
    SegmentResult,
    summarise,
)
from saga_index.backfill.move import Move
from saga_index.backfill.readback import count_source_rows
from saga_index.control.errors import LeaseHeldError, LeaseNotYetEffectiveError
from saga_index.control.lease import pause_backfill, release_lease, resume_backfill, set_throttle
from saga_index.control.record import format_time
from saga_index.control.state import BackfillDirection, ControlState
from saga_index.control.timing import ControlTiming
from saga_index.control.transitions import seconds_until
from saga_index.errors import InvalidInputError, SagaIndexError
from saga_index.names import (
    INDEX_NAME,
    MAX_CONCURRENT_SEGMENTS,
    MAX_WRITES_PER_SECOND,
    MIN_WRITES_PER_SECOND,
)
from saga_index_cli.context import (
    CliContext,
    FiniteFloatRange,
    emit,
    local_identity,
    pass_cli,
)
from saga_index_cli.status import completion_document, lease_document

log = logging.getLogger("saga_index.cli.backfill")
_T = TypeVar("_T")

EXIT_CLEAN, EXIT_FAILED, EXIT_ANOMALIES = 0, 1, 3
# Non-terminal progress: one log line this often (a log file has no use for a redrawn bar).
PROGRESS_LOG_SECONDS = 10.0
_STATE_MACHINE_ARN = re.compile(
    r"arn:aws[a-z-]*:states:[a-z0-9-]+:[0-9]{12}:stateMachine:[A-Za-z0-9_-]{1,80}"
)


def exit_code(summary: BackfillSummary, *, failed: bool) -> int:
    """0 complete and clean; 3 complete, anomalies remain; 1 failed, interrupted or unverified."""
    if failed or not summary.complete or not summary.verified:
        return EXIT_FAILED
    return EXIT_ANOMALIES if summary.anomalies_remain else EXIT_CLEAN


def _request(
    direction: str, segments: int, max_writes_per_second: float, dry_run: bool
) -> BackfillRequest:
    try:
        return BackfillRequest(
            direction=BackfillDirection(direction),
            total_segments=segments,
            max_writes_per_second=float(max_writes_per_second),
            dry_run=dry_run,
        )
    except ValidationError as err:
        raise InvalidInputError(str(err)) from None


def control_poll_seconds(timing: ControlTiming) -> float:
    """How often a local run heartbeats (and re-reads the throttle and pause): every few seconds,
    and at least as often as T, so a demo or test with a small T sees changes as fast."""
    return max(0.01, min(CONTROL_POLL_SECONDS, timing.cache_seconds))


def local_holder() -> str:
    """The lease holder of a run in this process: user@host/pid."""
    return f"{local_identity()}/{os.getpid()}"


def check_startable(state: ControlState, now: datetime) -> None:
    """What the lease would refuse, asked before a Step Functions execution is started (so the
    refusal is this command's exit 1, not a failed execution): a state younger than its
    effectiveAt, another run's live lease. The plan step's acquire is still the authority."""
    wait = seconds_until(state.effective_at, now)
    if wait > 0 and state.effective_at is not None:
        raise LeaseNotYetEffectiveError(format_time(state.effective_at), wait)
    lease = state.lease
    if lease is not None and lease.is_live(now):
        raise LeaseHeldError(lease.holder, format_time(lease.expires_at))


# ---- reports -------------------------------------------------------------------------------------


def write_report(path: Path, document: dict[str, Any]) -> None:
    """The JSON report in FILE, written whole or not at all (a runbook reads it after checking
    the exit code: no pipe through tee hides the code)."""
    path = path.expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(document, handle, ensure_ascii=False, sort_keys=True, indent=2)
            handle.write("\n")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _report(summary: BackfillSummary, extra: dict[str, Any]) -> dict[str, Any]:
    return {**summary.to_json(), **extra}


def _print_summary(
    summary: BackfillSummary, extra: dict[str, Any], as_json: bool, output: Path | None
) -> None:
    document = _report(summary, extra)
    if output is not None:
        write_report(output, document)
    if as_json:
        emit(document)
        return
    state = "complete" if summary.complete else "NOT complete"
    moved = ""
    if summary.source is not None and summary.target is not None:
        moved = f" ({summary.source.layout()} -> {summary.target.layout()})"
    lines = [
        f"backfill {summary.direction.value}{moved}"
        f"{' (dry run)' if summary.dry_run else ''}: {state}",
        f"  scanned          {summary.scanned}",
        f"  re-stamped       {summary.restamped}",
        f"  skipped          {summary.skipped}   (moved, changed or deleted by someone else)",
        f"  anomalies        {summary.anomalies}   (unusable personId: left on their key)",
        f"  would re-stamp   {summary.would_restamp}",
        f"  throttles        {summary.throttles}",
    ]
    if summary.verification is not None:
        verdict = "ok" if summary.verification.ok else "FAILED"
        lines.append(f"  verification     {verdict}: {summary.verification.message}")
    for key, value in extra.items():
        if value:
            lines.append(f"  {key:<16} {value}")
    if summary.anomaly_keys:
        rollback = summary.target is not None and summary.target.kind == "legacy"
        lines.append(
            # The legacy key needs no personId: a rollback moves these rows and lists them.
            "rows moved back with a bad personId/GSI4SK (repair them with "
            "`saga-index repair-anomaly` before migrating again):"
            if rollback
            else "anomaly rows (left on the source key: repair each with "
            "`saga-index repair-anomaly`, then run again):"
        )
        lines.extend(
            f"  PK={k['PK']} SK={k['SK']}" + (f"  ({k['reason']})" if k.get("reason") else "")
            for k in summary.anomaly_keys
        )
    if summary.anomalies > len(summary.anomaly_keys):
        lines.append(f"  ... and {summary.anomalies - len(summary.anomaly_keys)} more")
    if output is not None:
        lines.append(f"report written to {output}")
    click.echo("\n".join(lines))


@contextlib.contextmanager
def _stop_on_signals(stop: Callable[[], None]) -> Iterator[None]:
    """Ctrl-C and SIGTERM call `stop` (finish in-flight writes, then end) instead of killing the
    run mid-write; a second Ctrl-C interrupts at once."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

    def handle(signum: int, _frame: FrameType | None) -> None:
        log.warning(
            "%s received: stopping after the in-flight writes; run the same command again to "
            "finish (it picks up what is left)",
            signal.Signals(signum).name,
        )
        signal.signal(signal.SIGINT, signal.default_int_handler)
        stop()

    for sig in previous:
        signal.signal(sig, handle)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class _Progress:
    """A live bar on a terminal (stderr), periodic log lines otherwise. Thread-safe."""

    def __init__(self, *, label: str, total: int | None, unit: str) -> None:
        self.console = Console(stderr=True)
        self.live = self.console.is_terminal
        self.label = label
        self.unit = unit
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._last_log = self.started
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[detail]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=self.console,
            disable=not self.live,
        )
        self._task: TaskID = self._progress.add_task(label, total=total, detail="")

    def __enter__(self) -> _Progress:
        self._progress.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._progress.stop()

    def show_totals(self, totals: SegmentCounts) -> None:
        self.show(completed=totals.handled, scanned=totals.scanned, restamped=totals.restamped)

    def show(self, *, completed: int, scanned: int, restamped: int, extra: str = "") -> None:
        elapsed = max(time.monotonic() - self.started, 1e-9)
        detail = (
            f"{self.unit} · scanned {scanned} · re-stamped {restamped} "
            f"({restamped / elapsed:.1f}/s){extra}"
        )
        with self._lock:
            self._progress.update(self._task, completed=completed, detail=detail)
            now = time.monotonic()
            if not self.live and now - self._last_log >= PROGRESS_LOG_SECONDS:
                self._last_log = now
                log.info("%s: %d %s", self.label, completed, detail)


# ---- local run --------------------------------------------------------------------------------


@contextlib.contextmanager
def _while_running(stop: threading.Event, progress: _Progress) -> Iterator[None]:
    with _stop_on_signals(stop.set), progress:
        yield


def _announce(ticket: RunTicket, state: ControlState, request: BackfillRequest) -> None:
    move = ticket.move()
    log.info(
        "backfill %s%s under version %d (phase %s): %d segment(s), at most %.1f writes/s",
        move.describe(),
        " (dry run, no lease)" if request.dry_run else f", lease held by {ticket.holder}",
        state.version,
        state.phase.value,
        request.total_segments,
        request.max_writes_per_second,
    )
    if request.dry_run:
        return
    record_rate = state.backfill_max_writes_per_second
    if record_rate is not None and record_rate != request.max_writes_per_second:
        log.warning(
            "the record's runtime throttle caps this run at %.1f writes/s, not "
            "--max-writes-per-second %.1f (change it with `saga-index backfill throttle`)",
            record_rate,
            request.max_writes_per_second,
        )
    if state.backfill_paused:
        log.warning(
            "the backfill is PAUSED in the record: nothing is written until "
            "`saga-index backfill resume`"
        )


def _run_locally(
    cli: CliContext, request: BackfillRequest, as_json: bool, output: Path | None
) -> int:
    table = cli.require_table()
    state = cli.read_state()
    cli.require_overrides_agree(state)
    # Refuse a direction the record's writers would undo before reading anything else.
    move = Move.for_state(state, request.direction)
    client = cli.client
    stop = threading.Event()
    total: int | None = None
    if Console(stderr=True).is_terminal:
        # Only for the bar's ETA: a COUNT of the source partition(s) through the index.
        try:
            total = count_source_rows(client, table, index_name=INDEX_NAME, move=move)
        except (ClientError, BotoCoreError) as err:
            log.warning("could not count the rows to move (no ETA): %s", err)
    label = f"{request.direction.value}{' dry run' if request.dry_run else ''}"
    progress = _Progress(label=label, total=total, unit="rows")
    outcome = backfill_locally(
        client,
        table,
        request,
        holder=local_holder(),
        store=cli.control_store(),
        clock=cli.hooks.clock,
        poll_seconds=control_poll_seconds(cli.hooks.timing),
        index_name=INDEX_NAME,
        stop=stop,
        on_start=lambda ticket, started: _announce(ticket, started, request),
        on_progress=progress.show_totals,
        while_running=_while_running(stop, progress),
    )
    return _finish_local(outcome, as_json, output)


def _finish_local(outcome: LocalBackfill, as_json: bool, output: Path | None) -> int:
    run, summary, ticket = outcome.run, outcome.summary, outcome.ticket
    extra: dict[str, Any] = {
        "failures": {str(k): v for k, v in run.failures.items()},
        "holder": ticket.holder,
        "stateVersion": ticket.state_version,
        "startedAt": ticket.started_at,
        "completionRecorded": outcome.completion is not None,
    }
    if run.interrupted:
        extra["interrupted"] = True
    if outcome.lease_lost is not None:
        extra["leaseLost"] = outcome.lease_lost
    if len(outcome.applied_caps) > 1:
        extra["appliedMaxWritesPerSecond"] = outcome.applied_caps
    _print_summary(summary, extra, as_json, output)
    lost = outcome.lease_lost is not None
    code = exit_code(summary, failed=bool(run.failures) or run.interrupted or lost)
    if lost:
        click.echo(
            f"saga-index: the backfill lost its lease and stopped: {outcome.lease_lost}. Nothing "
            "is half-written and no completion was recorded; check `saga-index status`, then "
            "run the backfill again if the record still calls for it",
            err=True,
        )
    elif code == EXIT_FAILED:
        click.echo(
            "saga-index: backfill did not finish cleanly"
            + (f" (failed segments: {sorted(run.failures)})" if run.failures else "")
            + ("; interrupted" if run.interrupted else "")
            + "; nothing is half-written: run the same command again, it converges",
            err=True,
        )
    return code


# ---- state machine run --------------------------------------------------------------------------

# A running segment's newest worker result is among its last few events (9 per invocation, 3
# per retried attempt): one page nearly always holds it, and a poll reads at most a few.
CHILD_HISTORY_PAGE = 50
CHILD_HISTORY_PAGES = 3
# Child executions whose history one poll reads, at most: those that ended since their last
# read first, then the running ones (at most MAX_CONCURRENT_SEGMENTS), least recently read
# first. A poll costs a few calls per child read, plus one listing of the children, whatever
# the length of their histories; the poll after the execution ends reads every child left.
CHILD_READS_PER_POLL = 2 * MAX_CONCURRENT_SEGMENTS
_SEGMENT_RESULT_FIELDS = frozenset({"segment", "cursor", "restamped"})


def _task_payload(event: dict[str, Any]) -> dict[str, Any] | None:
    details = (
        event.get("taskSucceededEventDetails")
        or event.get("lambdaFunctionSucceededEventDetails")
        or {}
    )
    try:
        output = json.loads(details.get("output") or "null")
    except json.JSONDecodeError:
        return None
    if not isinstance(output, dict):
        return None
    # An SDK integration's output is the Invoke response (Payload inside); a Lambda task's is
    # the function's own result.
    payload = output.get("Payload", output)
    return payload if isinstance(payload, dict) else None


def _segment_result(event: dict[str, Any]) -> SegmentResult | None:
    if event.get("type") not in ("TaskSucceeded", "LambdaFunctionSucceeded"):
        return None
    payload = _task_payload(event)
    if payload is None or not _SEGMENT_RESULT_FIELDS.issubset(payload):
        return None
    try:
        return SegmentResult.model_validate(payload)
    except ValidationError:
        return None


@dataclass
class SegmentFailure:
    """A failed segment's child execution: the worker's own error, which the parent's
    States.ExceedToleratedFailureThreshold does not carry."""

    execution_arn: str
    status: str
    error: str | None
    cause: str | None
    segment: int | None = None

    def describe(self) -> str:
        which = "a segment" if self.segment is None else f"segment {self.segment}"
        return f"{which} {self.status} ({self.execution_arn}): {self.error}: {self.cause}"


@dataclass
class _Child:
    """One segment's child execution, as last listed and read."""

    arn: str
    status: str
    read_status: str | None = None  # its status when its history was last read
    last_event_id: int = 0
    last_read_poll: int = -1


class ExecutionFollower:
    """Follows a backfill execution while it runs. The parent's history holds the plan, the
    Map Run and the verification step's summary. The segments run as a Distributed Map's child
    executions: how many finished, run or failed comes from the Map Run (describe_map_run), the
    rows from each child's newest worker result (its cumulative counts).

    Progress is advisory: a call that fails here (no permission, an API the endpoint lacks) is
    logged once and leaves the counts as they were; following the execution goes on."""

    def __init__(self, sfn: Any, execution_arn: str) -> None:
        self.sfn = sfn
        self.execution_arn = execution_arn
        self.last_event_id = 0
        self.segments: dict[int, SegmentResult] = {}
        self.finished_segments = 0
        self.running_segments: int | None = None
        self.failed_segments: int | None = None
        self.summary: BackfillSummary | None = None
        self.failure: SegmentFailure | None = None
        self.map_run_arn: str | None = None
        self.children: dict[str, _Child] = {}
        self.polls = 0
        self._iterations_succeeded = 0
        self._warned: set[str] = set()

    def poll(self, *, final: bool = False) -> None:
        """Read what changed. `final` (the execution ended): read every child not yet read in
        its last status, without the per-poll cap, once."""
        self.polls += 1
        self._read_parent()
        if self.map_run_arn is None:
            self.map_run_arn = self._advisory("list_map_runs", self._find_map_run)
        if self.map_run_arn is not None:
            self._advisory("describe_map_run", self._read_map_run)
            self._advisory("list_executions", self._list_children)
            self._read_children(final=final)

    def _advisory(self, what: str, call: Callable[[], _T]) -> _T | None:
        try:
            return call()
        # Any failure: a progress read must never end the follow of a running execution (an
        # endpoint without the API raises what it likes).
        except Exception as err:  # noqa: BLE001
            if what not in self._warned:
                self._warned.add(what)
                log.warning("progress: %s failed (%s); the counts shown may lag", what, err)
            return None

    def _read_parent(self) -> None:
        new: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {
            "executionArn": self.execution_arn,
            "reverseOrder": True,
            "maxResults": 200,
        }
        # Newest first, down to what was already seen: each poll reads only the new events.
        while True:
            page = self.sfn.get_execution_history(**kwargs)
            events = page.get("events", [])
            fresh = [e for e in events if int(e["id"]) > self.last_event_id]
            new.extend(fresh)
            if len(fresh) < len(events) or not page.get("nextToken"):
                break
            kwargs["nextToken"] = page["nextToken"]
        for event in sorted(new, key=lambda e: int(e["id"])):
            self.last_event_id = max(self.last_event_id, int(event["id"]))
            # An inline Map (a state machine deployed before the Distributed Map) puts its
            # iterations in this history.
            if event["type"] == "MapIterationSucceeded":
                self._iterations_succeeded += 1
                self.finished_segments = max(self.finished_segments, self._iterations_succeeded)
            result = _segment_result(event)
            if result is not None:
                self.segments[result.segment] = result
                continue
            payload = _task_payload(event) if event["type"] == "TaskSucceeded" else None
            if payload is not None and "verification" in payload:
                self.summary = BackfillSummary.model_validate(payload)

    def _find_map_run(self) -> str | None:
        runs = self.sfn.list_map_runs(executionArn=self.execution_arn).get("mapRuns", [])
        # One Distributed Map state, entered once: its first Map Run (a redrive adds none).
        arns = [run["mapRunArn"] for run in runs if run.get("mapRunArn")]
        return arns[0] if arns else None

    def _read_map_run(self) -> None:
        counts = self.sfn.describe_map_run(mapRunArn=self.map_run_arn).get("itemCounts", {})
        self.finished_segments = int(counts.get("succeeded", 0))
        self.running_segments = int(counts.get("running", 0))
        self.failed_segments = sum(
            int(counts.get(key, 0)) for key in ("failed", "timedOut", "aborted")
        )

    def _list_children(self) -> None:
        kwargs: dict[str, Any] = {"mapRunArn": self.map_run_arn, "maxResults": 1000}
        while True:
            page = self.sfn.list_executions(**kwargs)
            for listed in page.get("executions", []):
                arn, status = listed["executionArn"], listed["status"]
                child = self.children.get(arn)
                if child is None:
                    self.children[arn] = _Child(arn, status)
                else:
                    child.status = status
            if not page.get("nextToken"):
                return
            kwargs["nextToken"] = page["nextToken"]

    def _read_children(self, *, final: bool) -> None:
        ended = [
            c for c in self.children.values() if c.status != "RUNNING" and c.read_status != c.status
        ]
        running = sorted(
            (c for c in self.children.values() if c.status == "RUNNING"),
            key=lambda c: c.last_read_poll,
        )
        due = ended + running
        for child in due if final else due[:CHILD_READS_PER_POLL]:
            self._advisory("get_execution_history (child)", partial(self._read_child, child))
            # The first segment that failed or timed out ends the Map Run; the others are
            # aborted because of it.
            if child.status in ("FAILED", "TIMED_OUT") and self.failure is None:
                self.failure = self._advisory(
                    "describe_execution (child)", partial(self._describe_failure, child)
                )

    def _read_child(self, child: _Child) -> None:
        status = child.status
        kwargs: dict[str, Any] = {
            "executionArn": child.arn,
            "reverseOrder": True,
            "maxResults": CHILD_HISTORY_PAGE,
        }
        newest = child.last_event_id
        for _ in range(CHILD_HISTORY_PAGES):
            page = self.sfn.get_execution_history(**kwargs)
            events = page.get("events", [])
            found = None
            for event in events:  # newest first
                event_id = int(event["id"])
                newest = max(newest, event_id)
                if event_id <= child.last_event_id:
                    break
                found = _segment_result(event)
                if found is not None:
                    break
            if found is not None:
                self.segments[found.segment] = found
                break
            if (
                not page.get("nextToken")
                or not events
                or int(events[-1]["id"]) <= child.last_event_id
            ):
                break
            kwargs["nextToken"] = page["nextToken"]
        child.last_event_id = newest
        child.read_status = status
        child.last_read_poll = self.polls

    def _describe_failure(self, child: _Child) -> SegmentFailure:
        described = self.sfn.describe_execution(executionArn=child.arn)
        segment: int | None = None
        with contextlib.suppress(json.JSONDecodeError, TypeError, ValueError):
            raw = json.loads(described.get("input") or "null")
            if isinstance(raw, dict) and raw.get("segment") is not None:
                segment = int(raw["segment"])
        return SegmentFailure(
            execution_arn=child.arn,
            status=described.get("status", child.status),
            error=described.get("error"),
            cause=described.get("cause"),
            segment=segment,
        )


def _segment_detail(follower: ExecutionFollower) -> str:
    running, failed = follower.running_segments, follower.failed_segments
    detail = "" if running is None else f" · {running} running"
    return detail + (f" · {failed} FAILED" if failed else "")


def _recorded_by(cli: CliContext, token: str) -> bool:
    """Did the run with this token record its completion (the verify step's release)?"""
    try:
        last = cli.control_store().read().last_backfill
    except (SagaIndexError, ClientError, BotoCoreError) as err:
        log.warning("could not read the record after the execution: %s", err)
        return False
    return last is not None and last.lease_token == token


def _run_state_machine(
    cli: CliContext,
    request: BackfillRequest,
    arn: str,
    as_json: bool,
    output: Path | None,
    poll_interval: float,
) -> int:
    cli.require_table()
    state = cli.read_state()
    cli.require_overrides_agree(state)
    move = Move.for_state(state, request.direction)
    if not request.dry_run:
        check_startable(state, cli.now())
    sfn = boto3.client("stepfunctions", region_name=cli.region)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    name = f"backfill-{request.direction.value}-{stamp}-{uuid.uuid4().hex[:8]}"
    execution_arn = sfn.start_execution(
        stateMachineArn=arn, name=name, input=json.dumps(request.to_json())
    )["executionArn"]
    token = token_for_execution(execution_arn)
    log.info("started %s: %s", execution_arn, move.describe())
    follower = ExecutionFollower(sfn, execution_arn)
    stop_requested = threading.Event()
    label = f"{request.direction.value}{' dry run' if request.dry_run else ''} (Step Functions)"
    with (
        _stop_on_signals(stop_requested.set),
        _Progress(label=label, total=request.total_segments, unit="segments") as progress,
    ):
        stopped = False
        while True:
            status = sfn.describe_execution(executionArn=execution_arn)
            follower.poll(final=status["status"] != "RUNNING")
            progress.show(
                completed=follower.finished_segments,
                scanned=sum(r.scanned for r in follower.segments.values()),
                restamped=sum(r.restamped for r in follower.segments.values()),
                extra=_segment_detail(follower),
            )
            if status["status"] != "RUNNING":
                break
            if stop_requested.is_set() and not stopped:
                # No new invocation starts; one already running stops at its next heartbeat
                # once the lease is released below. The next run skips what was moved.
                sfn.stop_execution(
                    executionArn=execution_arn,
                    error="StoppedByOperator",
                    cause="saga-index backfill received Ctrl-C or SIGTERM",
                )
                stopped = True
                if not request.dry_run:
                    with contextlib.suppress(SagaIndexError, ClientError, BotoCoreError):
                        release_lease(cli.control_store(), token=token, clock=cli.hooks.clock)
            stop_requested.wait(poll_interval)
    final = status["status"]
    summary = follower.summary
    if final == "SUCCEEDED" and status.get("output"):
        summary = BackfillSummary.model_validate(json.loads(status["output"]))
    if summary is None:
        summary = summarise(request, list(follower.segments.values()), complete=False, move=move)
    extra: dict[str, Any] = {
        "executionArn": execution_arn,
        "status": final,
        "holder": execution_arn,
        "stateVersion": state.version,
        "completionRecorded": not request.dry_run and _recorded_by(cli, token),
    }
    failure = follower.failure
    if final != "SUCCEEDED":
        extra["error"] = status.get("error")
        extra["cause"] = status.get("cause")
        if failure is not None:
            extra["failedSegment"] = failure.segment
            extra["segmentExecutionArn"] = failure.execution_arn
            extra["segmentError"] = failure.error
            extra["segmentCause"] = failure.cause
    _print_summary(summary, extra, as_json, output)
    if final != "SUCCEEDED":
        # A failed segment fails the parent with Step Functions' generic Map Run error; what
        # the operator needs is the worker's own, in the child execution.
        segment = f"; {failure.describe()}" if failure is not None else ""
        click.echo(
            f"saga-index: execution {final}: {status.get('error')}: {status.get('cause')}"
            f"{segment}; nothing is half-written: run the backfill again, it converges",
            err=True,
        )
    return exit_code(summary, failed=final != "SUCCEEDED")


def _state_machine_arn(_: click.Context, __: click.Parameter, value: str | None) -> str | None:
    if value is not None and not _STATE_MACHINE_ARN.fullmatch(value):
        raise click.BadParameter(
            f"{value!r} is not a state machine ARN "
            "(arn:aws:states:<region>:<account>:stateMachine:<name>)"
        )
    return value


def _output_path(_: click.Context, __: click.Parameter, value: str | None) -> Path | None:
    return None if value is None else Path(value)


_json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print the result as one JSON object on stdout."
)
_reason_option = click.option(
    "--reason", default="", help="Why (recorded in the control record's event history)."
)


@click.group("backfill", invoke_without_command=True)
@click.option(
    "--direction",
    type=click.Choice([d.value for d in BackfillDirection]),
    default=BackfillDirection.FORWARD.value,
    show_default=True,
    help="Must agree with the control record: forward while it says migrating (legacy -> "
    "sharded(N)) or sharded (rows repaired later); rollback while it says rolling-back "
    "(sharded(N) -> legacy). The layouts are the record's, never a flag's.",
)
@click.option(
    "--segments",
    type=click.IntRange(1, MAX_TOTAL_SEGMENTS),
    default=DEFAULT_TOTAL_SEGMENTS,
    show_default=True,
    help="Parallel Scan segments (threads here, Map iterations in Step Functions).",
)
@click.option(
    "--max-writes-per-second",
    type=FiniteFloatRange(MIN_WRITES_PER_SECOND, MAX_WRITES_PER_SECOND),
    default=DEFAULT_MAX_WRITES_PER_SECOND,
    show_default=True,
    help="Cap on re-stamps per second over ALL segments. Each one writes to a hot index "
    "partition (1,000 WCU/s at most, shared with production traffic). A runtime throttle in "
    "the record (`backfill throttle`) replaces it.",
)
@click.option("--dry-run", is_flag=True, help="Scan and count what would move; write nothing.")
@_json_option
@click.option(
    "--output",
    metavar="FILE",
    callback=_output_path,
    help="Also write the JSON report to FILE (whatever the exit code): branch on the exit "
    "code, read the report from the file.",
)
@click.option(
    "--state-machine-arn",
    callback=_state_machine_arn,
    help="Start the deployed backfill state machine and follow it to its end, instead of "
    "running here. --table must name the deployed table (its record is checked first).",
)
@click.option("--poll-interval", type=click.FloatRange(0.01, 60), default=2.0, hidden=True)
@click.pass_context
def backfill_group(
    ctx: click.Context,
    direction: str,
    segments: int,
    max_writes_per_second: float,
    dry_run: bool,
    as_json: bool,
    output: Path | None,
    state_machine_arn: str | None,
    poll_interval: float,
) -> None:
    """Re-stamp GSI4PK of every saga row the control record says must move (rate-capped,
    resumable, one run at a time). Without a subcommand: run it.

    \b
    Exit codes of a run:
      0  complete and clean (verified: nothing with a usable personId left to move), and the
         completion recorded in the control record (what `phase set` checks)
      3  complete, but anomaly rows (unusable personId) remain on their key: listed
      1  failed, interrupted, not verified, or lost its lease: run the same command again, it
         converges. Also refused before anything runs: the state is younger than its
         effectiveAt (wait the seconds named), another run holds a live lease (named, with
         its expiry), or the record is missing or unreadable
      2  bad usage or input, a --direction the record disagrees with, or a global
         --phase/--shards the record does not hold

    A dry run takes no lease and writes nothing, but its --direction must still agree with the
    record. Ctrl-C or SIGTERM stops after the in-flight writes and releases the lease. The
    cutover and rollback sequences are in docs/runbook.md.
    """
    if ctx.invoked_subcommand is not None:
        return
    cli = ctx.find_object(CliContext)
    assert cli is not None
    request = _request(direction, segments, max_writes_per_second, dry_run)
    if state_machine_arn:
        code = _run_state_machine(cli, request, state_machine_arn, as_json, output, poll_interval)
    else:
        code = _run_locally(cli, request, as_json, output)
    sys.exit(code)


def _control_change(
    cli: CliContext,
    change: Callable[[str], ControlState],
    message: Callable[[ControlState], str],
    as_json: bool,
) -> None:
    state = cli.read_state()
    cli.require_overrides_agree(state)
    changed = change(cli.changed_by())
    now = cli.now()
    if as_json:
        emit(
            {
                "table": cli.require_table(),
                "phase": changed.phase.value,
                "version": changed.version,
                "backfillMaxWritesPerSecond": changed.backfill_max_writes_per_second,
                "backfillPaused": changed.backfill_paused,
                "lease": lease_document(changed.lease, now),
                "lastBackfill": completion_document(changed.last_backfill),
            }
        )
        return
    lease = changed.lease
    running = (
        f"run {lease.holder!r} picks it up at its next heartbeat (locally within "
        f"{CONTROL_POLL_SECONDS:.0f} s; Step Functions: within its workers' next heartbeat)"
        if lease is not None and lease.is_live(now)
        else "no run holds the lease now: the next run starts with it"
    )
    click.echo(f"{message(changed)}; {running}")


@backfill_group.command("throttle")
@click.option(
    "--max-writes-per-second",
    type=FiniteFloatRange(MIN_WRITES_PER_SECOND, MAX_WRITES_PER_SECOND),
    required=True,
    help="The new cap over ALL segments, replacing the run's own --max-writes-per-second.",
)
@_reason_option
@_json_option
@pass_cli
def throttle_command(
    cli: CliContext, max_writes_per_second: float, reason: str, as_json: bool
) -> None:
    """Set the running backfill's write cap in the control record (no restart needed).

    Exit 0 set; 2 invalid value, or no record yet (never migrated); 1 record missing or
    unreadable.
    """
    _control_change(
        cli,
        lambda who: set_throttle(
            cli.control_store(),
            max_writes_per_second,
            changed_by=who,
            reason=reason,
            clock=cli.hooks.clock,
        ),
        lambda s: f"backfill write cap set to {s.backfill_max_writes_per_second:g} writes/s",
        as_json,
    )


@backfill_group.command("pause")
@_reason_option
@_json_option
@pass_cli
def pause_command(cli: CliContext, reason: str, as_json: bool) -> None:
    """Pause the backfill: its workers stop writing (they keep their lease) until resumed.

    Exit 0 paused; 2 no record yet (never migrated); 1 record missing or unreadable.
    """
    _control_change(
        cli,
        lambda who: pause_backfill(
            cli.control_store(), changed_by=who, reason=reason, clock=cli.hooks.clock
        ),
        lambda _: "backfill PAUSED: no re-stamps until `saga-index backfill resume`",
        as_json,
    )


@backfill_group.command("resume")
@_reason_option
@_json_option
@pass_cli
def resume_command(cli: CliContext, reason: str, as_json: bool) -> None:
    """Resume a paused backfill.

    Exit 0 resumed; 2 no record yet (never migrated); 1 record missing or unreadable.
    """
    _control_change(
        cli,
        lambda who: resume_backfill(
            cli.control_store(), changed_by=who, reason=reason, clock=cli.hooks.clock
        ),
        lambda _: "backfill resumed",
        as_json,
    )
