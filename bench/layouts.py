"""Layout lab: what every enumeration costs as history grows, six layouts side by side.

    python -m bench.layouts [--scales 1,100,1000] [--history 1,10,100] [--duration 60]

The layouts (bench.layouts_model.LAYOUTS): legacy; the ADR's N=16; the same with the sweeps
staggered as infra/schedules.py deploys them; state-split keys (open sagas under
RenewalSaga#<shard>, terminal ones under RenewalSagaClosed#<shard>); a sparse open-saga index
beside GSI4; GSI4PK = personId with enumerations by a paced parallel Scan.

For every layout, dataset scale (1x, 100x, 1000x the seed's persons and open sagas) and history
(terminal sagas 1x, 10x, 100x the open count), the ADR traffic mix is priced by the synthetic
model from per-person aggregates. At 1x, for one history size, every layout is ALSO seeded on a
local server and the same plan is replayed through the capacity meter, with probes (one
enumeration, a sample of by-person reads, of workflow steps and of terminal transitions): the
model's figures must agree with the metered ones to within the tolerance (5 % by default).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np

from bench.layouts_drift import drift_guard_figures, render_drift
from bench.layouts_keys import LAYOUTS, LabLayout
from bench.layouts_model import (
    Aggregates,
    Config,
    PlanArrays,
    aggregates_of,
    enumeration_figures,
    lab_mix,
    lab_spec,
    load_of,
    next_open_state,
    open_only_dataset,
    plan_arrays,
    price_layout,
    sample_every,
    shards_of,
    synthetic_aggregates,
)
from bench.layouts_store import MeteredLayout, create_layout_table, seed_layout
from bench.layouts_targets import (
    DEFAULT_SHARD_LADDER,
    price_target_size,
    render_targets,
    verdicts,
)
from bench.output import RESULTS, emit, num, pct, progress, save
from bench.server import local_server
from bench.tiny import TINY_MIX, TINY_SPEC
from devkit.capacity.ledger import LoadLedger
from devkit.seed import Dataset, SeedSpec, build_dataset
from devkit.traffic.mix import TrafficMix
from devkit.traffic.plan import build_plan
from saga_index.store.dynamo import item_size, make_client, serialize

NAME = "layouts"
TINY: dict[str, Any] = {
    "scales": (1, 2),
    "history_factors": (1,),
    "duration": 4,
    "metered_history": 1,
    "metered_duration": 3,
    "base_spec": TINY_SPEC,
    "base_mix": TINY_MIX,
    "by_person_sample": 5,
    "transition_sample": 3,
    "chart_path": None,
    "target_scale": 2,
    "target_history": 1,
    "shard_ladder": (16, 32),
}
DEFAULT_SCALES = (1, 100, 1000)
DEFAULT_HISTORY = (1, 10, 100)
# Figures compared between the model and the metered run, and the absolute slack under which a
# difference counts as agreement whatever its ratio (one rounding step of the unit).
COMPARED: dict[str, float] = {
    "enumerationRcu": 0.5,
    "requestsPerEnumeration": 0,
    "byPersonRcu": 0.01,
    "transitionWcu": 0.05,
    "terminalTransitionWcu": 0.05,
    "hottestShare": 0.005,
    "peakRcuPerKey": 0.5,
    "peakWcuPerKey": 1.0,
    "indexHeadroom": 0.0,
    "openRowsRcu": 0.5,
    "enumerationOverOpenRows": 0.0,
    "requestsPerByPerson": 0,
    "transitionIndexWrites": 0,
    "terminalIndexWrites": 0,
}


def _mixes(base: TrafficMix) -> dict[bool, TrafficMix]:
    return {staggered: lab_mix(base, staggered=staggered) for staggered in (False, True)}


def _price_all(
    agg: Aggregates,
    plans: dict[bool, PlanArrays],
    config: Config,
    *,
    scale: int,
    history_factor: int,
) -> list[dict[str, Any]]:
    rows = []
    for layout in LAYOUTS:
        figures = price_layout(layout, agg, plans[layout.staggered], config)
        # Every layout also under the deployed stagger: the schedule production runs.
        staggered = (
            figures
            if layout.staggered
            else price_layout(layout, agg, plans[True], config, transition_sample=())
        )
        figures["readHeadroomStaggered"] = staggered["readHeadroom"]
        figures["headroomStaggered"] = staggered["headroom"]
        rows.append(
            {
                "name": layout.name,
                "scale": scale,
                "historyFactor": history_factor,
                "openSagas": int(agg.open_rows.sum()),
                "terminalSagas": int(agg.terminal_rows.sum()),
                **{k: v for k, v in figures.items() if k != "name"},
                **drift_guard_figures(layout, agg, config.shard_count),
            }
        )
    return rows


def synthetic_grid(
    base_spec: SeedSpec,
    base_mix: TrafficMix,
    config: Config,
    *,
    scales: Sequence[int],
    history_factors: Sequence[int],
) -> list[dict[str, Any]]:
    """Every layout at every scale and history size, priced by the model."""
    mixes = _mixes(base_mix)
    rows: list[dict[str, Any]] = []
    others: dict[int, tuple[int, int]] = {}
    for h in history_factors:
        started = time.monotonic()
        dataset = build_dataset(lab_spec(base_spec, scale=1, history_factor=h))
        agg = aggregates_of(dataset, shard_count=config.shard_count)
        others[h] = (agg.other_rows, agg.other_bytes)
        if 1 in scales:
            plans = {
                s: plan_arrays(build_plan(m, dataset), agg.person_index) for s, m in mixes.items()
            }
            rows += _price_all(agg, plans, config, scale=1, history_factor=h)
            progress(f"layouts: synthetic 1x, history {h}x ({time.monotonic() - started:.1f} s)")
    for scale in (s for s in scales if s != 1):
        started = time.monotonic()
        open_dataset = open_only_dataset(base_spec, scale)
        shards = shards_of(open_dataset.persons, config.shard_count)
        person_index = {p: i for i, p in enumerate(open_dataset.persons)}
        plans = {
            s: plan_arrays(build_plan(m.scaled(scale), open_dataset), person_index)
            for s, m in mixes.items()
        }
        for h in history_factors:
            agg = synthetic_aggregates(
                open_dataset,
                history_factor=h,
                other_bytes_per_scale=others[h],
                scale=scale,
                shards=shards,
            )
            agg.person_index = person_index
            rows += _price_all(agg, plans, config, scale=scale, history_factor=h)
            progress(
                f"layouts: synthetic {scale}x, history {h}x "
                f"({time.monotonic() - started:.1f} s so far)"
            )
    return rows


# ---- the metered check at 1x ----------------------------------------------------------------


def _metered_load(ledger: LoadLedger, targets: Sequence[str]) -> dict[str, Any]:
    names: dict[str, int] = {}
    keys_: list[int] = []
    seconds: list[int] = []
    rcu: list[float] = []
    wcu: list[float] = []
    for target in targets:
        for key, cells in ledger.series(target).items():
            key_id = names.setdefault(f"{target}/{key}", len(names))
            for second, (r, w) in cells.items():
                keys_.append(key_id)
                seconds.append(second)
                rcu.append(r)
                wcu.append(w)
    load = load_of(
        np.asarray(keys_, dtype=np.int64),
        np.asarray(seconds, dtype=np.int64),
        np.asarray(rcu, dtype=np.float64),
        np.asarray(wcu, dtype=np.float64),
    )
    by_id = {v: k for k, v in names.items()}
    hottest = load.hottest_key
    return {
        "hottestShare": round(load.hottest_share, 4),
        "hottestKey": None if hottest is None else by_id[hottest],
        "indexKeys": len(load.keys),
        "peakRcuPerKey": round(load.peak_rcu_per_key, 2),
        "peakWcuPerKey": round(load.peak_wcu_per_key, 2),
        "indexHeadroom": None if load.headroom is None else round(load.headroom, 3),
        "totalRcu": round(float(load.total_rcu.sum()), 1),
        "totalWcu": round(float(load.total_wcu.sum()), 1),
    }


def _index_writes(ledger: LoadLedger, targets: Sequence[str]) -> int:
    """Index entries the ledger's writes touched: the meter charges each entry put, updated or
    deleted once (an entry whose key changes twice: delete and put)."""
    return sum(
        partition.requests for target in targets for partition in ledger.summary(target).partitions
    )


def _ledger_units(ledger: LoadLedger) -> tuple[float, float]:
    rcu = wcu = 0.0
    for target in ledger.targets():
        summary = ledger.summary(target)
        rcu += summary.total_rcu
        wcu += summary.total_wcu
    return rcu, wcu


def metered_layout(
    endpoint_url: str,
    template: dict[str, Any],
    dataset: Dataset,
    layout: LabLayout,
    plan_staggered: dict[bool, Any],
    config: Config,
    *,
    persons: Sequence[str],
    sagas: Sequence[tuple[str, str, str]],
) -> dict[str, Any]:
    """Seed `layout`, then through the meter: one enumeration, by-person reads of `persons`,
    the replay of the plan, workflow steps and terminal transitions of `sagas` (id, person,
    state; sagas the plan never touches)."""
    started = time.monotonic()
    client = make_client(endpoint_url=endpoint_url)
    table = f"lab-{layout.name}-{os.getpid()}-{time.monotonic_ns() % 10**9}"
    schema = create_layout_table(client, template, table, layout)
    seed_layout(client, table, dataset, layout, config.shard_count)
    run = MeteredLayout(
        endpoint_url,
        table,
        schema,
        layout,
        shard_count=config.shard_count,
        segments=config.scan_segments,
    )
    run.fresh_meter()
    enumeration = run.repository.get_all_open_sagas()
    enumeration_rcu, _ = _ledger_units(run.meter.ledger)
    open_bytes = sum(item_size(serialize(item)) for item in enumeration.items)
    run.fresh_meter()
    by_person_requests = sum(
        run.repository.get_sagas_by_person(person).requests for person in persons
    )
    by_person_rcu, _ = _ledger_units(run.meter.ledger)
    run.fresh_meter()
    stats = run.replay(plan_staggered[layout.staggered], layout.name.replace("-", "_"))
    load = _metered_load(run.meter.ledger, run.index_targets())
    step_wcu = final_wcu = 0.0
    step_writes = final_writes = 0
    for to_terminal in (False, True):
        run.fresh_meter()
        for saga_id, person, state in sagas:
            run.writer.transition(
                saga_id=saga_id,
                person_id=person,
                to_state="SIGNED" if to_terminal else next_open_state(state),
                updated_at="2026-07-11T00:00:00.000Z"
                if to_terminal
                else "2026-07-10T23:00:00.000Z",
            )
        _, wcu = _ledger_units(run.meter.ledger)
        writes = _index_writes(run.meter.ledger, run.index_targets())
        if to_terminal:
            final_wcu, final_writes = wcu, writes
        else:
            step_wcu, step_writes = wcu, writes
    open_count = len(enumeration.items)
    return {
        "name": layout.name,
        **load,
        **enumeration_figures(enumeration_rcu, open_bytes),
        "requestsPerEnumeration": enumeration.requests,
        "openSagasRead": open_count,
        "byPersonRcu": round(by_person_rcu / len(persons), 3) if persons else None,
        "requestsPerByPerson": round(by_person_requests / len(persons), 3) if persons else None,
        "transitionWcu": round(step_wcu / len(sagas), 3) if sagas else None,
        "terminalTransitionWcu": round(final_wcu / len(sagas), 3) if sagas else None,
        "transitionIndexWrites": round(step_writes / len(sagas), 3) if sagas else None,
        "terminalIndexWrites": round(final_writes / len(sagas), 3) if sagas else None,
        "replay": stats.to_json(),
        "shadowMismatches": run.meter.shadow_mismatches,
        "wallSeconds": round(time.monotonic() - started, 1),
    }


def _untouched_sagas(
    dataset: Dataset, plans: Sequence[Any], count: int
) -> list[tuple[str, str, str]]:
    touched = {
        event.saga_id
        for plan in plans
        for tick in plan.ticks
        for event in tick.events
        if getattr(event, "kind", "") == "transition"
    }
    found = []
    for record in dataset.open_sagas:
        if record.saga_id not in touched and record.person_id is not None:
            found.append((record.saga_id, record.person_id, record.state))
    step = max(1, len(found) // max(1, count))
    return found[::step][:count]


def compare(metered: dict[str, Any], model: dict[str, Any], tolerance: float) -> dict[str, Any]:
    """Per figure: both values, the relative difference, and whether they agree."""
    figures = {}
    ok = True
    for name, slack in COMPARED.items():
        a, b = metered.get(name), model.get(name)
        if a is None or b is None:
            agree = a is None and b is None
            relative = None
        else:
            difference = abs(float(a) - float(b))
            relative = difference / abs(float(a)) if a else (0.0 if not difference else None)
            agree = difference <= slack or (relative is not None and relative <= tolerance)
        ok = ok and agree
        figures[name] = {
            "metered": a,
            "synthetic": b,
            "relativeDifference": None if relative is None else round(relative, 4),
            "agree": agree,
        }
    return {"ok": ok, "figures": figures}


def metered_check(
    endpoint_url: str,
    base_spec: SeedSpec,
    base_mix: TrafficMix,
    config: Config,
    *,
    history_factor: int,
    duration: int,
    by_person_sample: int,
    transition_sample: int,
    tolerance: float,
) -> dict[str, Any]:
    """Every layout seeded and metered at 1x. The replay is `duration` virtual seconds with
    the sweep period shortened to it (each sweep fires once, staggered ones at their offsets
    mapped onto it), so that six metered replays fit the benchmark's budget."""
    from devkit.schema import load_template

    template = load_template()
    dataset = build_dataset(lab_spec(base_spec, scale=1, history_factor=history_factor))
    agg = aggregates_of(dataset, shard_count=config.shard_count)
    mix = replace(
        base_mix,
        duration_s=duration,
        sweeps=tuple(replace(s, period_s=duration) for s in base_mix.sweeps),
    )
    plans = {s: build_plan(m, dataset) for s, m in _mixes(mix).items()}
    arrays = {s: plan_arrays(p, agg.person_index) for s, p in plans.items()}
    sample = sample_every(len(dataset.persons), by_person_sample)
    persons = [dataset.persons[int(i)] for i in sample]
    sagas = _untouched_sagas(dataset, list(plans.values()), transition_sample)
    layouts = {}
    ok = True
    for layout in LAYOUTS:
        progress(f"layouts: metered 1x, history {history_factor}x: {layout.name}")
        metered = metered_layout(
            endpoint_url, template, dataset, layout, plans, config, persons=persons, sagas=sagas
        )
        model = price_layout(
            layout,
            agg,
            arrays[layout.staggered],
            config,
            by_person_sample=sample,
            transition_sample=[s for s, _, _ in sagas],
        )
        verdict = compare(metered, model, tolerance)
        ok = ok and verdict["ok"]
        layouts[layout.name] = {"metered": metered, "synthetic": model, **verdict}
    return {
        "ok": ok,
        "scale": 1,
        "historyFactor": history_factor,
        "durationS": duration,
        "staggeredSweeps": [asdict(s) for s in _mixes(mix)[True].sweeps],
        "tolerance": tolerance,
        "byPersonSample": len(persons),
        "transitionSample": len(sagas),
        "layouts": layouts,
    }


