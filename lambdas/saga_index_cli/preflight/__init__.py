"""`saga-index preflight` (command.py): its checks of the table (table.py) and of the deployed
stack (stack.py), each a verdict (check.py)."""
