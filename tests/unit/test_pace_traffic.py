"""bench.pace_traffic's application writes: what each refusal DynamoDB answers counts as. The
engine bench's tiny run (tests/component/test_benches.py) sends them for real; here a writer
refuses on cue, so each outcome is certain."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from bench import pace_traffic
from bench.pace_traffic import Seconds, Traffic
from devkit.semantics.dilation import TimeScale
from saga_index.index import RetryLaterError


def refusal(code: str) -> RetryLaterError:
    """The product writer's refusal after its one attempt, carrying DynamoDB's answer."""
    answer = ClientError({"Error": {"Code": code, "Message": code}}, "UpdateItem")
    err = RetryLaterError(f"refused: {code}")
    err.__cause__ = answer
    return err


class Writer:
    """Refuses with each code in turn, then writes."""

    def __init__(self, codes: list[str]) -> None:
        self.codes: Iterator[str] = iter(codes)
        self.calls = 0

    def transition(self, **_: Any) -> None:
        self.calls += 1
        code = next(self.codes, None)
        if code is not None:
            raise refusal(code)


def traffic(codes: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[Traffic, Writer, Seconds]:
    monkeypatch.setattr(pace_traffic.time, "sleep", lambda _: None)  # the back-off's waits
    seconds = Seconds(clock=lambda: 0.0, origin=0.0)
    sent = Traffic("http://127.0.0.1:9", "t", [("s1", "p1")], seconds, TimeScale(), [1.0], 1.0)
    writer = Writer(codes)
    sent.writer = writer  # type: ignore[assignment]
    return sent, writer, seconds


def test_given_a_conflict_with_a_restamp_then_the_request_is_sent_again_and_counted_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent, writer, seconds = traffic([pace_traffic.CONFLICT, pace_traffic.CONFLICT], monkeypatch)
    sent._send(0)
    assert writer.calls == 3  # refused twice unapplied, then written
    assert sum(seconds["conflicts"].values()) == 2
    assert (sum(seconds["sent"].values()), sum(seconds["throttled"].values())) == (1, 0)
    assert sent.errors == {}


def test_given_a_throttle_then_it_is_counted_and_not_sent_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent, writer, seconds = traffic(
        [pace_traffic.CONFLICT, "ThrottlingException", "ThrottlingException"], monkeypatch
    )
    sent._send(0)
    assert writer.calls == 2  # the conflict's resend was throttled: counted, not resent
    assert sum(seconds["throttled"].values()) == 1
    assert sent.errors == {}


def test_given_conflicts_on_every_attempt_or_another_error_then_it_is_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    attempts = pace_traffic.DEFAULT_POLICY.attempts
    sent, writer, _ = traffic([pace_traffic.CONFLICT] * attempts, monkeypatch)
    sent._send(0)
    assert writer.calls == attempts
    assert sent.errors == {pace_traffic.CONFLICT: 1}
    sent, _, _ = traffic(["ValidationException"], monkeypatch)
    sent._send(0)
    assert sent.errors == {"ValidationException": 1}
