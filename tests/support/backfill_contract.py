"""The backfill's behaviour, as one suite run against every backend (moto and dynalite).

A subclass provides the `dynamo` fixture (a fresh table built from the synthesised template).
"""

from __future__ import annotations

import random
import threading
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from saga_index.index import keys, names
from saga_index.index.layout import Layout
from saga_index.index.names import CONTROL_PK, FENCE_PK_PREFIX
from saga_index.layout_change.backfill import BackfillRequest
from saga_index.layout_change.backfill.local import LocalRun, run_backfill
from saga_index.layout_change.backfill.move import Move
from saga_index.layout_change.backfill.pacing import SegmentThrottledError, TokenBucket
from saga_index.layout_change.backfill.readback import finish_backfill
from saga_index.layout_change.backfill.segment import run_segment
from saga_index.layout_change.backfill.summary import BackfillSummary
from saga_index.layout_change.backfill.wire import RunTicket
from saga_index.layout_change.record.phase import layouts_for_phase
from saga_index.layout_change.record.routing import Routing
from saga_index.layout_change.record.state import BackfillDirection, ControlState
from saga_index.store.dynamo.client import attach_throttle_observer
from saga_index.store.dynamo.codec import deserialize
from saga_index.store.writer import SagaWriter
from saga_index_cli.backfill.output import EXIT_CLEAN, exit_code
from tests.support.backends import Backend
from tests.support.control_seed import CHANGED_AT, seed_state
from tests.support.faults import ThrottleInjector
from tests.support.pace_time import PaceTime

N = 16
FAST = 1000.0  # writes/s: the cap is measured by bench/backfill_rate.py, not here
VALID = [f"s{n:02}" for n in range(24)]
ANOMALIES = ["no-person", "empty-person", "numeric-person", "foreign-sort-key"]


def seed(dynamo: Backend, valid: list[str] = VALID) -> None:
    """Legacy sagas with attributes of every type, four anomalies, and rows of other entities
    (one of them even carries the legacy GSI4 key)."""
    for n, saga_id in enumerate(valid):
        dynamo.put_saga(
            saga_id,
            f"person-{n % 17}",
            opened_at=f"2026-01-{n % 28 + 1:02}T00:00:00.000Z",
            state="OPENED" if n % 3 else "SIGNED",
            score=Decimal(n) / 4,
            tags={"a", f"t{n}"},
            blob=bytes([n, 0, 255]),
            nested={"list": [1, "x", None, True], "map": {"k": Decimal("1.5")}},
        )
    dynamo.put_saga("no-person", None, GSI4SK="#2026-01-01T00:00:00.000Z")
    dynamo.put_saga("empty-person", "")
    dynamo.put_saga("numeric-person", 42)
    dynamo.put_saga("foreign-sort-key", "p-a", GSI4SK="p-b#2026-01-01T00:00:00.000Z")
    dynamo.client.put_item(
        TableName=dynamo.table_name,
        Item={"PK": {"S": "PERSON#p-1"}, "SK": {"S": "PROFILE"}, "entityType": {"S": "Person"}},
    )
    dynamo.client.put_item(
        TableName=dynamo.table_name,
        Item={
            "PK": {"S": "LEASE#l-1"},
            "SK": {"S": "META"},
            "entityType": {"S": "Lease"},
            "GSI4PK": {"S": keys.LEGACY_GSI4PK},
            "GSI4SK": {"S": "l-1#2026-01-01T00:00:00.000Z"},
        },
    )


def request(
    direction: str = "forward", *, dry_run: bool = False, segments: int = 4, rate: float = FAST
) -> BackfillRequest:
    return BackfillRequest(
        direction=BackfillDirection(direction),
        total_segments=segments,
        max_writes_per_second=rate,
        dry_run=dry_run,
    )


def ticket(direction: str = "forward") -> RunTicket:
    """The run of these tests: legacy <-> sharded(N), outside any control record (the lease
    and the record are tested in tests/component/test_backfill_lease.py)."""
    return RunTicket.unleased(Move.between_legacy_and(direction, N), holder="contract")


