"""Every benchmark of bench.BENCHMARKS runs at its TINY scale, through the runner `make bench`
uses (`python -m bench --tiny`), on the session's server: each prints its table and the summary
row, and writes its result file. A benchmark broken by a change to the product fails here, not
at the next `make bench`. The figures at this scale mean nothing, so no verdict is asserted
(a timing bench may miss its tolerance in seconds): only that the bench ran to its table."""

from __future__ import annotations

import importlib
import inspect
import json
import re
from pathlib import Path

import pytest

from bench import BENCHMARKS
from bench.__main__ import main
from tests.support.bench_figures import FIGURES

pytestmark = pytest.mark.conformance

NAMES = [module.rsplit(".", 1)[-1] for module in BENCHMARKS]
# What cannot run in a test, and why.
SKIPPED = {
    "tracing": (
        "bench.tracing installs each option's pinned stack from the package index (pip install "
        "--target build/bench-tracing, devkit.layer.DependencyDir), which a test "
        "must not depend on; its pins, span parsing and span check are tested in "
        "tests/unit/test_tracing_bench.py, its TINY above"
    ),
}


def _split(out: str) -> tuple[str, list[str]]:
    """What the benchmarks printed, and the runner's summary table's lines (its last table)."""
    start = [m.start() for m in re.finditer(r"^benchmark +\| verdict", out, re.MULTILINE)][-1]
    return out[:start], out[start:].splitlines()


def test_every_benchmark_has_a_tiny_scale_its_run_accepts() -> None:
    # Also for a benchmark skipped below: its TINY still names run's parameters.
    for path in BENCHMARKS:
        module = importlib.import_module(path)
        assert isinstance(module.TINY, dict), path
        inspect.signature(module.run).bind(**module.TINY)


@pytest.mark.parametrize("name", NAMES)
def test_benchmark_runs_at_its_tiny_scale(
    name: str, dynalite_endpoint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if name in SKIPPED:
        pytest.skip(SKIPPED[name])
    code = main(
        ["--only", name, "--tiny", "--endpoint-url", dynalite_endpoint, "--results", str(tmp_path)]
    )
    out = capsys.readouterr().out
    before, summary = _split(out)
    row = next(line for line in summary if line.startswith(f"{name} "))
    assert "ERROR" not in row, out
    # Its own table came before the summary, and its result file is JSON.
    assert "|" in before
    result = json.loads((tmp_path / f"{name}.json").read_text())
    assert result
    # A benchmark whose tiny figures mean something is held to them on this one run.
    if name in FIGURES:
        FIGURES[name](result)
    # A FAILED verdict at this scale is a timing figure missing its mark: exit 1 says so.
    assert code == (1 if " FAILED " in row else 0)


def test_the_runner_prints_its_summary_and_fails_when_a_benchmark_raises(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hot_key = importlib.import_module("bench.hot_key")

    def broken(**_: object) -> dict[str, object]:
        raise RuntimeError("the product changed under the bench")

    monkeypatch.setattr(hot_key, "run", broken)
    code = main(["--only", "hot_key,memory", "--tiny", "--results", str(tmp_path)])
    _, rows = _split(capsys.readouterr().out)
    assert code == 1
    assert any(r.startswith("hot_key ") and "ERROR" in r for r in rows)
    # The bench after the broken one still ran.
    assert any(r.startswith("memory ") and "ERROR" not in r for r in rows)
