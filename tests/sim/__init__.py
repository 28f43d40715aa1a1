"""A deterministic simulator of the layout-change protocol (docs/control-contract.md, "How the
protocol is checked"): the real routing, provider, writer, repository, transitions, lease,
backfill and drift code against a simulated table whose index is eventually consistent."""
