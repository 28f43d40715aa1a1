"""Time dilation (devkit.semantics.dilation): the engine's clock at a fraction of real time, the
waits on it, and the --time-scale option of both command lines (the engine's proxy and
bench.fence), which refuse anything but a number in (0, 1] with exit 2 before starting."""

from __future__ import annotations

import argparse
import threading
import time
from datetime import timedelta
from typing import Any

import pytest

from bench import fence
from devkit.engine import Engine, ProxyOptions
from devkit.engine import serve as engine_serve
from devkit.semantics.dilation import (
    TimeScale,
    check_time_scale,
    describe_time_scale,
    dilated,
    time_scale_argument,
)

BAD_SCALES = ["0", "-1", "2", "abc", "nan", "inf"]


def test_a_dilated_clock_advances_by_the_scale_from_where_it_started() -> None:
    now = [100.0]
    clock = dilated(lambda: now[0], 0.1)
    assert clock() == 100.0
    now[0] = 110.0
    assert clock() == pytest.approx(101.0)
    assert dilated(time.monotonic, 1.0) is time.monotonic


def test_a_time_scale_waits_its_engine_seconds_in_real_ones() -> None:
    scale = TimeScale(0.5)
    assert scale.real_seconds(0.05) == pytest.approx(0.1)
    event = threading.Event()
    begun = time.monotonic()
    assert scale.wait(event, 0.05) is False
    assert time.monotonic() - begun >= 0.1
    wall, mono = scale.wall(), scale.monotonic()
    time.sleep(0.1)
    assert scale.monotonic() - mono == pytest.approx(0.05, abs=0.03)
    assert scale.wall() - wall == pytest.approx(
        timedelta(seconds=0.05), abs=timedelta(seconds=0.03)
    )
    event.set()
    assert scale.wait(event, 100.0) is True


def test_the_scale_is_described_in_words() -> None:
    assert describe_time_scale(0.01) == (
        "engine time at 0.01x real time: 1 engine second = 100 real seconds"
    )
    assert describe_time_scale(1.0) == "real time (1 engine second = 1 real second)"


@pytest.mark.parametrize("text", BAD_SCALES)
def test_a_bad_scale_is_refused_naming_the_range(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=r"not a time scale: a number in \(0, 1\]"):
        time_scale_argument(text)


@pytest.mark.parametrize("value", [0, -1.0, 2.0, float("nan"), True, "0.5"])
def test_the_options_and_the_engine_refuse_a_bad_scale_before_anything_starts(value: Any) -> None:
    with pytest.raises(ValueError, match="time scale"):
        check_time_scale(value)
    with pytest.raises(ValueError, match="time scale"):
        ProxyOptions(time_scale=value).validate()
    started: list[object] = []
    with pytest.raises(ValueError, match="time scale"):
        Engine(time_scale=value, server_factory=lambda **kw: started.append(kw))
    assert started == []


def test_the_raw_engine_has_no_clock_to_dilate() -> None:
    with pytest.raises(ValueError, match="no clock to dilate"):
        Engine(raw=True, time_scale=0.5, server_factory=lambda **kw: None)


def test_the_engine_passes_its_scale_to_the_proxy() -> None:
    engine = Engine(time_scale=0.25)
    assert engine.options.time_scale == 0.25
    assert ProxyOptions(time_scale=0.25).to_json()["time"] == (
        "engine time at 0.25x real time: 1 engine second = 4 real seconds"
    )
    # Given apart from the options, the scale replaces theirs and keeps the rest.
    kept = Engine(options=ProxyOptions(wcu_ceiling=7), time_scale=0.5).options
    assert (kept.wcu_ceiling, kept.time_scale) == (7, 0.5)


@pytest.mark.parametrize("text", BAD_SCALES)
def test_the_engine_command_refuses_a_bad_scale_with_exit_2(
    text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = engine_serve.main(["--upstream", "http://127.0.0.1:9", "--time-scale", text])
    assert code == engine_serve.EXIT_USAGE
    captured = capsys.readouterr()
    assert "argument --time-scale" in captured.err
    assert "not a time scale" in captured.err
    assert engine_serve.SERVING_LINE not in captured.out


def test_the_engine_command_takes_a_scale() -> None:
    _, _, options, _ = engine_serve.parse_args(
        ["--upstream", "http://127.0.0.1:9", "--time-scale", "0.01"]
    )
    assert options.time_scale == 0.01
    _, _, default, _ = engine_serve.parse_args(["--upstream", "http://127.0.0.1:9"])
    assert default.time_scale == 1.0


@pytest.mark.parametrize("text", BAD_SCALES)
def test_the_fence_bench_refuses_a_bad_scale_with_exit_2(
    text: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[object] = []
    monkeypatch.setattr(fence, "run", lambda *a, **kw: ran.append((a, kw)))
    with pytest.raises(SystemExit) as exited:
        fence.main(["--engine", "--time-scale", text])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "argument --time-scale" in err
    assert "not a time scale" in err
    assert ran == []


def test_the_fence_bench_takes_a_scale_only_for_the_engine(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[dict[str, Any]] = []
    monkeypatch.setattr(fence, "run", lambda *a, **kw: ran.append(kw) or {"runs": []})
    monkeypatch.setattr(fence, "render", lambda result: None)
    monkeypatch.setattr(fence, "save", lambda name, result: None)
    with pytest.raises(SystemExit) as exited:
        fence.main(["--time-scale", "0.5"])
    assert exited.value.code == 2
    assert "--time-scale is the engine's time: give it with --engine" in capsys.readouterr().err
    assert ran == []
    assert fence.main(["--engine", "--time-scale", "0.5"]) == 0
    assert fence.main(["--engine"]) == 0
    assert fence.main(["--engine", "--tiny"]) == 0
    assert [r["time_scale"] for r in ran] == [0.5, None, fence.ENGINE_TINY["time_scale"]]


def test_the_fence_bench_runs_moto_on_real_time_only() -> None:
    with pytest.raises(ValueError, match="the engine's"):
        fence.run(time_scale=0.5)
