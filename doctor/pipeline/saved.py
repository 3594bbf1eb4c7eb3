"""Captures on disk: the bundle `doctor collect --save-raw` writes (doctor/paste reads it back)."""

from __future__ import annotations

import json
from pathlib import Path

from doctor.core.errors import UsageError
from doctor.core.files import inside, write_whole
from doctor.facts.cluster import ClusterFacts

MAX_CAPTURE = 64 << 20  # bytes: a probe capture is well under a megabyte


def prepare(folder: Path) -> None:
    """Make the folder before any node is probed, so an unwritable one fails at once."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--save-raw {folder}: {exc.strerror}") from None


def save_captures(folder: Path, cluster: ClusterFacts) -> list[Path]:
    """One ``<node>.json`` per probed node; the paths written, in inventory order.

    Each file appears whole or not at all: a full disk leaves no truncated capture for
    ``analyze`` to choke on later.
    """
    written = []
    for name, facts in cluster.nodes.items():
        path = inside(folder, name, ".json")
        try:
            write_whole(path, json.dumps(facts.capture.raw, sort_keys=True))
        except OSError as exc:
            raise UsageError(f"--save-raw {folder}: {exc.strerror}") from None
        written.append(path)
    return written
