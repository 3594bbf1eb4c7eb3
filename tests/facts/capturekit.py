"""Load the recorded captures and the written NVIDIA fixtures; lay GPU-side entries over them."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from doctor.core.capture import Capture

FIXTURES = Path(__file__).parent.parent / "fixtures"


def raw_capture(name: str) -> dict[str, Any]:
    """A whole real probe capture from tests/fixtures/captures (a fresh copy each call)."""
    return json.loads((FIXTURES / "captures" / f"{name}.json").read_text())


def nvidia_text(name: str) -> str:
    """A written NVIDIA fixture without its '# ' header lines (the real output has none)."""
    text = (FIXTURES / "nvidia" / name).read_text()
    return "".join(line for line in text.splitlines(True) if not line.startswith("# "))


def nvidia_child(name: str) -> dict[str, Any]:
    """The probe NVIDIA child's output, as a command entry, from a written JSON fixture."""
    data = json.loads((FIXTURES / "nvidia" / name).read_text())
    data.pop("_comment", None)
    stdout = "@@cluster-doctor-nvidia@@" + json.dumps(data) + "\n"
    return {"argv": ["python3", "-c", "<snippet>"], "rc": 0, "stdout": stdout, "stderr": ""}


def overlay(raw: dict[str, Any], **sections: dict[str, Any]) -> Capture:
    """The capture with some entries replaced: overlay(raw, files={path: {"text": ...}})."""
    out = copy.deepcopy(raw)
    for section, entries in sections.items():
        out.setdefault(section, {}).update(entries)
    return Capture(out)
