"""Time the CLI as it runs once installed: with its bytecode compiled."""

from __future__ import annotations

import compileall
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def compile_bytecode() -> None:
    """Write the .pyc files for ``doctor`` and ``checks``, as ``pip install`` does.

    An editable checkout under ``PYTHONDONTWRITEBYTECODE=1`` (this machine's default) compiles
    its ~100 modules again at every start of the CLI, about 0.1 s that no wheel install pays,
    while the tools timed beside it (ansible, paramiko, rich) come from pip with their bytecode.
    """
    for package in ("doctor", "checks"):
        compileall.compile_dir(ROOT / package, quiet=1)
