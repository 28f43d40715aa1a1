"""`saga-index open-index show|set|backfill` (commands.py): the open-saga index's state in the
control record, moved by the same guarded transitions as the layout (the domain chooses each
move's checks: layout_change/transitions/open_index_move.py)."""
