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


def test_a_python_without_the_packages_is_told_what_is_missing(tmp_path: Path) -> None:
    # A fresh virtualenv has pip and nothing else: --check names the first missing install
    # instead of running it.
    subprocess.run([sys.executable, "-m", "venv", str(tmp_path / "venv")], check=True, timeout=120)
    python = tmp_path / "venv" / "bin" / "python"
    proc = subprocess.run(
        [str(python), str(ROOT / "tests" / "run.py"), "--check"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr == "tests/run.py: missing: torch 2.13.0\n"
