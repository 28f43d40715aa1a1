"""bench.fence_engine's verdict: the per-segment fence's steady state at STEADY_TARGET of its cap,
every row moved, the lease held; the unfenced run beside it is not judged."""

from __future__ import annotations

from typing import Any

import pytest

from bench import fence_engine


def _run(
    fence: str, steady: float | None, *, moved: int = 100, lost: str | None = None
) -> dict[str, Any]:
    return {
        "fence": fence,
        "steady_over_cap": steady,
        "restamped": moved,
        "rows": 100,
        "lease_lost": lost,
    }


@pytest.mark.parametrize(
    ("runs", "ok"),
    [
        ([_run("unfenced", 0.5), _run("per-segment", 0.95)], True),
        ([_run("unfenced", 1.0), _run("per-segment", 0.94)], False),
        ([_run("unfenced", 1.0), _run("per-segment", None)], False),  # no steady state at all
        ([_run("unfenced", 1.0), _run("per-segment", 1.0, moved=99)], False),
        ([_run("unfenced", 1.0), _run("per-segment", 1.0, lost="LEASE_LOST")], False),
        ([_run("unfenced", 1.0)], False),  # nothing judged is no pass
    ],
)
def test_the_verdict_judges_the_per_segment_fence_only(
    runs: list[dict[str, Any]], ok: bool
) -> None:
    assert fence_engine.verdict({"runs": runs}) is ok