def run(
    *,
    scales: Sequence[int] = DEFAULT_SCALES,
    history_factors: Sequence[int] = DEFAULT_HISTORY,
    duration: int = 60,
    metered_history: int | None = 10,
    metered_duration: int = 20,
    shard_count: int = 16,
    scan_segments: int = 16,
    base_spec: SeedSpec | None = None,
    base_mix: TrafficMix | None = None,
    endpoint_url: str | None = None,
    by_person_sample: int = 100,
    transition_sample: int = 30,
    tolerance: float = 0.05,
    chart_path: Path | None = RESULTS / f"{NAME}.png",
    target_scale: int = 100,
    target_history: int = 100,
    shard_ladder: Sequence[int] = DEFAULT_SHARD_LADDER,
) -> dict[str, Any]:
    """The grid of synthetic figures, and (unless metered_history is None) the metered check
    at 1x; then the sparse open-saga index's targets (bench.layouts_targets) at
    `target_scale` x persons with `target_history` x history, its shard ladder `shard_ladder`.
    `endpoint_url`: an existing server (else one is started for the run). The chart is drawn to
    `chart_path` (None: no chart)."""
    spec = base_spec or SeedSpec()
    mix = replace(base_mix or TrafficMix(), duration_s=duration)
    config = Config(shard_count=shard_count, scan_segments=scan_segments)
    started = time.monotonic()
    check: dict[str, Any] | None = None
    if metered_history is not None:
        with local_server(endpoint_url) as endpoint:
            check = metered_check(
                endpoint,
                spec,
                mix,
                config,
                history_factor=metered_history,
                duration=metered_duration,
                by_person_sample=by_person_sample,
                transition_sample=transition_sample,
                tolerance=tolerance,
            )
    rows = synthetic_grid(spec, mix, config, scales=scales, history_factors=history_factors)
    progress(f"layouts: targets at {target_scale}x, history {target_history}x")
    priced = price_target_size(
        spec, mix, scale=target_scale, history_factor=target_history, shard_counts=shard_ladder
    )
    targets = {**verdicts(priced, check), "priced": priced}
    mixes = _mixes(mix)
    result = {
        "ok": (True if check is None else check["ok"]) and targets["ok"],
        "layouts": rows,
        "check": check,
        "targets": targets,
        "config": {
            "scales": list(scales),
            "historyFactors": list(history_factors),
            "historyMeaning": "terminal sagas per open saga",
            "durationS": duration,
            "shardCount": shard_count,
            "scanSegments": scan_segments,
            "scanPagesPerSecondPerSegment": config.scan_pages_per_second_per_segment,
            "seed": asdict(spec),
            "mix": _mix_json(mixes[False]),
            "staggeredSweeps": [asdict(s) for s in mixes[True].sweeps],
            "partitionCeilings": {"rcu": 3000, "wcu": 1000},
            "targetScale": target_scale,
            "targetHistoryFactor": target_history,
            "shardLadder": list(shard_ladder),
            "layouts": {layout.name: layout.title for layout in LAYOUTS},
            "wallSeconds": round(time.monotonic() - started, 1),
        },
    }
    if chart_path is not None:
        result["chart"] = str(chart(result, chart_path))
    return result


