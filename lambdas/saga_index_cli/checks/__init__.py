"""ADR-0085's three "done" signals: `drift` (drift.py), `verify` (verify.py) and `watch`
(watch.py). Each prints a human report (or, with --json, ONE JSON object) on stdout and exits 0
when its signal is clean and 1 when it is not; bad usage exits 2 (main's)."""

EXIT_CLEAN, EXIT_FOUND = 0, 1
