"""Time dilation: an engine clock that runs at a fixed fraction of real time, so a machine too
slow to serve a production rate in real seconds can serve it in engine seconds.

As network emulation's "time dilation" does, every party that judges time reads the dilated
clock, and every wait on it lasts its length in engine seconds: at `scale` 0.01 one engine
second lasts 100 real seconds, so 1,000 writes per engine second are 10 writes per real second.
The semantics proxy (devkit.engine) judges a key's budget per whole ENGINE second and holds a
transaction's items for its in-flight time in engine seconds; the backfill under test
(devkit.semantics.contended) paces, heartbeats and fences on the same scale. What it shows: the
protocol's and the ceilings' behaviour at the production rate in engine time. What it does not:
that this machine serves that rate in real time, nor anything that runs on its own real clock
(botocore's retry backoff, a socket's timeout: those are shorter in engine time by the scale).
"""

from __future__ import annotations

import argparse
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

REAL_TIME = 1.0


def check_time_scale(scale: float) -> float:
    """`scale` itself, or ValueError naming why it is no time scale: a number in (0, 1]
    (engine seconds per real second: time may run slower than real, never faster)."""
    if isinstance(scale, bool) or not isinstance(scale, int | float):
        raise ValueError(f"time scale must be a number in (0, 1], got {scale!r}")
    if not (math.isfinite(scale) and 0 < scale <= 1):
        raise ValueError(
            f"time scale must be in (0, 1] (engine seconds per real second), got {scale!r}"
        )
    return float(scale)


def time_scale_argument(text: str) -> float:
    """argparse's `type` for a --time-scale option: the number, or the error argparse prints
    after the option's name (exit 2, before anything starts)."""
    try:
        return check_time_scale(float(text))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a time scale: a number in (0, 1], engine seconds per real second "
            "(0.01: one engine second lasts 100 real seconds; 1: real time)"
        ) from None


def describe_time_scale(scale: float) -> str:
    """The scale in words, for a report: what one engine second lasts."""
    if scale == REAL_TIME:
        return "real time (1 engine second = 1 real second)"
    return f"engine time at {scale:g}x real time: 1 engine second = {1 / scale:g} real seconds"


def dilated(clock: Callable[[], float], scale: float) -> Callable[[], float]:
    """`clock` slowed to `scale`: it reads what `clock` read at its creation, then advances
    `scale` seconds for each second of `clock`. At scale 1 it is `clock` itself."""
    check_time_scale(scale)
    if scale == REAL_TIME:
        return clock
    origin = clock()

    def engine_clock() -> float:
        return origin + (clock() - origin) * scale

    return engine_clock


@dataclass(frozen=True)
class TimeScale:
    """The clocks and waits of one process on the engine's time: the monotonic clock, the
    wall clock (a datetime in UTC) and the waits, all at `scale` engine seconds per real
    second, from the moment this object was made."""

    scale: float = REAL_TIME
    _origin: float = field(default_factory=time.monotonic)
    _wall_origin: datetime = field(default_factory=lambda: datetime.now(UTC))

    def __post_init__(self) -> None:
        check_time_scale(self.scale)

    def monotonic(self) -> float:
        return self._origin + (time.monotonic() - self._origin) * self.scale

    def wall(self) -> datetime:
        return self._wall_origin + timedelta(seconds=(time.monotonic() - self._origin) * self.scale)

    def real_seconds(self, engine_seconds: float) -> float:
        """How long `engine_seconds` last in real seconds."""
        return engine_seconds / self.scale

    def sleep(self, engine_seconds: float) -> None:
        time.sleep(max(0.0, self.real_seconds(engine_seconds)))

    def wait(self, event: threading.Event, engine_seconds: float) -> bool:
        """`event.wait` for `engine_seconds` of engine time: True when it was set."""
        return event.wait(max(0.0, self.real_seconds(engine_seconds)))

    def describe(self) -> str:
        return describe_time_scale(self.scale)
