"""What the GPU capture scripts share: each step's output kept in a folder (stdout in its file,
stderr beside it), and a log of when each step ran, how it ended and how long it took."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path


class Steps:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.log: list[str] = []

    def note(self, text: str) -> None:
        self.log.append(f"{time.strftime('%H:%M:%S')} {text}")
        print(self.log[-1], flush=True)

    def save(self, name: str, argv: list[str], timeout: float = 120, **kw: object) -> str:
        """Run argv; its stdout in ``name``, its stderr in ``name.stderr`` when there is any."""
        began = time.monotonic()
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)  # type: ignore[call-overload]
        except (OSError, subprocess.TimeoutExpired) as exc:
            self.note(f"{name}: {argv[:4]} failed: {exc}")
            return ""
        (self.folder / name).write_text(out.stdout)
        if out.stderr.strip():
            (self.folder / (name + ".stderr")).write_text(out.stderr)
        self.note(f"{name}: rc {out.returncode} in {time.monotonic() - began:.1f}s")
        return str(out.stdout)

    def write_log(self, name: str) -> None:
        (self.folder / name).write_text("\n".join(self.log) + "\n")
