"""The demo's report: a table for the terminal, report.json, and the per-partition load chart.

Shares are fractions of 1 in the JSON and percentages in the table. "Per key" means per
partition key value of the renewal-saga index (GSI4): in the legacy layout one key carries every
saga ("RenewalSaga"), in the sharded layout N keys ("RenewalSaga#0".."RenewalSaga#<N-1>").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from devkit.capacity.ledger import LoadSummary
from devkit.capacity.units import PARTITION_RCU_CEILING, PARTITION_WCU_CEILING
from devkit.results import markdown_table

LOAD_KEYS = ("hottestKeyShare", "peakRcuPerKey", "peakWcuPerKey", "headroom")


def layout_json(summary: LoadSummary, **extra: Any) -> dict[str, Any]:
    """One layout's load: the contract keys first, then the detail."""
    return {**summary.to_json(), **extra}


def improvement(legacy: Mapping[str, Any], sharded: Mapping[str, Any]) -> dict[str, Any]:
    """How much the sharded layout relieved the hottest key, as ratios legacy / sharded."""

    def ratio(numerator: Any, denominator: Any) -> float | None:
        if not numerator or not denominator:
            return None
        return round(float(numerator) / float(denominator), 2)

    return {
        "hottestKeyShareRatio": ratio(legacy["hottestKeyShare"], sharded["hottestKeyShare"]),
        "peakRcuPerKeyRatio": ratio(legacy["peakRcuPerKey"], sharded["peakRcuPerKey"]),
        "peakWcuPerKeyRatio": ratio(legacy["peakWcuPerKey"], sharded["peakWcuPerKey"]),
        "headroomMultiple": ratio(sharded["headroom"], legacy["headroom"]),
    }


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f} %"


def _num(value: float | None, suffix: str = "") -> str:
    if value is None:
        return "-"
    return f"{value:,.1f}{suffix}"


def render(report: Mapping[str, Any]) -> str:
    """The report as text (Markdown tables, pasteable into the README)."""
    legacy, sharded = report["legacy"], report["sharded"]
    shards = report["config"]["shardCount"]
    # (label, column header, layout): the re-shard's sharded(2N) beside sharded(N) when run.
    layouts: list[tuple[str, str, Mapping[str, Any]]] = [
        ("legacy", "legacy", legacy),
        ("sharded", f"sharded (N={shards})", sharded),
    ]
    resharded = report.get("resharded")
    if resharded is not None:
        target = report["config"].get("reshardTo", shards * 2)
        # Two sharded layouts in the per-key table: each row names its N.
        layouts[1] = (f"sharded N={shards}", layouts[1][1], sharded)
        layouts.append((f"sharded N={target}", f"sharded (N={target})", resharded))

    def row(label: str, cell: Any) -> list[str]:
        return [label, *(cell(layout) for _, _, layout in layouts)]

    rows = [
        row("partition keys carrying load", lambda x: str(x["partitionKeys"])),
        row("hottest key", lambda x: str(x["hottestKey"])),
        row("hottest key's share of index load", lambda x: _pct(x["hottestKeyShare"])),
        row("peak RCU/s on one key", lambda x: _num(x["peakRcuPerKey"])),
        row("peak WCU/s on one key", lambda x: _num(x["peakWcuPerKey"])),
        row(
            f"headroom to {PARTITION_RCU_CEILING:,.0f} RCU/s",
            lambda x: _num(x["readHeadroom"], "x"),
        ),
        row(
            f"headroom to {PARTITION_WCU_CEILING:,.0f} WCU/s",
            lambda x: _num(x["writeHeadroom"], "x"),
        ),
        row("headroom (the smaller)", lambda x: _num(x["headroom"], "x")),
        row("index RCU / WCU consumed", _units),
        row(
            "requests per by-person read",
            lambda x: _num(x["replay"].get("requestsPerByPersonRead")),
        ),
        row(
            "requests per all-open enumeration",
            lambda x: _per(x["replay"], "enumerationRequests", "enumerations"),
        ),
        row("drift run: RCU, peak per key", _drift_run),
    ]
    lines = [
        f"Load on the renewal-saga index (GSI4) during {report['config']['traffic']['durationS']}"
        " s of the same traffic, capacity computed from item sizes by DynamoDB's rules:",
        "",
        markdown_table(["", *(header for _, header, _ in layouts)], rows),
        "",
    ]
    per_key = _per_key_rows(layouts)
    lines += [
        "Peak load per partition key of the index:",
        "",
        markdown_table(
            ["layout", "partition key", "peak RCU/s", "peak WCU/s", "share of load"], per_key
        ),
        "",
    ]
    gain = report["improvement"]
    if gain.get("headroomMultiple"):
        lines.append(
            f"Sharding multiplied the headroom of the hottest partition by "
            f"{gain['headroomMultiple']:.1f} (the ADR expects about {shards})."
        )
    lines.append(_backfill_line(report["backfill"]))
    parity = report["parity"]
    drift = report.get("drift", {})
    lines.append(
        f"Parity: {'identical' if parity['ok'] else 'MISMATCH'} "
        f"({parity.get('summary', '')}); drift after the cutover: "
        f"{'clean' if drift.get('healthy') else 'NOT clean'} "
        f"(legacy rows {drift.get('legacyRows')}, misrouted {drift.get('misroutedRows')}, "
        f"unindexed {drift.get('unindexedRows')})."
    )
    lines.extend(_reshard_lines(report))
    lines.extend(_open_index_lines(report))
    lines.extend(_cutover_lines(report))
    return "\n".join(lines) + "\n"


