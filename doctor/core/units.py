"""Human-readable sizes and rates."""

from __future__ import annotations


def human_bytes(n: float) -> str:
    """1536 → '1.5 KiB'; binary units, as /dev/shm and memory sizes are usually quoted."""
    value, unit = float(n), "B"
    for bigger in ("KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024:
            break
        value, unit = value / 1024, bigger
    return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
