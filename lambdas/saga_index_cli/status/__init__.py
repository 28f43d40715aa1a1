"""`saga-index status`: the migration on one screen (command.py), from the report's parts
(report.py), rendered for a terminal (screen.py) or printed as JSON."""
