"""`saga-index phase show|set|restore` (commands.py): the control record (documents.py) and its
guarded transitions, with the checks of a completing move (checks.py)."""
