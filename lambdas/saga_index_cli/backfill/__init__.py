"""`saga-index backfill` (command.py): its options (options.py), its four modes (local.py,
start.py, follow.py, stop.py, the last three on an execution found by executions.py), what a run
shows (output.py, execution_progress.py, estimate.py, advice.py), and `throttle|pause|resume`
(control.py)."""