def backfill(
    dynamo: Backend,
    direction: str = "forward",
    *,
    dry_run: bool = False,
    segments: int = 4,
    client: Any = None,
    stop: threading.Event | None = None,
) -> tuple[LocalRun, BackfillSummary]:
    client = client or dynamo.client
    req = request(direction, dry_run=dry_run, segments=segments)
    run_ticket = ticket(direction)
    run = run_backfill(client, dynamo.table_name, req, run=run_ticket, stop=stop)
    summary = finish_backfill(
        client,
        dynamo.table_name,
        req,
        run.results,
        index_name=names.INDEX_NAME,
        move=run_ticket.move(),
    )
    return run, summary


def sagas(dynamo: Backend) -> dict[str, dict[str, Any]]:
    return {
        item["sagaId"]: item
        for item in (deserialize(raw) for raw in dynamo.scan_all())
        if item.get("entityType") == keys.ENTITY_TYPE
    }


def assert_every_valid_saga_on_its_shard(dynamo: Backend, shard_count: int = N) -> None:
    for saga_id, item in sagas(dynamo).items():
        if keys.person_anomaly(item) is None:
            want = keys.shard_gsi4pk_for_person(item["personId"], shard_count)
            assert item["GSI4PK"] == want, f"{saga_id} is on {item['GSI4PK']}, not {want}"


def reshard(
    dynamo: Backend, source: int, target: int, *, stop: threading.Event | None = None
) -> tuple[LocalRun, BackfillSummary]:
    """A forward run sharded(source) -> sharded(target), outside any control record."""
    move = Move(BackfillDirection.FORWARD, Layout.sharded(source), Layout.sharded(target))
    req = request(segments=2)
    run = run_backfill(
        dynamo.client,
        dynamo.table_name,
        req,
        run=RunTicket.unleased(move, holder="contract"),
        stop=stop,
    )
    summary = finish_backfill(
        dynamo.client, dynamo.table_name, req, run.results, index_name=names.INDEX_NAME, move=move
    )
    return run, summary


def split_movers(dynamo: Backend, source: int, target: int) -> list[str]:
    """The valid sagas whose key differs between the two layouts (the ones a re-shard moves)."""
    return [
        saga_id
        for saga_id, item in sagas(dynamo).items()
        if keys.person_anomaly(item) is None
        and keys.shard_gsi4pk_for_person(item["personId"], source)
        != keys.shard_gsi4pk_for_person(item["personId"], target)
    ]


def without_gsi4pk(raw: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in raw.items() if k != "GSI4PK"}


