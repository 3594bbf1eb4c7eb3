"""Fixtures of pasted text and a reader over strings, for the paste tests."""

from __future__ import annotations

import io
import json
from pathlib import Path

from doctor.core.capture import Capture
from doctor.paste import read_inputs

PASTES = Path(__file__).parent.parent / "fixtures" / "paste"
CAPTURES = Path(__file__).parent.parent / "fixtures" / "captures"


def pasted(name: str) -> str:
    """A fixture's text as the user pasted it (written fixtures keep their header comments)."""
    return (PASTES / name).read_text()


def captured_stdout(capture: str, command: str) -> str:
    """What a command printed in one of the real probe captures."""
    raw = json.loads((CAPTURES / f"{capture}.json").read_text())
    return str(raw["commands"][command]["stdout"])


def read_text(text: str | bytes, node: str = "n1") -> Capture:
    """The capture the reader makes of one paste given on stdin."""
    data = text.encode() if isinstance(text, str) else text
    return read_inputs(["-"], stdin_node=node, stdin=io.BytesIO(data))[node]


def written_blocks(name: str) -> dict[str, str]:
    """A written fixture's blocks, each after its '=== title' line."""
    blocks: dict[str, str] = {}
    title = None
    for line in pasted(name).splitlines(True):
        if line.startswith("=== "):
            title = line[4:].strip()
            blocks[title] = ""
        elif title is not None:
            blocks[title] += line
    return blocks
