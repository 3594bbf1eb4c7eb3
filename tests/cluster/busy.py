"""Load this machine on purpose: a busy loop on every core while a block runs, so a test or a
bench can check that a verdict does not depend on how busy the machine is."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def busy_cores(loaded: bool = True) -> Iterator[None]:
    """One busy Python loop per core for the block (none when ``loaded`` is false); each is
    killed by its pid afterwards, even when the block fails."""
    loops = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range((os.cpu_count() or 1) if loaded else 0)
    ]
    try:
        yield
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