def _per_key_rows(layouts: Sequence[tuple[str, str, Mapping[str, Any]]]) -> list[list[str]]:
    """Each layout's index keys in shard order: peaks and share of that layout's load."""
    per_key = []
    for label, _, layout in layouts:
        total = layout["totalRcu"] + layout["totalWcu"]
        ordered = sorted(layout["partitions"], key=lambda p: _shard_order(p["partitionKey"]))
        for partition in ordered:
            share = (partition["totalRcu"] + partition["totalWcu"]) / total if total else None
            per_key.append(
                [
                    label,
                    partition["partitionKey"],
                    _num(partition["peakRcu"]),
                    _num(partition["peakWcu"]),
                    _pct(share),
                ]
            )
    return per_key


def _backfill_line(backfill: Mapping[str, Any]) -> str:
    return (
        "Backfill: {restamped} re-stamped, {skipped} skipped, {anomalies} anomalies "
        "({repaired} repaired onto their write key; a second pass re-stamped {second} and "
        "recorded the completion), {scanned} rows scanned, "
        "{rate} rows/s against a cap of {cap}/s; peak {wcu} WCU/s on the legacy index key.".format(
            restamped=backfill["restamped"],
            skipped=backfill["skipped"],
            anomalies=backfill["anomalies"],
            repaired=backfill.get("repaired", 0),
            second=backfill.get("secondPass", {}).get("restamped", 0),
            scanned=backfill.get("scanned", "?"),
            rate=_num(backfill.get("rowsPerSecond")),
            cap=_num(backfill.get("maxWritesPerSecond")),
            wcu=_num(backfill.get("legacyKeyPeakWcu")),
        )
    )


def _reshard_lines(report: Mapping[str, Any]) -> list[str]:
    """The re-shard's move, parity and drift, when the report has them."""
    act = report.get("reshard")
    if not act:
        return []
    moved, parity, drift = act["backfill"], act["parity"], act["drift"]
    lines = [
        "Re-shard N={n} -> N={m} (`phase set resharding --shards {m}`, backfill, `phase set "
        "sharded`): {moved} of {rows} saga rows moved ({share}), {seconds} at {rate} rows/s "
        "against a cap of {cap}/s; `--shards {bad}` refused (exit {code}).".format(
            n=act["fromShards"],
            m=act["toShards"],
            moved=moved["moved"],
            rows=moved["sourceRows"],
            share=_pct(moved["movedShare"]),
            seconds=_num(moved["seconds"], " s"),
            rate=_num(moved.get("rowsPerSecond")),
            cap=_num(moved.get("maxWritesPerSecond")),
            bad=act["refusedShardCount"]["shards"],
            code=act["refusedShardCount"]["exitCode"],
        ),
        f"Parity: {'identical' if parity['ok'] else 'MISMATCH'} ({parity.get('summary', '')}); "
        f"drift after the re-shard: {'clean' if drift.get('healthy') else 'NOT clean'} "
        f"(misrouted {drift.get('misroutedRows')}, shard skew {drift.get('shardSkew')} over "
        f"{len(drift.get('rowsPerShard') or [])} shards).",
    ]
    gain = report.get("reshardImprovement") or {}
    if gain.get("headroomMultiple"):
        lines.append(
            f"Splitting every shard in two multiplied the headroom of the hottest partition by "
            f"{gain['headroomMultiple']:.2f} (at most 2)."
        )
    return lines


