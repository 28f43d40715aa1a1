"""The layout lab's targets for the sparse open-saga index, each with its figure and a verdict.

At the target size (100x persons, 100x history by default) the model prices the ADR layout
(N=16, as deployed) and the sparse open-saga index at N = 16, 32, 64, ... (the shard ladder:
GSI4's N and the open index's N together, since the cohort's opens write both). The targets:

- one all-open enumeration costs at most 1.5x what its open rows cost (bench.layouts_model
  open_rows_rcu: the open rows' bytes, all together, in 4 KB eventually consistent units);
- the sweeps' headroom (the smaller of read and write headroom, sweeps at their deployed
  offsets) is at least 2x at the smallest N of the ladder that reaches it: the N the lab
  recommends at that size;
- closing a saga costs at most one index write more than in the ADR layout (the open index
  entry's delete);
- a by-person read is one Query.

The per-saga figures are also judged on the metered 1x run (bench.layouts.metered_check), where
the product's code wrote and read a real server.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from bench.layouts_keys import LAYOUTS_BY_NAME, SHARD_COUNT
from bench.layouts_model import (
    Aggregates,
    Config,
    KeySpace,
    PlanArrays,
    create_cells,
    lab_mix,
    load_of,
    open_only_dataset,
    plan_arrays,
    price_layout,
    shards_of,
    synthetic_aggregates,
)
from bench.output import emit, num
from devkit.seed import SeedSpec
from devkit.traffic.mix import TrafficMix
from devkit.traffic.plan import build_plan
from saga_index.index import InvalidInputError, validate_shard_count

ENUMERATION_OVER_OPEN_ROWS_MAX = 1.5
HEADROOM_MIN = 2.0
EXTRA_CLOSE_INDEX_WRITES_MAX = 1.0
BY_PERSON_QUERIES_MAX = 1.0
DEFAULT_SHARD_LADDER = (16, 32, 64, 128)
SPARSE = LAYOUTS_BY_NAME["sparse-open-index"]
ADR = LAYOUTS_BY_NAME["adr-n16"]
ADR_STAGGERED = LAYOUTS_BY_NAME["adr-n16-staggered"]


@dataclass(frozen=True)
class Verdict:
    """One row of the targets table: the figure, where it comes from, its value, the ADR
    layout's value for the same figure (what it replaces), the target and whether it holds."""

    figure: str
    source: str
    value: float | None
    adr: float | None
    target: str
    passed: bool
    detail: str = ""


def at_most(value: float | None, limit: float) -> bool:
    return value is not None and value <= limit


def at_least(value: float | None, limit: float) -> bool:
    return value is not None and value >= limit


def shard_ladder(shard_counts: Sequence[int]) -> tuple[int, ...]:
    """The ladder's shard counts, checked: each a valid N (a power of two up to the product's
    maximum), strictly increasing, at least one."""
    if not shard_counts:
        raise InvalidInputError("the shard ladder needs at least one shard count")
    ladder = tuple(validate_shard_count(n) for n in shard_counts)
    if any(b <= a for a, b in itertools.pairwise(ladder)):
        raise InvalidInputError(f"the shard ladder must increase, got {list(ladder)}")
    return ladder


def recommended_shard_count(
    rungs: Sequence[Mapping[str, Any]], minimum: float = HEADROOM_MIN
) -> int | None:
    """The smallest N of the ladder whose staggered headroom reaches `minimum` (None: none)."""
    for rung in sorted(rungs, key=lambda r: int(r["shardCount"])):
        if at_least(rung["headroomStaggered"], minimum):
            return int(rung["shardCount"])
    return None


def binding_side(read_headroom: float | None, write_headroom: float | None) -> str:
    """Which side sets the headroom: the smaller of the two ("reads" on a tie)."""
    if write_headroom is None:
        return "reads"
    if read_headroom is None or write_headroom < read_headroom:
        return "writes"
    return "reads"


def cohort_peak_wcu(space: KeySpace, agg: Aggregates, plan: PlanArrays) -> float:
    """The highest WCU the cohort's opens alone put on one index key in one second (sparse
    layout: each open writes its GSI4 entry and its open index entry)."""
    keys_, seconds, units = create_cells(SPARSE, space, agg, plan)
    load = load_of(
        np.asarray(keys_, dtype=np.int64),
        np.asarray(seconds, dtype=np.int64),
        np.zeros(len(units)),
        np.asarray(units, dtype=np.float64),
    )
    return load.peak_wcu_per_key


