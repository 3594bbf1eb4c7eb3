"""The kernel log of a node: its lines peeled (lines.py), the events they report (events.py),
read once per node (log.py)."""
