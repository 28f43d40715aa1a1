"""What a backfill execution in Step Functions has done so far, read while it runs: the plan,
the Map Run's counts of finished, running and failed segments, each segment's rows from its child
execution's newest worker result, the first failed segment's own error, and the verify step's
summary. Read-only and advisory: follow.py follows executions with it.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from pydantic import ValidationError

from saga_index.index import MAX_CONCURRENT_SEGMENTS
from saga_index.layout_change.backfill import BackfillSummary, SegmentPlan, SegmentResult

log = logging.getLogger("saga_index.cli.backfill")
_T = TypeVar("_T")


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
_PLAN_FIELDS = frozenset({"request", "run", "segments", "template"})


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
        # The plan step's output: the run's ticket (its move, the record's version).
        self.plan: SegmentPlan | None = None
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
            elif payload is not None and _PLAN_FIELDS.issubset(payload):
                with contextlib.suppress(ValidationError):
                    self.plan = SegmentPlan.model_validate(payload)

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
