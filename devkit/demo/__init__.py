"""`make demo`: show, with numbers, that sharding GSI4 removes the hot key (ADR-0085), and that
N can change live (a re-shard N -> 2N and back).

    python -m devkit.demo [--shards 16] [--duration 120] [--backfill-rate 100] ...

On a local DynamoDB-compatible server (dynalite: a real server process, started here and
always stopped, Ctrl-C and SIGTERM included) it:

  1. creates the table from the CDK-synthesised template and seeds a production-shaped legacy
     dataset (devkit.seed);
  2. replays the ADR's traffic mix (devkit.traffic) against the LEGACY layout, every request
     priced by the capacity meter (devkit.capacity) per partition key and per second;
  3. migrates as the runbook does, through the operator's `saga-index` commands (run
     in-process, each shown as typed): `verify --snapshot`, `phase set migrating`, a
     `phase set sharded` that its checks refuse (exit 3: no backfill yet), the backfill dry run
     and the backfill (progress bar, under the record's lease), `repair-anomaly` for the rows
     it reported and a second pass, `status`, `verify --compare`, `phase set sharded` (its
     checks pass), `drift`, `verify --compare` again, `phase show --history`; with a short T
     (effectiveAt one second after a change; production keeps 30 s);
  4. replays the SAME traffic against the SHARDED layout through a fresh meter;
  5. re-shards N -> 2N through the same commands: `verify --snapshot` in sharded(N), a refused
     `phase set resharding --shards 4N` (exit 2), `phase set resharding --shards 2N`, the
     backfill dry run and the backfill (about half the rows move), `verify --compare`,
     `phase set sharded` (its checks pass), `drift`, `verify --compare`; then replays the SAME
     traffic against sharded(2N);
  6. prints the report table on stdout, writes results/demo/report.json and
     results/demo/partition-load.png (N and 2N beside legacy).

Progress and logs go to stderr; only the report goes to stdout. Exit codes: 0 done; 1 a step
failed (the message names it); 2 bad arguments; 130 interrupted.

  config    DemoConfig: every parameter, validated before a server starts
  cli       the command line: arguments, exit codes, the server's lifecycle (main)
  pipeline  run_demo(): the steps in the runbook's order, and the report they add up to
  reshard   the last act: sharded(N) -> resharding -> sharded(2N), and its replay
  operator  `saga-index` run in this process: the command shown, its exit code and JSON
  steps     one function per step: a metered replay, a backfill pass, the anomaly repair,
            a parity verification
  report    the report as a terminal table, report.json and the partition-load chart
  ui        progress on stderr
"""
