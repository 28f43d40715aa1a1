"""A deterministic simulator of the layout-change protocol (docs/control-contract.md, "How the
protocol is checked"): the real routing, provider, writer, repository, transitions, lease,
backfill and drift code, and the open-saga index's move (its transitions, its backfill, the reads
that switch to it), against a simulated table whose indexes are eventually consistent."""
