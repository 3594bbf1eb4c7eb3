"""Files that appear whole or not at all: written aside in the same folder, then renamed."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def write_whole(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` so that a full or read-only disk leaves no truncated
    file behind (nor the one aside); raises the OSError that stopped it."""
    aside = path.with_name(f".{path.name}.part")
    try:
        aside.write_text(text, encoding="utf-8")
        os.replace(aside, path)
    except OSError:
        with contextlib.suppress(OSError):  # a read-only folder refuses the unlink too
            aside.unlink(missing_ok=True)
        raise
