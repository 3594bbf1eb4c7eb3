"""The pictures of the HTML report, each built from one part of the JSON report document.

Every builder turns its part into plain geometry (positions, sizes, labels, CSS classes) that a
template draws as SVG; none of them emits markup. The document may come from an older or newer
doctor, or be hand-edited: a part of an unexpected shape yields no picture, never an exception,
so these helpers read it defensively.
"""

from __future__ import annotations

from typing import Any


def dig(value: Any, *path: str) -> Any:
    """``value[path[0]][path[1]]...``, or None where a step is missing or not a mapping."""
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def as_text(value: Any) -> str:
    """A string field as text; anything else (None, a number, a nested object) as ''."""
    return value if isinstance(value, str) else ""


def as_number(value: Any) -> float | None:
    """A finite number, or None (bool is not a number here; NaN and infinities are not drawn)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if number == number and abs(number) != float("inf") else None


def short(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def counted(n: int, noun: str) -> str:
    """``3 nodes``, ``1 node``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"
