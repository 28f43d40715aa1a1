"""What `drift` and `verify` share: their base-table scan's options and its progress, on stderr
only (stdout stays the report). The ETA's total is the table's ItemCount, which DynamoDB updates
about every six hours: approximate. docs/cli.md, progress of the long scans."""

from __future__ import annotations

import logging

import click
from botocore.exceptions import BotoCoreError, ClientError

from saga_index.store.dynamo import PageRead
from saga_index_cli.context import CliContext, is_table_missing
from saga_index_cli.options import FiniteFloatRange
from saga_index_cli.progress import LiveProgress, ProgressStep

log = logging.getLogger("saga_index.cli")


scan_rate_option = click.option(
    "--scan-rate",
    type=FiniteFloatRange(min=1, max=40_000),
    default=400.0,
    show_default=True,
    help="Read capacity units per second the base-table scan may use (average).",
)
segments_option = click.option(
    "--segments",
    type=click.IntRange(1, 64),
    default=4,
    show_default=True,
    help="Parallel Scan segments.",
)


def table_item_count(cli: CliContext, table: str) -> int | None:
    """The table's ItemCount (DescribeTable): the base-table scan's total for an ETA.

    Approximate: DynamoDB updates it about every six hours. None (no ETA) when DynamoDB reports
    no count or 0, or refuses the call (a warning says why); a missing table is raised, as the
    command's own reads would meet it.
    """
    try:
        count = cli.client.describe_table(TableName=table)["Table"].get("ItemCount")
    except ClientError as err:
        if is_table_missing(err):
            raise
        log.warning("no ETA for the base-table scan: DescribeTable of %r failed: %s", table, err)
        return None
    except BotoCoreError as err:
        log.warning("no ETA for the base-table scan: DescribeTable of %r failed: %s", table, err)
        return None
    if not isinstance(count, int) or count <= 0:
        log.info("no ETA for the base-table scan: DescribeTable reports no item count yet")
        return None
    log.info(
        "the base-table scan's ETA is reckoned against the table's ItemCount, about %d items "
        "(DescribeTable; DynamoDB updates it about every six hours, so the ETA is approximate)",
        count,
    )
    return int(count)


class ScanProgress:
    """The base-table scan as a progress step: items DynamoDB examined (what ItemCount counts)
    of the table's ItemCount, the saga rows among them and the read units spent. The step
    starts at `begin()` (or the first page); the scanner calls it one page at a time."""

    def __init__(self, display: LiveProgress, label: str, *, total: int | None, cap: float) -> None:
        self._display = display
        self._label = label
        self._total = total
        self._cap = cap
        self._step: ProgressStep | None = None
        self.scanned = 0
        self.rows = 0
        self.read_units = 0.0

    def begin(self) -> ProgressStep:
        if self._step is None:
            self._step = self._display.step(
                self._label, total=self._total, unit="rows", approximate=True
            )
        return self._step

    def __call__(self, page: PageRead) -> None:
        step = self.begin()
        self.scanned += page.scanned
        self.rows += page.rows
        self.read_units += page.read_units
        step.update(
            completed=self.scanned,
            detail=f"{self.rows:,} saga rows, {self.read_units:,.0f} RCU spent "
            f"(cap {self._cap:g}/s)",
        )

    def finish(self) -> None:
        if self._step is not None:
            self._step.finish()


class IndexReadsProgress:
    """Drift's index reads (the legacy key's COUNT, then each partition) as a progress step."""

    def __init__(self, display: LiveProgress, then: ScanProgress) -> None:
        self._step = display.step("index reads", total=None, unit="partitions")
        self._then = then

    def __call__(self, done: int, total: int) -> None:
        self._step.update(completed=done, total=total)
        if done == total:
            self._step.finish()
            self._then.begin()


class RepositoryReadsProgress:
    """Verify's repository reads (all-sagas, open-sagas, one per sampled person) as a progress
    step, started when the reads start (the scan before them then ends)."""

    def __init__(self, display: LiveProgress, *, after: ScanProgress) -> None:
        self._display = display
        self._after = after
        self._step: ProgressStep | None = None

    def __call__(self, done: int, total: int) -> None:
        if self._step is None:
            self._after.finish()
            self._step = self._display.step("repository reads", total=total, unit="reads")
        self._step.update(completed=done, total=total)
        if done == total:
            self._step.finish()
