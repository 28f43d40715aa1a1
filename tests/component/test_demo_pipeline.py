"""`make demo` end to end, scaled down, on a real dynalite process (the demo starts its own).

The full demo takes minutes; this runs the same pipeline, every act, on a few dozen sagas and a
four-second replay (one round of the sweeps and one cohort per replay: every figure asserted
below is there at that length, and each virtual second of the three replays cost about a second
of wall time), and checks the contract of report.json, the chart, the exit codes and that no
server process is left behind.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from devkit.demo import cli as demo
from devkit.dynalite import DynaliteServer
from saga_index.index import keys, names

pytestmark = pytest.mark.conformance

SMALL = [
    "--open-sagas",
    "24",
    "--terminal-sagas",
    "60",
    "--persons",
    "70",
    "--anomalies",
    "1",
    "--property-managers",
    "2",
    "--duration",
    "4",
    "--sweep-period",
    "4",
    "--cohort-size",
    "5",
    "--cohort-period",
    "4",
    "--inbound-per-second",
    "2",
    "--backfill-rate",
    "500",
    "--verify-sample",
    "5",
]


class RecordingServer(DynaliteServer):
    """The real server, remembering its process so the test can check it is gone."""

    instances: list[RecordingServer] = []  # noqa: RUF012 - a test-local registry

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.pid: int | None = None
        RecordingServer.instances.append(self)

    def start(self, timeout: float = 20.0) -> DynaliteServer:
        started = super().start(timeout)
        assert self._process is not None
        self.pid = self._process.pid
        self.popen = self._process
        return started


def _server_stopped(server: RecordingServer) -> bool:
    return server.popen.poll() is not None


@pytest.fixture
def servers() -> list[RecordingServer]:
    RecordingServer.instances.clear()
    return RecordingServer.instances


def test_given_a_small_dataset_when_the_demo_runs_then_the_report_shows_the_hot_key_gone(
    tmp_path: Path,
    servers: list[RecordingServer],
    capsys: pytest.CaptureFixture[str],
    synthesized_template: dict[str, Any],
) -> None:
    results = tmp_path / "demo"

    code = demo.main([*SMALL, "--results-dir", str(results)], server_factory=RecordingServer)

    captured = capsys.readouterr()
    assert code == demo.EXIT_OK, captured.err
    report = json.loads((results / "report.json").read_text())
    for layout in ("legacy", "sharded"):
        for key in ("hottestKeyShare", "peakRcuPerKey", "peakWcuPerKey", "headroom"):
            assert isinstance(report[layout][key], int | float), (layout, key)
    # The legacy layout puts every saga under one key; sharding spreads them.
    assert report["legacy"]["hottestKeyShare"] == 1.0
    assert report["legacy"]["hottestKey"] == keys.LEGACY_GSI4PK
    assert report["sharded"]["partitionKeys"] > 1
    assert report["sharded"]["hottestKeyShare"] < 0.5
    assert report["sharded"]["peakRcuPerKey"] < report["legacy"]["peakRcuPerKey"]
    assert report["sharded"]["headroom"] > report["legacy"]["headroom"]
    assert all(
        p["partitionKey"].startswith("RenewalSaga#") for p in report["sharded"]["partitions"]
    )
    # Migration: every routable saga re-stamped (seed + the legacy replay's cohort), the one
    # anomaly reported and repaired onto its write key by the repair itself, so the second pass
    # (which records the completion) has nothing left to move; parity identical.
    cohort = report["legacy"]["replay"]["events"]["cohort"] * 5
    assert report["backfill"]["restamped"] == 24 + 60 + cohort
    assert report["backfill"]["anomalies"] == 1
    assert report["backfill"]["repaired"] == 1
    assert report["backfill"]["secondPass"]["restamped"] == 0
    assert report["backfill"]["skipped"] == 0
    assert report["parity"]["ok"] is True
    assert report["drift"]["healthy"] is True
    assert report["drift"]["legacyRows"] == 0
    # One drift-guard run on each layout is part of the load report, read at its pace.
    for layout in ("legacy", "sharded"):
        run = report[layout]["driftGuard"]
        assert run["healthy"] is True
        assert run["rcu"] > 0
        assert 0 < run["peakRcuPerKey"] <= run["unitsPerKey"] == 300
    # The cutover went through the operator's commands: the early `phase set sharded` was
    # refused by its checks, the record's history holds the two changes that were made.
    refused = report["refusedSharded"]
    assert refused["refused"] is True
    assert refused["exitCode"] == 3
    assert {check["name"] for check in refused["failed"]} == {
        "backfill-verified",
        "no-legacy-rows",
        "parity",
    }
    history = report["phaseHistory"]
    assert [(h["version"], h["from"], h["to"]) for h in history] == [
        (1, "legacy", "migrating"),
        (2, "migrating", "sharded"),
        (3, "sharded", "resharding"),
        (4, "resharding", "sharded"),
        # The open-saga index's two moves (the layout stays sharded; the reasons name them)
        (5, "sharded", "sharded"),
        (6, "sharded", "sharded"),
    ]
    assert "OpenSagaPK" in history[4]["reason"]
    # Shown as what they are; the open index's own N is the layout's after the re-shard.
    n = report["config"]["reshardTo"]
    assert [(h["moved"], h["change"]) for h in history[3:]] == [
        ("layout", "resharding -> sharded"),
        ("open-index", f"openIndex off -> adding({n})"),
        ("open-index", f"openIndex adding({n}) -> open({n})"),
    ]
    assert "open-index-parity" in history[5]["checksPassed"]
    assert set(history[1]["checksPassed"]) == {
        "backfill-verified",
        "no-legacy-rows",
        "no-misrouted-rows",
        "parity",
    }
    assert all(h["checksForced"] == [] and h["changedBy"] and h["reason"] for h in history)
    # Three completing moves; one told to retry later (exit 5, the settled switch) is run again
    sets = [
        c["exitCode"]
        for c in report["control"]["commands"]
        if c["command"].startswith("saga-index phase set sharded")
    ]
    assert [code for code in sets if code != 5] == [3, 0, 0]
    assert 5 in sets  # the early one came before effectiveAt plus the margin
    assert report["control"]["timing"]["effectiveDelaySeconds"] <= 1.0
    assert "REFUSED (exit 3)" in captured.err
    # The last act: sharded(16) -> resharding -> sharded(32) through the same commands; about
    # half the rows moved (the split property), parity identical before and after, drift clean.
    act = report["reshard"]
    assert (act["fromShards"], act["toShards"]) == (16, 32)
    assert act["refusedShardCount"] == {"shards": 64, "exitCode": 2}
    moved = act["backfill"]
    assert moved["moved"] == moved["wouldMove"]
    assert 0.25 <= moved["movedShare"] <= 0.75, moved
    assert moved["sourceRows"] == act["parity"]["before"]["truthRows"]
    assert moved["anomalies"] == 0
    assert moved["skipped"] == 0
    assert moved["seconds"] > 0
    assert {"backfill-verified", "parity"} <= set(act["checksPassed"])
    assert act["parity"]["ok"] is True
    assert act["parity"]["before"]["phase"] == "sharded"
    assert act["parity"]["sharded"]["comparedWithSnapshot"]
    # While the rows are on both layouts, the dual read (source first) is identical too.
    assert act["parity"]["resharding"]["phase"] == "resharding"
    assert act["parity"]["resharding"]["comparedWithSnapshot"]
    assert act["drift"]["healthy"] is True
    assert act["drift"]["misroutedRows"] == 0
    assert history[2]["checksPassed"] == []
    resharded = report["resharded"]
    assert resharded["partitionKeys"] > report["sharded"]["partitionKeys"]
    assert report["reshardImprovement"]["headroomMultiple"] is not None
    assert "| sharded (N=32) |" in captured.out
    # The open-saga index added live: the sweeps, metered, read fewer units on the open index
    # than over GSI4's keys, and returned the same open sagas (every open saga of the table:
    # the seeded ones and the cohorts the three replays opened) before and after.
    opened = report["openIndex"]
    before, after = opened["before"], opened["after"]
    assert (before["reads"], after["reads"]) == ("gsi4", "open-index")
    assert after["rcuPerEnumeration"] < before["rcuPerEnumeration"]
    assert opened["rcuRatio"] > 1
    assert set(before["rcuByIndex"]) == {names.INDEX_NAME}
    assert set(after["rcuByIndex"]) == {names.OPEN_INDEX_NAME}
    assert before["openSagas"] == after["openSagas"] == 24 + 3 * cohort
    assert opened["sameOpenSagas"] is True
    assert before["enumerations"] == after["enumerations"] == 4
    assert opened["backfill"]["run"]["stamped"] > 0
    assert opened["backfill"]["run"]["anomalies"] == 0
    assert opened["backfill"]["run"]["verified"] is True
    assert opened["checksPassed"] == ["open-index-parity"]
    # The traffic ran through the move, writers following the record
    assert opened["traffic"]["writes"] > 0
    assert "| before (open index off) | gsi4 " in captured.out, captured.out
    # The chart is a real PNG.
    assert (results / "partition-load.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # No timestamped WARNING line breaks into the steps: the anomaly the backfill reported
    # and the snapshot read is said once per step, as a note of that step
    assert not [line for line in captured.err.splitlines() if "WARNING" in line], captured.err
    logged = [line for line in captured.err.splitlines() if line.startswith("      logged: ")]
    assert logged, captured.err
    assert _said_once_per_step(captured.err), captured.err
    # The saga-row count that grows is explained by what the replay opened
    assert "the legacy replay's cohort walker opened" in captured.err
    assert "the sharded replay opened" in captured.err
    # On the semantics proxy: the backfill's fence ran as transactions the proxy served
    assert report["engine"]["proxy"] is True
    assert report["engine"]["transactions"] >= report["backfill"]["restamped"]
    assert "has no transactions" not in captured.err
    assert "pace " in captured.err
    # stdout carries the report only; progress went to stderr.
    assert "hottest key's share of index load" in captured.out
    assert f"[1/{demo.STAGES}]" in captured.err
    assert f"[1/{demo.STAGES}]" not in captured.out
    # Nothing left running.
    (server,) = servers
    assert _server_stopped(server)


def _said_once_per_step(err: str) -> bool:
    """Every "logged:" note appears at most once between two step headers."""
    steps = err.split(f"/{demo.STAGES}]")
    for step in steps:
        notes = [line for line in step.splitlines() if line.startswith("      logged: ")]
        if len(notes) != len(set(notes)):
            return False
    return True


def test_given_ctrl_c_mid_run_when_the_demo_stops_then_the_server_is_stopped(
    tmp_path: Path,
    servers: list[RecordingServer],
    monkeypatch: pytest.MonkeyPatch,
    synthesized_template: dict[str, Any],
) -> None:
    def interrupted(*_: Any, **__: Any) -> dict[str, Any]:
        raise KeyboardInterrupt

    monkeypatch.setattr(demo, "run_demo", interrupted)

    code = demo.main([*SMALL, "--results-dir", str(tmp_path)], server_factory=RecordingServer)

    assert code == demo.EXIT_INTERRUPTED
    (server,) = servers
    assert _server_stopped(server)
    assert not (tmp_path / "report.json").exists()


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        (["--shards", "12"], "power of two"),
        (["--open-sagas", "500", "--persons", "10"], "cannot exceed persons"),
        (["--backfill-rate", "0"], "--backfill-rate"),
    ],
)
def test_given_bad_arguments_when_the_demo_starts_then_it_exits_2_and_starts_no_server(
    arguments: list[str],
    problem: str,
    servers: list[RecordingServer],
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = demo.main(arguments, server_factory=RecordingServer)

    assert code == demo.EXIT_USAGE
    assert problem in capsys.readouterr().err
    assert servers == []
