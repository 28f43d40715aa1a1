"""`saga-index phase show|set|restore` (commands.py): the control record (documents.py) and its
guarded transitions, whose checks the domain builds (layout_change/transitions/requirements.py)."""
