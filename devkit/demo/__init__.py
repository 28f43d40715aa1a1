"""`make demo`: show, with numbers, that sharding GSI4 removes the hot key (ADR-0085).

    python -m devkit.demo [--shards 16] [--duration 120] [--backfill-rate 100] ...

On a local DynamoDB-compatible server (dynalite: a real server process, started here and
always stopped, Ctrl-C and SIGTERM included) it:

  1. creates the table from the CDK-synthesised template and seeds a production-shaped legacy
     dataset (devkit.seed);
  2. replays the ADR's traffic mix (devkit.traffic) against the LEGACY layout, every request
     priced by the capacity meter (devkit.capacity) per partition key and per second;
  3. migrates as the runbook does: snapshot the reads, phase `migrating`, backfill dry run,
     backfill (progress bar), verify the legacy key is drained, repair the anomalous rows the
     backfill reported and run it again, verify parity against the snapshot, drift check clean,
     phase `sharded`, parity again;
  4. replays the SAME traffic against the SHARDED layout through a fresh meter;
  5. prints the report table on stdout, writes results/demo/report.json and
     results/demo/partition-load.png.

Progress and logs go to stderr; only the report goes to stdout. Exit codes: 0 done; 1 a step
failed (the message names it); 2 bad arguments; 130 interrupted.

  config    DemoConfig: every parameter, validated before a server starts
  cli       the command line: arguments, exit codes, the server's lifecycle (main)
  pipeline  run_demo(): the steps in the runbook's order, and the report they add up to
  steps     one function per step: a metered replay, a backfill pass, the anomaly repair,
            a parity verification
  report    the report as a terminal table, report.json and the partition-load chart
  ui        progress on stderr
"""