def _open_index_lines(report: Mapping[str, Any]) -> list[str]:
    """The open-saga index's act: the sweeps' read units before and after, when run."""
    act = report.get("openIndex")
    if not act:
        return []
    before, after = act["before"], act["after"]
    rows = [
        [
            label,
            side["reads"],
            _num(side["rcuPerEnumeration"]),
            _num(side["requestsPerEnumeration"]),
            str(side["openSagas"]),
        ]
        for label, side in (("before (open index off)", before), ("after (open)", after))
    ]
    stamped = act["backfill"]["run"]
    return [
        "",
        f"The sweeps' all-open enumerations, metered, before and after the open-saga index was "
        f"added live (`open-index set adding`, `open-index backfill`: {stamped['stamped']} "
        f"stamped, `open-index set open`) with the traffic running:",
        "",
        markdown_table(
            ["sweeps", "read", "RCU per enumeration", "requests per enumeration", "open sagas"],
            rows,
        ),
        "",
        f"The open index cut the sweeps' read units by {act['rcuRatio']:.1f}x; the same open "
        f"sagas both times.",
    ]


def _cutover_lines(report: Mapping[str, Any]) -> list[str]:
    """The refused early `phase set sharded` and the record's history, when the report has them."""
    lines: list[str] = []
    refused = report.get("refusedSharded")
    if refused:
        failed = ", ".join(check["name"] for check in refused["failed"])
        lines.append(
            f"`phase set sharded` before the backfill: refused (exit {refused.get('exitCode')}; "
            f"failed: {failed}); nothing was written."
        )
    history = report.get("phaseHistory")
    if history:
        lines.append(
            "Phase history (the control record, every change by `saga-index phase set` or "
            "`open-index set`):"
        )
        for item in history:
            passed = ", ".join(item["checksPassed"]) or "none needed"
            forced = f"; FORCED: {', '.join(item['checksForced'])}" if item["checksForced"] else ""
            lines.append(
                f"- v{item['version']} {_change(item)} at {item['changedAt']} by "
                f"{item['changedBy']}: {item['reason']} (checks passed: {passed}{forced})"
            )
    return lines


def _drift_run(layout: Mapping[str, Any]) -> str:
    """One drift-guard run's index reads (every 5 minutes), at its per-key pace."""
    run = layout.get("driftGuard")
    if not run:
        return "-"
    return f"{run['rcu']:,.1f} / {run['peakRcuPerKey']:,.1f}"


def _units(layout: Mapping[str, Any]) -> str:
    return f"{layout['totalRcu']:,.0f} / {layout['totalWcu']:,.0f}"


def _per(replay: Mapping[str, Any], numerator: str, denominator: str) -> str:
    count = replay.get(denominator) or 0
    return f"{replay.get(numerator, 0) / count:.1f}" if count else "-"