class BackfillContract:
    # moto's in-process stub applies a request even when an earlier before-send handler (the
    # fault injector) answers it, so there an injected throttle is an AMBIGUOUS write: applied,
    # yet reported throttled, as on AWS when a write times out after it took effect. The
    # retry's condition then fails and the row counts as skipped. On a real server process
    # an injected throttle never reaches the server.
    injected_throttles_apply_the_write = False

    # ---- the round trip ---------------------------------------------------------------------

    def test_forward_then_rollback_leaves_the_table_byte_identical(self, dynamo: Backend) -> None:
        # Given a table of legacy sagas, anomalies and other entities
        seed(dynamo)
        before = dynamo.scan_all()
        # When the backfill runs forward
        run, forward = backfill(dynamo, "forward")
        # Then every valid saga moved to its shard, and only GSI4PK changed
        assert run.complete
        assert forward.verified
        assert forward.restamped == len(VALID)
        assert_every_valid_saga_on_its_shard(dynamo)
        middle = dynamo.scan_all()
        assert [without_gsi4pk(r) for r in middle] == [without_gsi4pk(r) for r in before]
        # When it runs back
        run, rollback = backfill(dynamo, "rollback")
        # Then the table is exactly what it was: GSI4PK is "RenewalSaga" again
        assert run.complete
        assert rollback.verified
        assert rollback.restamped == len(VALID)
        assert dynamo.scan_all() == before
        assert {s["GSI4PK"] for s in sagas(dynamo).values()} == {keys.LEGACY_GSI4PK}

    def test_every_row_is_read_by_exactly_one_segment(self, dynamo: Backend) -> None:
        seed(dynamo)
        total_rows = len(dynamo.scan_all())
        run, summary = backfill(dynamo, dry_run=True, segments=7)
        assert len(run.results) == 7
        assert summary.scanned == total_rows
        assert summary.would_restamp == len(VALID)

    # ---- what is never written ---------------------------------------------------------------

    def test_dry_run_writes_nothing_and_counts_what_would_move(self, dynamo: Backend) -> None:
        seed(dynamo)
        before = dynamo.scan_all()
        writes: list[str] = []
        dynamo.client.meta.events.register(
            "before-call.dynamodb.UpdateItem", lambda **_: writes.append("write")
        )
        _run, summary = backfill(dynamo, dry_run=True)
        assert writes == []
        assert dynamo.scan_all() == before
        assert (summary.would_restamp, summary.restamped, summary.anomalies) == (
            len(VALID),
            0,
            len(ANOMALIES),
        )
        assert summary.verification is not None
        assert summary.verification.ok
        assert summary.verification.remaining >= len(VALID)

    def test_rows_of_other_entity_types_are_untouched(self, dynamo: Backend) -> None:
        seed(dynamo)
        others = [r for r in dynamo.scan_all() if r["entityType"]["S"] != keys.ENTITY_TYPE]
        backfill(dynamo, "forward")
        after = [r for r in dynamo.scan_all() if r["entityType"]["S"] != keys.ENTITY_TYPE]
        assert after == others
        assert len(others) == 2

    def test_anomalies_are_reported_by_table_key_and_left_alone(self, dynamo: Backend) -> None:
        seed(dynamo)
        before = {r["PK"]["S"]: r for r in dynamo.scan_all()}
        _, summary = backfill(dynamo, "forward")
        assert summary.anomalies == len(ANOMALIES)
        assert sorted(k["PK"] for k in summary.anomaly_keys) == sorted(
            f"RSAGA#{s}" for s in ANOMALIES
        )
        assert all(k["SK"] == "META" for k in summary.anomaly_keys)
        after = {r["PK"]["S"]: r for r in dynamo.scan_all()}
        for saga_id in ANOMALIES:
            assert after[f"RSAGA#{saga_id}"] == before[f"RSAGA#{saga_id}"]
        assert summary.verification is not None
        assert summary.verification.remaining_anomalies == len(ANOMALIES)
        assert summary.verification.remaining_other_entities == 1  # the Lease row
        assert summary.anomalies_remain

    def test_a_second_run_finds_nothing_to_do(self, dynamo: Backend) -> None:
        seed(dynamo)
        backfill(dynamo, "forward")
        after_first = dynamo.scan_all()
        _, again = backfill(dynamo, "forward")
        assert (again.restamped, again.skipped) == (0, 0)
        assert again.anomalies == len(ANOMALIES)
        assert dynamo.scan_all() == after_first

    # ---- concurrent writers --------------------------------------------------------------------

    def test_a_writer_acting_between_read_and_write_always_wins(self, dynamo: Backend) -> None:
        # Given legacy sagas, and writers that act right after the backfill's Scan read them
        seed(dynamo, VALID[:8])
        writer = SagaWriter(
            dynamo.new_client(),
            dynamo.table_name,
            plan=Routing.for_phase("migrating", N),
        )
        other = dynamo.new_client()
        table_key = {
            s: {"PK": {"S": f"RSAGA#{s}"}, "SK": {"S": "META"}}
            for s in ("s02", "s03", "s04", "s05")
        }
        acted: list[str] = []

        def after_the_read(**_: Any) -> None:
            if acted:
                return
            acted.append("read")
            # a new saga in the migrating phase (lands on its shard)
            writer.create_saga(
                saga_id="new-1",
                person_id="p-new",
                lease_id="L-new",
                opened_at="2026-03-01T00:00:00.000Z",
            )
            # a transition: moves s01 to its shard and changes its state
            writer.transition(
                saga_id="s01",
                person_id="person-1",
                to_state="PREPARING",
                updated_at="2026-03-02T00:00:00.000Z",
            )
            # an update of another attribute: s02 stays on the legacy key
            other.update_item(
                TableName=dynamo.table_name,
                Key=table_key["s02"],
                UpdateExpression="SET note = :n",
                ExpressionAttributeValues={":n": {"S": "written between read and write"}},
            )
            # a deletion
            other.delete_item(TableName=dynamo.table_name, Key=table_key["s03"])
            # the person changed: the shard computed from the read is wrong now
            other.update_item(
                TableName=dynamo.table_name,
                Key=table_key["s04"],
                UpdateExpression="SET personId = :p, GSI4SK = :sk",
                ExpressionAttributeValues={
                    ":p": {"S": "p-moved"},
                    ":sk": {"S": "p-moved#2026-01-05T00:00:00.000Z"},
                },
            )

        def after_a_write(**_: Any) -> None:
            if "write" in acted:
                return
            acted.append("write")
            other.update_item(
                TableName=dynamo.table_name,
                Key=table_key["s05"],
                UpdateExpression="SET note = :n",
                ExpressionAttributeValues={":n": {"S": "written during the backfill"}},
            )

        dynamo.client.meta.events.register("after-call.dynamodb.Scan", after_the_read)
        dynamo.client.meta.events.register("after-call.dynamodb.UpdateItem", after_a_write)
        # When one segment reads all rows, then re-stamps them
        run, first = backfill(dynamo, "forward", segments=1)
        # Then every row the writers touched is as they left it
        rows = sagas(dynamo)
        assert "s03" not in rows, "a deleted row was re-created"
        assert rows["s01"]["state"] == "PREPARING"
        assert rows["s02"]["note"] == "written between read and write"
        assert rows["s05"]["note"] == "written during the backfill"
        assert rows["new-1"]["GSI4PK"] == keys.shard_gsi4pk_for_person("p-new", N)
        # s01 (moved), s03 (deleted) and s04 (new person) failed their condition: skipped
        assert first.skipped == 3
        assert first.restamped == len(VALID[:8]) - 3
        # and the verification catches the one row left on the legacy key
        assert run.complete
        assert not first.verified
        assert first.verification is not None
        assert first.verification.unexpected_keys == [{"PK": "RSAGA#s04", "SK": "META"}]
        # When the backfill runs again
        _, second = backfill(dynamo, "forward", segments=1)
        # Then it converges: every row on its correct key
        assert second.verified
        assert second.restamped == 1
        assert_every_valid_saga_on_its_shard(dynamo)
        assert sagas(dynamo)["s04"]["GSI4PK"] == keys.shard_gsi4pk_for_person("p-moved", N)

    def test_a_concurrent_writer_thread_loses_nothing(self, dynamo: Backend) -> None:
        seed(dynamo, VALID)
        writer = SagaWriter(
            dynamo.new_client(),
            dynamo.table_name,
            plan=Routing.for_phase("migrating", N),
        )
        other = dynamo.new_client()
        rng = random.Random(7)
        expected_notes: dict[str, str] = {}
        deleted: set[str] = set()
        created: list[str] = []
        done = threading.Event()

        def write_while_the_backfill_runs() -> None:
            for n in range(40):
                saga_id = rng.choice(VALID)
                action = n % 4
                if saga_id in deleted:
                    continue
                table_key = {"PK": {"S": f"RSAGA#{saga_id}"}, "SK": {"S": "META"}}
                if action == 0:
                    note = f"note-{n}"
                    other.update_item(
                        TableName=dynamo.table_name,
                        Key=table_key,
                        UpdateExpression="SET note = :n",
                        ExpressionAttributeValues={":n": {"S": note}},
                    )
                    expected_notes[saga_id] = note
                elif action == 1 and n % 8 == 1:
                    other.delete_item(TableName=dynamo.table_name, Key=table_key)
                    deleted.add(saga_id)
                    expected_notes.pop(saga_id, None)
                elif action == 2:
                    created.append(f"new-{n}")
                    writer.create_saga(
                        saga_id=f"new-{n}",
                        person_id=f"p-new-{n}",
                        lease_id="L",
                        opened_at="2026-04-01T00:00:00.000Z",
                    )
            done.set()

        thread = threading.Thread(target=write_while_the_backfill_runs)
        slow = request("forward", segments=2, rate=200)
        thread.start()
        run = run_backfill(dynamo.client, dynamo.table_name, slow, run=ticket())
        thread.join(timeout=30)
        assert done.is_set()
        assert run.complete
        # A writer may have changed a row after the Scan read it: a re-run converges.
        backfill(dynamo, "forward")
        rows = sagas(dynamo)
        assert deleted.isdisjoint(rows), "a deleted row was re-created"
        assert set(created) <= set(rows)
        for saga_id, note in expected_notes.items():
            assert rows[saga_id]["note"] == note
        assert_every_valid_saga_on_its_shard(dynamo)

    # ---- throttles ----------------------------------------------------------------------------

    def test_throttled_writes_are_retried_slow_the_bucket_and_lose_nothing(
        self, dynamo: Backend
    ) -> None:
        seed(dynamo, VALID[:10])
        client = dynamo.new_client(max_attempts=5)
        first_attempts: set[str] = set()

        def first_attempt_of_two_rows(body: dict[str, Any]) -> bool:
            row = body["Key"]["PK"]["S"]
            if row in first_attempts or len(first_attempts) >= 2:
                return False
            first_attempts.add(row)
            return True

        injector = ThrottleInjector(
            client,
            "UpdateItem",
            times=None,
            match=first_attempt_of_two_rows,
            reasons=[{"reason": "IndexWriteKeyRangeThroughputExceeded", "resource": "gsi"}],
        )
        counter = attach_throttle_observer(client)
        # On the pace's own time, which only the bucket's waits move: the slowed rate climbs
        # back with time, and a loaded machine's slow run would see more of its recovery.
        pace = PaceTime()
        bucket = TokenBucket(FAST, clock=pace, sleep=pace.sleep)
        segment = request(segments=1).segment_requests(ticket())[0]

        result = run_segment(client, dynamo.table_name, segment, throttles=counter, bucket=bucket)

        assert injector.injected == 2
        assert result.throttles == 2
        if self.injected_throttles_apply_the_write:
            assert (result.restamped, result.skipped) == (8, 2), result
        else:
            assert (result.restamped, result.skipped) == (10, 0), result
        assert result.cursor is None
        # a key-range reason slows the segment that hit the key, not the run
        assert bucket.decreases >= 1
        slowed = bucket.pacer.segment_rate(segment.segment)
        assert slowed is not None
        # stepped back to 90 % (two refusals, too few to say the key is far over) and held
        # there, under the rate it was refused at
        assert slowed == pytest.approx(0.9 * FAST, rel=0.01)
        # the run's own rate stays; it wrote at the slowed rate while the key range slowed it
        assert bucket.rate == pytest.approx(FAST)
        assert bucket.lowest_rate == pytest.approx(0.9 * FAST, rel=0.01)
        assert_every_valid_saga_on_its_shard(dynamo)

    def test_a_throttle_outlasting_retries_stops_the_segment_and_a_rerun_converges(
        self, dynamo: Backend
    ) -> None:
        seed(dynamo, VALID[:6])
        throttled = dynamo.new_client(max_attempts=2)
        ThrottleInjector(throttled, "UpdateItem", times=None)
        segment = request(segments=1).segment_requests(ticket())[0]
        with pytest.raises(SegmentThrottledError, match="nothing was lost"):
            run_segment(throttled, dynamo.table_name, segment)
        moved = [s for s in sagas(dynamo).values() if s["GSI4PK"] != keys.LEGACY_GSI4PK]
        # the segment stopped at its first write (applied anyway where throttles are ambiguous)
        assert len(moved) == (1 if self.injected_throttles_apply_the_write else 0)
        _run, summary = backfill(dynamo, "forward")
        assert summary.verified
        assert summary.restamped == 6 - len(moved)
        assert_every_valid_saga_on_its_shard(dynamo)

    # ---- stopping and resuming -------------------------------------------------------------------

    def test_a_segment_stopped_by_its_deadline_resumes_from_its_cursor(
        self, dynamo: Backend
    ) -> None:
        # Given a worker whose Lambda deadline comes after every few rows
        seed(dynamo)
        clock = {"remaining": 0.0}

        def remaining_seconds() -> float:
            clock["remaining"] -= 1.0
            return clock["remaining"]

        totals = [0, 0]
        invocations = 0
        for number in range(2):
            segment = request(segments=2).segment_requests(ticket())[number]
            while True:
                clock["remaining"] = 62.0  # 60 s margin: two checks per invocation
                result = run_segment(
                    dynamo.client,
                    dynamo.table_name,
                    segment,
                    remaining_seconds=remaining_seconds,
                    safety_margin_seconds=60.0,
                    page_size=5,
                )
                invocations += 1
                if result.done:
                    assert result.cursor is None
                    break
                segment = segment.model_copy(update={"cursor": result.cursor, "totals": result})
            totals[0] += result.restamped
            totals[1] += result.anomalies
        # about three rows per invocation
        assert invocations >= (len(VALID) + len(ANOMALIES)) // 4, invocations
        # Then the loop of invocations moved every row exactly once
        assert totals == [len(VALID), len(ANOMALIES)]
        assert_every_valid_saga_on_its_shard(dynamo)

    def test_a_stop_request_ends_after_the_in_flight_write_and_a_rerun_converges(
        self, dynamo: Backend
    ) -> None:
        seed(dynamo)
        before = {r["PK"]["S"]: r for r in dynamo.scan_all()}
        stop = threading.Event()
        writes: list[int] = []

        def stop_after_five(**_: Any) -> None:
            writes.append(1)
            if len(writes) == 5:
                stop.set()

        dynamo.client.meta.events.register("after-call.dynamodb.UpdateItem", stop_after_five)
        run, _ = backfill(dynamo, "forward", segments=2, stop=stop)
        assert run.interrupted
        assert not run.complete
        moved = sum(r.restamped for r in run.results)
        # the other segment finishes at most its one in-flight write after the stop
        assert moved == len(writes)
        assert 5 <= moved <= 6
        # no row is half-written: each is exactly as seeded, or as seeded with its shard key
        for pk, raw in ((r["PK"]["S"], r) for r in dynamo.scan_all()):
            assert without_gsi4pk(raw) == without_gsi4pk(before[pk])
        _, again = backfill(dynamo, "forward")
        assert again.verified
        assert again.restamped == len(VALID) - moved
        assert_every_valid_saga_on_its_shard(dynamo)

    def test_a_rollback_moves_rows_of_any_shard_back_to_the_legacy_key(
        self, dynamo: Backend
    ) -> None:
        dynamo.put_saga("a", "p-a", gsi4pk="shard")
        dynamo.put_saga("b", "p-b", gsi4pk="shard")
        dynamo.put_saga("c", "p-c")
        _, summary = backfill(dynamo, "rollback")
        assert summary.restamped == 2
        assert summary.verified
        assert {s["GSI4PK"] for s in sagas(dynamo).values()} == {keys.LEGACY_GSI4PK}

    def test_a_rollback_moves_back_and_reports_rows_whose_person_went_bad_on_a_shard(
        self, dynamo: Backend
    ) -> None:
        # Given a forward pass, after which two moved rows' personId or GSI4SK went bad
        seed(dynamo)
        backfill(dynamo, "forward")
        gone_bad = {"s00": "REMOVE personId", "s01": "SET GSI4SK = :foreign"}
        for saga_id, update in gone_bad.items():
            extra: dict[str, Any] = {}
            if ":foreign" in update:
                extra["ExpressionAttributeValues"] = {
                    ":foreign": {"S": "someone-else#2026-01-01T00:00:00.000Z"}
                }
            dynamo.client.update_item(
                TableName=dynamo.table_name,
                Key={"PK": {"S": f"RSAGA#{saga_id}"}, "SK": {"S": "META"}},
                UpdateExpression=update,
                **extra,
            )
        # When the rollback runs
        run, rollback = backfill(dynamo, "rollback")
        # Then every saga row is back on the legacy key (legacy needs no personId), the two are
        # counted as moved and listed with their reason, and none is left behind
        assert run.complete
        assert rollback.verified, rollback.verification
        assert rollback.restamped == len(VALID)
        assert rollback.anomalies == 0
        assert sorted(k["PK"] for k in rollback.anomaly_keys) == ["RSAGA#s00", "RSAGA#s01"]
        assert all(k["SK"] == "META" and k["reason"] for k in rollback.anomaly_keys)
        assert not rollback.anomalies_remain
        assert exit_code(rollback, failed=False) == EXIT_CLEAN
        assert {s["GSI4PK"] for s in sagas(dynamo).values()} == {keys.LEGACY_GSI4PK}
        # And a rerun finds nothing left on a shard and exits 0
        _, again = backfill(dynamo, "rollback")
        assert (again.restamped, again.skipped, again.anomalies) == (0, 0, 0)
        assert exit_code(again, failed=False) == EXIT_CLEAN

    # ---- the same machinery between two sharded layouts ---

    def test_a_split_moves_only_the_rows_whose_key_differs_in_the_target_layout(
        self, dynamo: Backend
    ) -> None:
        # Given rows on their shard of 4, and a move sharded(4) -> sharded(8)
        for n in range(24):
            dynamo.put_saga(f"r{n:02}", f"person-{n}", gsi4pk="shard", shard_count=4)
        split = Move(BackfillDirection.FORWARD, Layout.sharded(4), Layout.sharded(8))
        differ = [
            n
            for n in range(24)
            if keys.shard_gsi4pk_for_person(f"person-{n}", 4)
            != keys.shard_gsi4pk_for_person(f"person-{n}", 8)
        ]
        assert 0 < len(differ) < 24
        req = request(segments=2)
        run_ticket = RunTicket.unleased(split, holder="contract")
        # When it runs
        run = run_backfill(dynamo.client, dynamo.table_name, req, run=run_ticket)
        summary = finish_backfill(
            dynamo.client,
            dynamo.table_name,
            req,
            run.results,
            index_name=names.INDEX_NAME,
            move=split,
        )
        # Then exactly those moved, every row is on its shard of 8, and the read-back agrees
        assert summary.restamped == len(differ)
        assert summary.verified, summary.verification
        for item in sagas(dynamo).values():
            assert item["GSI4PK"] == keys.shard_gsi4pk_for_person(item["personId"], 8)

    def test_a_split_stopped_mid_way_resumes_and_converges(self, dynamo: Backend) -> None:
        # Given sagas on their shard of 16, and a split to 32 stopped after five writes
        seed(dynamo)
        backfill(dynamo, "forward")
        before = {r["PK"]["S"]: r for r in dynamo.scan_all()}
        stop = threading.Event()
        writes: list[int] = []

        def stop_after_five(**_: Any) -> None:
            writes.append(1)
            if len(writes) == 5:
                stop.set()

        dynamo.client.meta.events.register("after-call.dynamodb.UpdateItem", stop_after_five)
        run, _ = reshard(dynamo, 16, 32, stop=stop)
        dynamo.client.meta.events.unregister("after-call.dynamodb.UpdateItem", stop_after_five)
        assert run.interrupted
        assert not run.complete
        moved = sum(r.restamped for r in run.results)
        assert 5 <= moved <= 6
        # Then no row is half-written: each is as it was, or as it was with its key of 32
        for pk, raw in ((r["PK"]["S"], r) for r in dynamo.scan_all()):
            assert without_gsi4pk(raw) == without_gsi4pk(before[pk])
        # When the split runs again, it moves only the rest and the read-back agrees
        run, again = reshard(dynamo, 16, 32)
        assert run.complete
        assert again.verified, again.verification
        assert again.restamped == len(split_movers(dynamo, 16, 32)) - moved
        assert_every_valid_saga_on_its_shard(dynamo, 32)

    def test_a_split_then_the_merge_back_leaves_the_table_byte_identical(
        self, dynamo: Backend
    ) -> None:
        # Given sagas on their shard of 16 (anomalies and other entities included)
        seed(dynamo)
        backfill(dynamo, "forward")
        before = dynamo.scan_all()
        movers = split_movers(dynamo, 16, 32)
        assert 0 < len(movers) < len(VALID)
        # When they are split to 32, about half moving from key s to s + 16
        _, split = reshard(dynamo, 16, 32)
        assert (split.restamped, split.verified) == (len(movers), True)
        assert_every_valid_saga_on_its_shard(dynamo, 32)
        # And merged back to 16
        _, merge = reshard(dynamo, 32, 16)
        # Then the same rows moved back, and a full Scan is exactly what it was
        assert (merge.restamped, merge.verified) == (len(movers), True)
        assert dynamo.scan_all() == before


# ---- the control record around a run (tests of the lease, the CLI and the handlers) -----------

# The planted record's effectiveAt is CHANGED_AT + 75 s: runs in these tests start later.
AFTER_EFFECTIVE = CHANGED_AT + timedelta(minutes=5)


class Clock:
    """An injected wall clock: no test waits for effectiveAt or a lease's TTL."""

    def __init__(self, now: datetime = AFTER_EFFECTIVE) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def plant(dynamo: Backend, phase: str = "migrating", *, version: int = 1) -> ControlState:
    """The record in `phase` (N = 16 where it names one), as `phase set` would leave it."""
    current, moving_to = layouts_for_phase(phase, N)
    return seed_state(dynamo.client, dynamo.table_name, current, moving_to, version=version)


def is_control_row(raw: dict[str, Any]) -> bool:
    """A control item: the record's (STATE, HISTORY, EVENT) or a backfill fence slot."""
    return raw["PK"]["S"] == CONTROL_PK or raw["PK"]["S"].startswith(FENCE_PK_PREFIX)


def data_rows(dynamo: Backend) -> list[dict[str, Any]]:
    """Every row but the control items (a run changes those: lease, completion, fence slots)."""
    return [raw for raw in dynamo.scan_all() if not is_control_row(raw)]
