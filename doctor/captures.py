"""Captures on disk: the support bundle `doctor collect --save-raw` writes and `analyze` reads."""

from __future__ import annotations

import json
from pathlib import Path

from doctor.capture import Capture, CaptureError
from doctor.errors import UsageError
from doctor.facts.cluster import ClusterFacts
from doctor.files import read_bounded, write_whole
from doctor.jsonable import loads

MAX_CAPTURE = 64 << 20  # bytes: a probe capture is well under a megabyte


def load_capture_dir(folder: Path) -> dict[str, Capture]:
    """Read ``<node>.json`` captures from a folder; a corrupt or unreadable one is a usage error."""
    if not folder.is_dir():
        raise UsageError(f"{folder}: not a readable folder of captures")
    try:
        paths = sorted(folder.glob("*.json"))
    except OSError as exc:
        raise UsageError(f"{folder}: {exc.strerror}") from None
    if not paths:
        raise UsageError(f"{folder}: no <node>.json captures in it")
    results: dict[str, Capture] = {}
    for path in paths:
        try:
            results[path.stem] = Capture(loads(read_bounded(path, MAX_CAPTURE)))
        except OSError as exc:
            raise UsageError(f"{path}: {exc.strerror}") from None
        except (ValueError, CaptureError) as exc:
            raise UsageError(f"{path}: corrupt capture: {exc}") from None
    return results


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
        path = folder / f"{name}.json"
        try:
            write_whole(path, json.dumps(facts.capture.raw, sort_keys=True))
        except OSError as exc:
            raise UsageError(f"--save-raw {folder}: {exc.strerror}") from None
        written.append(path)
    return written
