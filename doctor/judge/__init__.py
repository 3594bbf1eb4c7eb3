"""Judging: the checks found (registry), run on the facts (runner), drift across nodes, the
report."""
