"""Parse the allreduce command's option values; a bad value is a one-line usage error."""

from __future__ import annotations

import re

from doctor.errors import UsageError
from doctor.facts.allreduce import default_sizes

_SIZE = re.compile(r"^\s*(\d+)\s*([KMG]?)(?:i?B)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def parse_size(text: str) -> int:
    """``64M`` / ``64MiB`` / ``1024`` → bytes."""
    match = _SIZE.match(text)
    if not match:
        raise UsageError(f"--sizes: {text!r} is not a size (examples: 1024, 1K, 64M)")
    return int(match.group(1)) * _UNITS[match.group(2).upper()]


def parse_sizes(text: str) -> tuple[int, ...]:
    """``1K..64M`` (powers of two between) or ``4K,1M`` (exactly these)."""
    if ".." in text:
        low, _, high = text.partition("..")
        try:
            return default_sizes(parse_size(low), parse_size(high))
        except ValueError as exc:
            raise UsageError(f"--sizes: {exc}") from None
    sizes = tuple(parse_size(part) for part in text.split(",") if part.strip())
    if not sizes or min(sizes) < 4:
        raise UsageError("--sizes: give at least one size of 4 bytes or more")
    return sizes


def parse_env(pairs: list[str]) -> dict[str, str]:
    """``NAME=VALUE`` pairs (the recommendation to try) → a dict."""
    env: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not _NAME.match(name):
            raise UsageError(f"--recommend: {pair!r} is not NAME=VALUE")
        env[name] = value
    return env
