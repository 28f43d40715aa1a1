"""The checks that judge a move (docs/observability.md):

expectations          where a state's rows may sit (shared by drift and parity)
read_progress         how a progress display hears of a check's reads
drift                 the drift checker: what is wrong now, judged against the state
drift_schedule        which scheduled runs also scan the base table
drift_tally           what a drift run keeps of the rows it reads (exact counts, samples)
drift_report          what a drift run reports
parity                the parity verifier: the reads against the base table, re-checked
parity_sample         which persons' by-person reads a parity run checks
parity_compare        the reads judged against the base table: missing, extra, misrouted
parity_snapshot       the snapshot document: what each read returned at one moment
parity_snapshot_diff  the reads judged against a snapshot: changed since, or missing
parity_report         what a parity run reports
repair                the repair of one anomalous row
watch                 the index's throttle events over a window
"""