def _mix_json(mix: TrafficMix) -> dict[str, Any]:
    data = asdict(mix)
    data["sweeps"] = [asdict(s) for s in mix.sweeps]
    return data


# ---- output -----------------------------------------------------------------------------


def render(result: dict[str, Any]) -> None:
    rows = []
    for row in result["layouts"]:
        rows.append(
            [
                f"{row['scale']}x",
                f"{row['historyFactor']}x",
                row["name"],
                pct(row["hottestShare"]),
                num(row["peakRcuPerKey"], 0),
                num(row["peakWcuPerKey"], 0),
                _times(row["headroom"]),
                _times(row["readHeadroom"]),
                _times(row["readHeadroomStaggered"]),
                num(row["enumerationRcu"], 0),
                num(row["enumerationOverOpenRows"], 1, "x"),
                str(row["requestsPerEnumeration"]),
                num(row["byPersonRcu"], 2),
                num(row["transitionWcu"], 1),
                num(row["terminalTransitionWcu"], 1),
                num(row["storageBytesPerSaga"], 0),
                num(row["pacedEnumerationSeconds"], 0, " s"),
            ]
        )
    emit(
        f"Layout lab: the ADR mix over {result['config']['durationS']} s, synthetic "
        "(history = terminal sagas per open saga)",
        [
            "scale",
            "history",
            "layout",
            "hottest share",
            "peak RCU/s/key",
            "peak WCU/s/key",
            "headroom",
            "read headroom",
            "read headroom, staggered",
            "enum RCU",
            "enum / open rows",
            "enum requests",
            "by-person RCU",
            "step WCU",
            "terminal WCU",
            "bytes/saga",
            "Scan time",
        ],
        rows,
    )
    render_drift(result["layouts"])
    render_targets(result["targets"])
    check = result.get("check")
    if not check:
        return
    rows = []
    for name, entry in check["layouts"].items():
        for figure, values in entry["figures"].items():
            rows.append(
                [
                    name,
                    figure,
                    str(values["metered"]),
                    str(values["synthetic"]),
                    pct(values["relativeDifference"]),
                    "yes" if values["agree"] else "NO",
                ]
            )
    emit(
        f"Model vs metered server run, 1x, history {check['historyFactor']}x "
        f"(tolerance {check['tolerance'] * 100:.0f} %): {'ok' if check['ok'] else 'FAILED'}",
        ["layout", "figure", "metered", "synthetic", "difference", "agree"],
        rows,
    )


