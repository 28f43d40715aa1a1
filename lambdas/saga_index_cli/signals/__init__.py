"""ADR-0085's three "done" signals: `drift` (drift.py), `verify` (verify.py) and `watch`
(watch.py). Each prints a human report (or, with --json, ONE JSON object) on stdout and exits 0
when its signal is clean and 1 when it is not; bad usage exits 2, and a service that could not
be reached, refused the call or does not support it exits 4 (main's, saga_index_cli.failures):
a check that could not run never reads as "found something"."""

from saga_index_cli.failures import EXIT_FOUND, EXIT_OK

EXIT_CLEAN = EXIT_OK
__all__ = ["EXIT_CLEAN", "EXIT_FOUND"]
