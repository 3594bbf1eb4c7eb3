"""Typed facts parsed from raw probe captures (pure functions, one module per area)."""
