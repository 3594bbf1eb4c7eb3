"""The terminal rendering, against stored text (fixed width, no colour)."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from rich.console import Console

from doctor.render.explain import render_explain_text
from tests.explain.fixtures import LOGS, scan

EXPECTED = Path(__file__).with_name("expected")
CASES = [
    "format/nccl-peer-closed.log",
    "format/nccl-context-gpu.log",
    "real/ssh-host-key-changed.log",
]


def rendered(name: str) -> str:
    out = io.StringIO()
    console = Console(file=out, width=100, color_system=None, soft_wrap=True)
    render_explain_text(scan(LOGS / name), console)
    return out.getvalue()


@pytest.mark.parametrize("name", CASES)
def test_terminal_text(name: str) -> None:
    path = EXPECTED / (Path(name).stem + ".txt")
    if os.environ.get("DOCTOR_UPDATE_EXPECTED"):
        path.write_text(rendered(name))
    assert rendered(name) == path.read_text()
