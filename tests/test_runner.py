"""tests/run.py, the one command that runs the tests on a fresh Debian machine."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_a_prepared_machine_goes_straight_to_the_tests() -> None:
    # This machine was prepared by that command: nothing is missing, and it names the Python.
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "run.py"), "--check"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"{sys.executable}\n"
    assert proc.stderr == ""  # no apt-get, no pip install


def test_ci_and_the_readme_use_that_command() -> None:
    assert "python3 tests/run.py -q" in (ROOT / ".ci" / "run").read_text()
    assert "python3 tests/run.py -q" in (ROOT / "README.md").read_text()
