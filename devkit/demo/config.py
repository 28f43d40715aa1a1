"""The demo's parameters, validated before a server starts."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devkit.dynalite import REPO_ROOT
from devkit.seed import SeedSpec
from devkit.traffic.mix import TrafficMix
from saga_index.index import (
    DEFAULT_SHARD_COUNT,
    MAX_SHARD_COUNT,
    MAX_WRITES_PER_SECOND,
    InvalidInputError,
    validate_shard_count,
)
from saga_index.layout_change.backfill import MAX_TOTAL_SEGMENTS

ENGINE = "dynalite behind the semantics proxy (devkit.engine)"
RAW_ENGINE = "dynalite alone (--raw-engine: no transactions, no conflicts, no per-key ceilings)"
DEFAULT_RESULTS = REPO_ROOT / "results" / "demo"
DEFAULT_TABLE = "propflow-demo"


@dataclass(frozen=True)
class DemoConfig:
    shards: int = DEFAULT_SHARD_COUNT
    seed: SeedSpec = field(default_factory=SeedSpec)
    traffic: TrafficMix = field(default_factory=TrafficMix)
    backfill_rate: float = 100.0
    backfill_segments: int = 4
    verify_sample: int = 50
    workers: int = 8
    table_name: str = DEFAULT_TABLE
    results_dir: Path = DEFAULT_RESULTS
    chart: bool = True
    # dynalite alone instead of behind the semantics proxy.
    raw_engine: bool = False
    # The port clients connect to (the proxy's, or dynalite's when raw); 0: any free one.
    port: int = 0

    @property
    def engine(self) -> str:
        return RAW_ENGINE if self.raw_engine else ENGINE

    @property
    def reshard_to(self) -> int:
        """The final act's target: every shard split in two (N -> 2N)."""
        return self.shards * 2

    def validate(self) -> DemoConfig:
        validate_shard_count(self.shards)
        if self.reshard_to > MAX_SHARD_COUNT:
            raise InvalidInputError(
                f"--shards must be at most {MAX_SHARD_COUNT // 2}: the demo's last act splits "
                f"every shard in two, and N stays at most {MAX_SHARD_COUNT}"
            )
        self.seed.validate()
        self.traffic.validate()
        # The backfill's own bounds, checked before a server starts.
        if not 0 < self.backfill_rate <= MAX_WRITES_PER_SECOND:
            raise InvalidInputError(
                f"--backfill-rate must be above 0 and at most {MAX_WRITES_PER_SECOND:g} writes/s "
                f"(one partition's write ceiling), got {self.backfill_rate:g}"
            )
        if not 1 <= self.backfill_segments <= MAX_TOTAL_SEGMENTS:
            raise InvalidInputError(
                f"--backfill-segments must be from 1 to {MAX_TOTAL_SEGMENTS}, "
                f"got {self.backfill_segments}"
            )
        if not 0 <= self.port <= 65535:
            raise InvalidInputError(f"--port {self.port} is not a port number (0..65535)")
        if self.verify_sample < 1 or self.workers < 1:
            raise InvalidInputError("--verify-sample and --workers must be >= 1")
        return self

    def to_json(self) -> dict[str, Any]:
        spec, mix = self.seed, self.traffic
        return {
            "engine": self.engine,
            "shardCount": self.shards,
            "reshardTo": self.reshard_to,
            "table": self.table_name,
            "seed": {
                "openSagas": spec.open_sagas,
                "terminalSagas": spec.terminal_sagas,
                "persons": spec.persons,
                "anomalies": spec.anomalies,
                "propertyManagers": spec.property_managers,
                "itemBytes": [spec.min_item_bytes, spec.max_item_bytes],
                "randomSeed": spec.seed,
            },
            "traffic": {
                "durationS": mix.duration_s,
                "propertyManagers": mix.property_managers,
                "pollIntervalS": list(mix.poll_interval_s),
                "sweeps": [
                    {"name": s.name, "periodS": s.period_s, "offsetS": s.offset_s}
                    for s in mix.sweeps
                ],
                "transitionsPerS": mix.transitions_per_s,
                "cohortSize": mix.cohort_size,
                "cohortPeriodS": mix.cohort_period_s,
                "inboundMessagesPerS": mix.inbound_messages_per_s,
                "readsPerMessage": mix.reads_per_message,
                "randomSeed": mix.seed,
            },
            "backfill": {
                "maxWritesPerSecond": self.backfill_rate,
                "segments": self.backfill_segments,
            },
            "verifySample": self.verify_sample,
        }
