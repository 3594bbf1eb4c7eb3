"""Turn facts, findings and outcomes into plain JSON values."""

from __future__ import annotations

import dataclasses
import enum
import json
from typing import Any

from doctor.core.model import Missing, Severity

# The version of every JSON document the doctor writes (a report, `doctor explain --format json`).
# 1.1: coverage of the sampled stages, the reachability protocol; 1.2: each node's own verdict
SCHEMA_VERSION = "1.2"


def jsonable(value: Any) -> Any:
    if isinstance(value, Missing):
        return {"missing": value.reason, "kind": value.kind}
    if isinstance(value, Severity):
        return str(value)
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value) if isinstance(value, (set, frozenset)) else value
        return [jsonable(v) for v in items]
    return value


def loads(data: str | bytes) -> Any:
    """``json.loads`` for text from outside (nodes, users' files): nesting too deep for the
    decoder is a ValueError like any other bad JSON, not a RecursionError."""
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