def parity_summary(document: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of one `saga-index verify --json` document the report keeps."""
    return {
        "ok": document["ok"],
        "phase": document["phase"],
        "truthRows": document["truthRows"],
        "reads": document["reads"],
        "counts": document["counts"],
        "comparedWithSnapshot": document["comparedWithSnapshot"],
        "findings": {
            kind: document[kind][:10] for kind in ("missing", "extra", "misrouted", "changed")
        },
    }


def drift_summary(document: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of one `saga-index drift --json` document the report keeps."""
    return {
        "healthy": document["healthy"],
        "phase": document["phase"],
        "legacyRows": document["legacyRows"],
        "misroutedRows": document["misroutedRows"],
        "unindexedRows": document["unindexedRows"],
        "strayRows": document["strayRows"],
        "rowsPerShard": document["rowsPerShard"],
        "shardSkew": round(document["shardSkew"], 3),
    }


def write_chart(
    legacy: LoadSummary,
    sharded: LoadSummary,
    path: Path,
    *,
    resharded: LoadSummary | None = None,
    timelines: Mapping[str, Mapping[int, float]] | None = None,
    title: str | None = None,
) -> Path:
    """Peak RCU/s and WCU/s per partition key, legacy beside sharded (and beside the re-shard's
    layout when given), on a log scale with the per-partition ceilings drawn in; with
    `timelines` (layout -> its hottest key's RCU per second of the replay), a third panel draws
    them second by second, measured, and at 100x the rows (every read page 100x larger: the
    all-open enumerations of the sweeps grow with the rows) beside them, so the burst that
    crosses the ceiling shows."""
    import matplotlib

    matplotlib.use("Agg")  # no display: render straight to a file
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    series: list[tuple[LoadSummary, str, str]] = [
        (legacy, "#c0392b", f"legacy: 1 key, headroom {_num(legacy.headroom, 'x')}"),
        (
            sharded,
            "#2e86c1",
            f"sharded: {len(sharded.partitions)} keys, headroom {_num(sharded.headroom, 'x')}",
        ),
    ]
    if resharded is not None:
        series.append(
            (
                resharded,
                "#27ae60",
                f"re-sharded: {len(resharded.partitions)} keys, "
                f"headroom {_num(resharded.headroom, 'x')}",
            )
        )
    width = (13 if resharded is None else 18) + (7 if timelines else 0)
    figure, all_axes = plt.subplots(
        1, 3 if timelines else 2, figsize=(width, 5.2), constrained_layout=True
    )
    axes = all_axes[:2]
    if timelines:
        _timeline_panel(all_axes[2], timelines)
    panels = (
        ("peak RCU/s per partition key", "peak_rcu", PARTITION_RCU_CEILING, "RCU"),
        ("peak WCU/s per partition key", "peak_wcu", PARTITION_WCU_CEILING, "WCU"),
    )
    for axis, (label, attribute, ceiling, unit) in zip(axes, panels, strict=True):
        names: list[str] = []
        values: list[float] = []
        colours: list[str] = []
        for summary, colour, _ in series:
            for load in sorted(summary.partitions, key=lambda p: _shard_order(p.partition_key)):
                names.append(load.partition_key)
                values.append(max(getattr(load, attribute), 0.01))
                colours.append(colour)
        positions = list(range(len(names)))
        axis.bar(positions, values, color=colours)
        axis.axhline(ceiling, color="black", linestyle="--", linewidth=1)
        axis.text(
            len(names) - 0.5,
            ceiling * 1.08,
            f"per-partition ceiling {ceiling:,.0f} {unit}/s",
            ha="right",
            fontsize=8,
        )
        axis.set_yscale("log")
        axis.set_ylim(bottom=0.5, top=ceiling * 2.5)
        axis.set_xticks(positions)
        axis.set_xticklabels(
            [n.replace("RenewalSaga", "RS") for n in names], rotation=70, fontsize=7
        )
        axis.set_title(label)
        axis.set_xlabel("GSI4PK value (RS = RenewalSaga)")
        axis.set_ylabel(f"{unit}/s (log scale)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=colour) for _, colour, _ in series]
    figure.legend(
        handles,
        [label for _, _, label in series],
        loc="upper center",
        ncol=len(series),
        bbox_to_anchor=(0.5, 1.12),
    )
    if title:
        figure.suptitle(title, y=1.18)
    figure.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(figure)
    return path


# The dataset scale the third panel sets beside the measured one.
TIMELINE_SCALE = 100
_TIMELINE_COLOURS = ("#c0392b", "#2e86c1", "#27ae60")


def _timeline_panel(axis: Any, timelines: Mapping[str, Mapping[int, float]]) -> None:
    """Each layout's hottest key, RCU per virtual second: measured (solid) and at
    TIMELINE_SCALE x the rows (dashed), against the per-partition read ceiling."""
    for (label, series), colour in zip(timelines.items(), _TIMELINE_COLOURS, strict=False):
        seconds = sorted(series)
        values = [max(series[s], 0.01) for s in seconds]
        axis.plot(seconds, values, color=colour, linewidth=1.2, label=f"{label}, measured (1x)")
        axis.plot(
            seconds,
            [v * TIMELINE_SCALE for v in values],
            color=colour,
            linewidth=1.0,
            linestyle="--",
            label=f"{label}, {TIMELINE_SCALE}x the rows (linear)",
        )
        peak = max(seconds, key=lambda s: series[s], default=None)
        if peak is not None and series[peak] * TIMELINE_SCALE > PARTITION_RCU_CEILING:
            axis.annotate(
                f"throttled: {series[peak] * TIMELINE_SCALE:,.0f} RCU in second {peak}",
                (peak, series[peak] * TIMELINE_SCALE),
                textcoords="offset points",
                xytext=(8, 4),
                fontsize=7,
                color=colour,
            )
    axis.axhline(PARTITION_RCU_CEILING, color="black", linestyle="--", linewidth=1)
    axis.text(0, PARTITION_RCU_CEILING * 1.15, "per-partition ceiling 3,000 RCU/s", fontsize=8)
    axis.set_yscale("log")
    # Below one unit a second is an idle second: not what the panel is about.
    axis.set_ylim(bottom=1)
    axis.set_title("the hottest key, second by second (the sweeps' bursts)")
    axis.set_xlabel("virtual second of the replay")
    axis.set_ylabel("RCU in that second (log scale)")
    axis.legend(fontsize=7, loc="lower right")


def _shard_order(partition_key: str) -> tuple[int, str]:
    _, _, suffix = partition_key.rpartition("#")
    return (int(suffix), partition_key) if suffix.isdigit() else (-1, partition_key)


def _change(item: dict[str, Any]) -> str:
    """What a history item moved (`openIndex off -> adding(16)` for an open index move); a
    report written before items carried `change` names the phases."""
    return str(item.get("change") or f"{item['from']} -> {item['to']}")
