"""The backfill: move every saga row's GSI4PK between the legacy key and its shard (ADR-0085).

One module per idea:

  direction  which way rows move (forward: legacy -> shard; rollback: shard -> legacy), the
             source and target keys, and the deployment a run needs (phase, N)
  messages   the Step Functions and CLI payloads (camelCase JSON), their size budget, the
             segment plan and the summary of a run
  pacing     the token bucket that caps the writes and backs off on throttles
  restamp    the segment worker: what happens to one row, and to one parallel-Scan segment
  readback   what is left on the source key after a run, read back and judged
  local      the threaded runner of every segment in this process, and the one local
             orchestration (run, then read back) the CLI and the demo call

The Lambda handlers (handlers/backfill_*.py) and the CLI (saga_index_cli/backfill.py) are thin
shells around these. Nothing here reads os.environ; the DynamoDB client is injected.
"""