def price_target_size(
    base_spec: SeedSpec,
    base_mix: TrafficMix,
    *,
    scale: int,
    history_factor: int,
    shard_counts: Sequence[int],
) -> dict[str, Any]:
    """The ADR layout (N=16, together and staggered) and the sparse layout at every N of the
    ladder, at `scale` x persons with `history_factor` terminal sagas per open one."""
    ladder = shard_ladder(shard_counts)
    dataset = open_only_dataset(base_spec, scale)
    person_index = {p: i for i, p in enumerate(dataset.persons)}
    plans = {
        staggered: plan_arrays(
            build_plan(lab_mix(base_mix, staggered=staggered).scaled(scale), dataset),
            person_index,
        )
        for staggered in (False, True)
    }

    def aggregates(shard_count: int) -> Aggregates:
        agg = synthetic_aggregates(
            dataset,
            history_factor=history_factor,
            # Other entities only weigh on a Scan; no layout priced here scans.
            other_bytes_per_scale=(0, 0),
            scale=scale,
            shards=shards_of(dataset.persons, shard_count),
        )
        agg.person_index = person_index
        return agg

    adr_agg = aggregates(SHARD_COUNT)
    adr = price_layout(ADR, adr_agg, plans[False], Config(shard_count=SHARD_COUNT))
    adr_staggered = price_layout(
        ADR_STAGGERED, adr_agg, plans[True], Config(shard_count=SHARD_COUNT), transition_sample=()
    )
    rungs = []
    sparse_at: dict[int, dict[str, Any]] = {}
    for n in ladder:
        agg = aggregates(n)
        config = Config(shard_count=n)
        together = price_layout(SPARSE, agg, plans[False], config)
        staggered = price_layout(SPARSE, agg, plans[True], config, transition_sample=())
        sparse_at[n] = together
        rungs.append(
            {
                "shardCount": n,
                "headroom": together["headroom"],
                "headroomStaggered": staggered["headroom"],
                "readHeadroomStaggered": staggered["readHeadroom"],
                "writeHeadroomStaggered": staggered["writeHeadroom"],
                "peakRcuPerKeyStaggered": staggered["peakRcuPerKey"],
                "peakWcuPerKeyStaggered": staggered["peakWcuPerKey"],
                "cohortPeakWcuPerKey": round(
                    cohort_peak_wcu(KeySpace(n, agg.persons), agg, plans[True]), 2
                ),
                "hottestKeyStaggered": staggered["hottestKey"],
                "binds": binding_side(staggered["readHeadroom"], staggered["writeHeadroom"]),
            }
        )
    recommended = recommended_shard_count(rungs)
    return {
        "scale": scale,
        "historyFactor": history_factor,
        "adr": adr,
        "adrStaggered": adr_staggered,
        "sparse": sparse_at[recommended if recommended is not None else ladder[0]],
        "sparseAtFirstRung": sparse_at[ladder[0]],
        "ladder": rungs,
        "recommendedShardCount": recommended,
    }


def _model_verdicts(sized: Mapping[str, Any]) -> list[Verdict]:
    source = f"model, {sized['scale']}x persons, {sized['historyFactor']}x history"
    adr, sparse = sized["adr"], sized["sparse"]
    recommended = sized["recommendedShardCount"]
    rung = next((r for r in sized["ladder"] if r["shardCount"] == recommended), sized["ladder"][-1])
    first = sized["ladder"][0]
    return [
        Verdict(
            "all-open enumeration / what its open rows cost",
            f"{source}, N={SHARD_COUNT}",
            sized["sparseAtFirstRung"]["enumerationOverOpenRows"],
            adr["enumerationOverOpenRows"],
            f"<= {ENUMERATION_OVER_OPEN_ROWS_MAX}x",
            at_most(
                sized["sparseAtFirstRung"]["enumerationOverOpenRows"],
                ENUMERATION_OVER_OPEN_ROWS_MAX,
            ),
            f"{num(sized['sparseAtFirstRung']['enumerationRcu'], 0)} RCU for open rows costing "
            f"{num(sized['sparseAtFirstRung']['openRowsRcu'], 0)} (ADR: "
            f"{num(adr['enumerationRcu'], 0)})",
        ),
        Verdict(
            "sweeps' headroom, sweeps staggered",
            f"{source}, N={rung['shardCount']}",
            rung["headroomStaggered"],
            sized["adrStaggered"]["headroom"],
            f">= {HEADROOM_MIN}x",
            recommended is not None and at_least(rung["headroomStaggered"], HEADROOM_MIN),
            f"recommended N={recommended}; at N={first['shardCount']} "
            f"{num(first['headroomStaggered'], 2, 'x')}, bound by {first['binds']} "
            f"(peak {num(first['peakWcuPerKeyStaggered'], 0)} WCU/s on one key, the cohort's "
            f"opens alone {num(first['cohortPeakWcuPerKey'], 0)})",
        ),
        *_per_saga_verdicts(source, sparse, adr),
    ]


