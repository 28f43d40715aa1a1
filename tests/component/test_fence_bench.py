"""bench.fence: its command line (the moto transaction copy it relies on is tested in
tests/unit/test_cheap_transactions.py). The figures of its tiny run
(tests/support/bench_figures.py) are asserted on the runner's tiny run in test_benches.py, so
the run is made once."""

from __future__ import annotations

from typing import Any

import pytest

from bench import fence


def test_tiny_runs_the_tiny_scale_renders_and_saves_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # `python -m bench.fence --tiny` is the runner's tiny run (whose figures test_benches.py
    # checks) started from the module's own command line.
    calls: list[tuple[Any, ...]] = []
    result = {"runs": []}

    def run(segments: Any, caps: Any, **kwargs: Any) -> dict[str, Any]:
        calls.append((list(segments), list(caps), kwargs))
        return result

    monkeypatch.setattr(fence, "run", run)
    monkeypatch.setattr(fence, "render", lambda shown: calls.append(("render", shown)))
    monkeypatch.setattr(fence, "save", lambda name, document: calls.append((name, document)))

    assert fence.main(["--tiny"]) == 0

    tiny = fence.TINY
    assert calls == [
        (
            tiny["segments"],
            tiny["caps"],
            {
                "seconds": tiny["seconds"],
                "max_rows": tiny["max_rows"],
                "fences": None,
                "on_engine": False,
            },
        ),
        ("render", result),
        (fence.NAME, result),
    ]


def test_bad_arguments_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        fence.main(["--fences", "per-row"])
    assert exited.value.code == 2
    assert "unknown fence(s) ['per-row']" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        fence.main(["--caps", "fast"])