def _times(value: float | None) -> str:
    """A headroom: two decimals, or three significant digits below 0.1."""
    if value is None:
        return "-"
    return f"{value:.2g}x" if value < 0.1 else f"{value:,.2f}x"


def chart(result: dict[str, Any], path: Path) -> Path:
    """Enumeration RCU and read headroom against history size, per layout, one column per
    scale (read headroom: the write side, the cohort's burst, is the same for every layout but
    legacy and would hide the enumeration's effect; the table has both)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scales = result["config"]["scales"]
    figure, axes = plt.subplots(2, len(scales), figsize=(5 * len(scales), 8), squeeze=False)
    for column, scale in enumerate(scales):
        for layout in LAYOUTS:
            points = sorted(
                (r["historyFactor"], r["enumerationRcu"], r["readHeadroom"])
                for r in result["layouts"]
                if r["name"] == layout.name and r["scale"] == scale
            )
            if not points:
                continue
            xs = [p[0] for p in points]
            axes[0][column].plot(xs, [p[1] for p in points], marker="o", label=layout.title)
            axes[1][column].plot(xs, [p[2] or 0 for p in points], marker="o", label=layout.title)
        axes[0][column].set_title(f"{scale}x dataset")
        for row, label in (
            (0, "RCU per all-open enumeration"),
            (1, "read headroom (x): 3,000 RCU/s / peak per key"),
        ):
            axis = axes[row][column]
            axis.set_xscale("log")
            axis.set_yscale("log")
            axis.set_xlabel("history: terminal sagas per open saga")
            axis.set_ylabel(label)
            axis.grid(True, which="both", alpha=0.3)
        axes[1][column].axhline(1.0, color="red", linewidth=1, linestyle="--")
    axes[0][0].legend(fontsize=8)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(","))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.layouts", description=__doc__)
    parser.add_argument("--scales", type=_ints, default=DEFAULT_SCALES)
    parser.add_argument("--history", type=_ints, default=DEFAULT_HISTORY)
    parser.add_argument("--duration", type=int, default=60, help="virtual seconds of the mix")
    parser.add_argument(
        "--metered-history",
        type=int,
        default=10,
        help="history size of the metered 1x check (0: no server run)",
    )
    parser.add_argument(
        "--target-scale", type=int, default=100, help="persons (x) of the targets' figures"
    )
    parser.add_argument(
        "--target-history", type=int, default=100, help="history (x) of the targets' figures"
    )
    parser.add_argument(
        "--shard-ladder",
        type=_ints,
        default=DEFAULT_SHARD_LADDER,
        help="the N the sparse index is priced at for the headroom target (powers of two)",
    )
    parser.add_argument("--results", type=Path, default=RESULTS, help="result directory")
    args = parser.parse_args(argv)
    result = run(
        target_scale=args.target_scale,
        target_history=args.target_history,
        shard_ladder=args.shard_ladder,
        scales=args.scales,
        history_factors=args.history,
        duration=args.duration,
        metered_history=args.metered_history or None,
        chart_path=args.results / f"{NAME}.png",
    )
    render(result)
    save(NAME, result, args.results)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