def _per_saga_verdicts(
    source: str, sparse: Mapping[str, Any], adr: Mapping[str, Any]
) -> list[Verdict]:
    """Closing a saga (index writes more than the ADR layout's) and a by-person read."""
    extra = (
        None
        if sparse["terminalIndexWrites"] is None or adr["terminalIndexWrites"] is None
        else round(sparse["terminalIndexWrites"] - adr["terminalIndexWrites"], 3)
    )
    return [
        Verdict(
            "closing a saga: index writes more than adr-n16's",
            source,
            extra,
            None,
            f"<= {EXTRA_CLOSE_INDEX_WRITES_MAX:g}",
            at_most(extra, EXTRA_CLOSE_INDEX_WRITES_MAX),
            f"{num(sparse['terminalIndexWrites'], 0)} index writes, "
            f"{num(sparse['terminalTransitionWcu'], 1)} WCU (adr-n16: "
            f"{num(adr['terminalIndexWrites'], 0)}, {num(adr['terminalTransitionWcu'], 1)} WCU)",
        ),
        Verdict(
            "by-person read: queries",
            source,
            sparse["requestsPerByPerson"],
            adr["requestsPerByPerson"],
            f"<= {BY_PERSON_QUERIES_MAX:g}",
            at_most(sparse["requestsPerByPerson"], BY_PERSON_QUERIES_MAX),
            f"{num(sparse['byPersonRcu'], 2)} RCU",
        ),
    ]


def _metered_verdicts(check: Mapping[str, Any]) -> list[Verdict]:
    source = f"metered, 1x persons, {check['historyFactor']}x history"
    sparse = check["layouts"][SPARSE.name]["metered"]
    adr = check["layouts"][ADR.name]["metered"]
    return [
        Verdict(
            "all-open enumeration / what its open rows cost",
            f"{source}, N={SHARD_COUNT}",
            sparse["enumerationOverOpenRows"],
            adr["enumerationOverOpenRows"],
            f"<= {ENUMERATION_OVER_OPEN_ROWS_MAX}x",
            at_most(sparse["enumerationOverOpenRows"], ENUMERATION_OVER_OPEN_ROWS_MAX),
            f"{num(sparse['enumerationRcu'], 1)} RCU for open rows costing "
            f"{num(sparse['openRowsRcu'], 1)}",
        ),
        *_per_saga_verdicts(source, sparse, adr),
    ]


def verdicts(sized: Mapping[str, Any], check: Mapping[str, Any] | None) -> dict[str, Any]:
    """Every target's verdict, from the model at the target size and (when the metered check
    ran) from the metered 1x run; `ok` when all hold."""
    rows = _model_verdicts(sized)
    if check is not None:
        rows += _metered_verdicts(check)
    return {"ok": all(v.passed for v in rows), "verdicts": [asdict(v) for v in rows]}


def render_targets(targets: Mapping[str, Any]) -> None:
    """The shard ladder, then the targets table with its pass/fail column."""
    sized = targets["priced"]
    emit(
        f"The sparse open-saga index at {sized['scale']}x persons, {sized['historyFactor']}x "
        f"history, by N (GSI4's and the open index's): headroom with the sweeps staggered; "
        f"recommended N = {sized['recommendedShardCount']} (the smallest with >= "
        f"{HEADROOM_MIN}x)",
        [
            "N",
            "headroom",
            "headroom, staggered",
            "read headroom",
            "write headroom",
            "peak RCU/s/key",
            "peak WCU/s/key",
            "cohort's WCU/s/key",
            "binds",
        ],
        [
            [
                str(r["shardCount"]),
                num(r["headroom"], 2, "x"),
                num(r["headroomStaggered"], 2, "x"),
                num(r["readHeadroomStaggered"], 2, "x"),
                num(r["writeHeadroomStaggered"], 2, "x"),
                num(r["peakRcuPerKeyStaggered"], 0),
                num(r["peakWcuPerKeyStaggered"], 0),
                num(r["cohortPeakWcuPerKey"], 0),
                r["binds"],
            ]
            for r in sized["ladder"]
        ],
    )
    emit(
        f"Targets of the sparse open-saga index: {'all hold' if targets['ok'] else 'FAILED'}",
        ["figure", "source", "sparse index", "adr-n16", "target", "holds", "detail"],
        [
            [
                v["figure"],
                v["source"],
                num(v["value"], 3),
                num(v["adr"], 3),
                v["target"],
                "PASS" if v["passed"] else "FAIL",
                v["detail"],
            ]
            for v in targets["verdicts"]
        ],
    )
