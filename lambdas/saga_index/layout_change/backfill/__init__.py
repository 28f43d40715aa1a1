"""The backfill: move every saga row's GSI4PK from the control record's source layout to its
target layout (ADR-0085; docs/control-contract.md).

One module per idea:

  move       which rows a run moves: the record's source and target layouts and the row rule
             (forward legacy -> sharded(N), rollback sharded(N) -> legacy, the same machinery
             for sharded(N) -> sharded(M))
  messages   the Step Functions and CLI payloads (camelCase JSON), their size budget, the run's
             ticket (its move and lease), the segment plan and the summary of a run
  pacing     the token bucket that caps the writes, backs off on throttles and pauses
  leasing    a run under its lease: taken, heartbeated (applying the record's throttle and
             pause), released with the run's completion
  restamp    the segment worker: what happens to one row, and to one parallel-Scan segment
  readback   what is left to move on the source keys after a run, read back and judged
  local      the threaded runner of every segment in this process, and the one local
             orchestration (lease, run, read back, release with the completion) the CLI and
             the demo call
  estimate   what a run will cost before it runs: its time at the cap and its write capacity
             on the legacy key, from the dry run's count and a sample of row sizes
  steps      the same run as the Step Functions state machine takes it: one function per
             state (plan, worker, verify), the one call of that state's Lambda handler

The Lambda handlers (handlers/backfill_*.py) and the CLI (saga_index_cli/backfill*.py) are thin
shells around these. Nothing here reads os.environ; the DynamoDB client is injected.
"""
