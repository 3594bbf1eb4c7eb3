"""Time the CLI as it runs once installed: with its bytecode compiled, or as the README's first
command installs it."""

from __future__ import annotations

import compileall
import subprocess
import sys
from pathlib import Path

from install import VENV, active_environment

ROOT = Path(__file__).resolve().parent.parent


def compile_bytecode() -> None:
    """Write the .pyc files for ``doctor`` and ``checks``, as ``pip install`` does.

    An editable checkout under ``PYTHONDONTWRITEBYTECODE=1`` (this machine's default) compiles
    its ~100 modules again at every start of the CLI, about 0.1 s that no wheel install pays,
    while the tools timed beside it (ansible, paramiko, rich) come from pip with their bytecode.
    """
    for package in ("doctor", "checks"):
        compileall.compile_dir(ROOT / package, quiet=1)


def readme_doctor() -> Path:
    """The `doctor` command as the README's first command (`python3 install.py`) leaves it: in
    the active virtualenv or conda environment, else in .venv of this checkout; installed now
    where it is not. Its Python starts with that environment's site only, as a user's does:
    not with hooks this machine's own Python runs at every start."""
    subprocess.run(
        [sys.executable, str(ROOT / "install.py"), "--version"], check=True, capture_output=True
    )
    return Path(active_environment() or VENV / "bin" / "python").parent / "doctor"
