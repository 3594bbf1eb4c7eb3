"""Compare a rendering with its stored expected text; UPDATE_GOLDEN=1 rewrites the stored file.

After rewriting, read the diff (git diff tests/render/expected) before committing it.
"""

from __future__ import annotations

import os
from pathlib import Path

EXPECTED = Path(__file__).parent / "expected"


def assert_golden(name: str, actual: str) -> None:
    path = EXPECTED / name
    if os.environ.get("UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(actual)
    assert path.exists(), f"{path} missing: run with UPDATE_GOLDEN=1 and review the diff"
    expected = path.read_text()
    assert actual == expected, f"{name} differs from {path} (UPDATE_GOLDEN=1 rewrites it)"
