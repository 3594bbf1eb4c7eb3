"""Baselines: a known-good node's raw capture, saved once and judged against later (NHC's genconf).

A baseline file is a plain probe capture (the same document ``doctor collect --save-raw`` writes
per node), so any saved capture of a good node can serve as one. With a baseline, drift checks
compare every node against it instead of against the majority.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from doctor.core.capture import Capture, CaptureError
from doctor.core.errors import UsageError
from doctor.core.files import read_bounded
from doctor.core.jsonable import loads
from doctor.facts.node import NodeFacts, parse_node
from doctor.pipeline.saved import MAX_CAPTURE


def save_baseline(path: Path, raw: dict[str, Any]) -> None:
    try:
        path.write_text(json.dumps(raw, indent=1, sort_keys=True) + "\n")
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror}") from None


def load_baseline(path: Path) -> NodeFacts:
    """Parse a baseline file into the facts drift checks compare against; named by its hostname."""
    try:
        capture = Capture(loads(read_bounded(path, MAX_CAPTURE)))
    except OSError as exc:
        raise UsageError(f"--baseline {path}: {exc.strerror}") from None
    except (ValueError, CaptureError) as exc:
        raise UsageError(f"--baseline {path}: not a capture: {exc}") from None
    hostname = capture.value("hostname")
    name = hostname if isinstance(hostname, str) and hostname else path.stem
    return parse_node(name, capture)
