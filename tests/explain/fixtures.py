"""Read the log fixtures the way a user's log would be read, minus their citation header."""

from __future__ import annotations

from pathlib import Path

from doctor.explain.engine import Explanation, Scanner

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"


def body(path: Path) -> bytes:
    """The fixture without its leading '#' header (which cites sources, format strings included)."""
    lines = path.read_bytes().split(b"\n")
    start = 0
    while start < len(lines) and lines[start].startswith(b"#"):
        start += 1
    return b"\n".join(lines[start:])


def scan(path: Path) -> Explanation:
    scanner = Scanner()
    scanner.result.sources.append(path.name)
    scanner.feed_lines(body(path).split(b"\n"), path.name, 1)
    return scanner.result


def scan_text(text: str, name: str = "pasted.log") -> Explanation:
    """``text`` read as the file ``name`` holding it."""
    scanner = Scanner()
    scanner.result.sources.append(name)
    scanner.feed_lines(text.encode().split(b"\n"), name, 1)
    return scanner.result
