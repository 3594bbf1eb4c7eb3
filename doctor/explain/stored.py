"""signatures.json, read once: the catalogue's entries and the sieve's anchors.

Standard library only, and only json: `doctor explain` reads the anchors and starts searching
the log before it imports anything else (doctor/cli/main.py), and importlib.resources alone
would cost it 8 ms there. The file lies beside this module in every install (pip unpacks the
package; the doctor does not run from a zip).
"""

from __future__ import annotations

import json
import os
from functools import cache

PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "signatures.json")


@cache
def document() -> dict[str, object]:
    """The whole file."""
    with open(PATH, encoding="utf-8") as handle:
        loaded: dict[str, object] = json.load(handle)
    return loaded


@cache
def anchors() -> tuple[bytes, ...]:
    """The sieve's anchors for the shipped keywords (doctor/explain/sieve.py; chosen and written
    by tests/explain/anchors.py)."""
    listed = document().get("anchors")
    return tuple(a.encode() for a in listed) if isinstance(listed, list) else ()
