"""install.py, the README's first command: the doctor installed and run on the machine a user has.

The whole path runs for real in a clean Debian root (tests/cleanroot.py: only the distribution's
python3, no pip, no ensurepip, no CA certificates, PEP 668), from Debian's mirror and the package
index, as the README's reader would run it.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from install import PIP_WHEEL
from tests import cleanroot

ROOT = Path(__file__).resolve().parent.parent


def readme_first_command() -> str:
    """The first command block of the README's quick start."""
    text = (ROOT / "README.md").read_text()
    quick = text[text.index("## Quick start") :]
    block = re.search(r"```sh\n(.*?)```", quick, re.S)
    assert block is not None
    return block.group(1).strip()


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    """A clean Debian 12 root with this checkout in it, removed afterwards (330 MB)."""
    made = tmp_path / "debian12"
    try:
        cleanroot.build(made, "bookworm")
        yield made
    finally:
        shutil.rmtree(made, ignore_errors=True)


def test_the_readme_first_command_on_a_clean_debian(root: Path) -> None:
    cleanroot.copy_checkout(root)
    env = cleanroot.site_ca(root)
    before = cleanroot.files(root)
    command = readme_first_command()
    assert command == "python3 install.py"
    in_checkout = f"cd {cleanroot.CHECKOUT} && {command}"

    # An index that serves another file under pip's pinned name: one line, and no pip.
    index = root / "tmp" / "simple" / "pip"
    index.mkdir(parents=True)
    (index / PIP_WHEEL).write_bytes(b"not pip")
    (index / "index.html").write_text(f'<a href="{PIP_WHEEL}">{PIP_WHEEL}</a>')
    forged = cleanroot.run(root, in_checkout, {**env, "PIP_INDEX_URL": "file:///tmp/simple"})
    assert forged.returncode == 1
    assert forged.stderr.splitlines()[-1] == (
        f"install.py: {PIP_WHEEL} from file:///tmp/simple/pip/ does not have the "
        "sha256 pinned in install.py"
    )
    assert not list(root.glob("root/cluster-doctor/.venv/lib/python*/site-packages/pip"))

    first = cleanroot.run(root, in_checkout, env)
    # The doctor ran its preflight on this node: exit 0, or 1 for what it found.
    assert first.returncode in (0, 1), first.stderr[-3000:]
    assert "cluster-doctor preflight · 1 node" in first.stdout, first.stdout
    assert re.search(r"^\d+ fail, \d+ warn, \d+ pass, \d+ skip$", first.stdout, re.M)
    assert "Traceback" not in first.stdout + first.stderr
    assert "pip from pip-" in first.stderr  # no ensurepip here: pip came from the pinned wheel
    assert f"the doctor is {cleanroot.CHECKOUT}/.venv/bin/doctor" in first.stderr
    # Nothing installed outside the checkout: no Debian package, nothing in the system's Python
    # or /usr/local; pip's download cache is all it leaves in the home folder.
    added = cleanroot.files(root, cleanroot.CHECKOUT) - before
    assert {p for p in added if not p.startswith("root/.cache")} == set(), sorted(added)[:20]

    # A second run installs nothing and goes straight to the doctor.
    started = time.monotonic()
    again = cleanroot.run(root, in_checkout, env)
    took = time.monotonic() - started
    assert again.returncode == first.returncode, again.stderr
    said = [line for line in again.stderr.splitlines() if line.startswith("install.py:")]
    assert said == [f"install.py: the doctor is {cleanroot.CHECKOUT}/.venv/bin/doctor"], said
    assert "cluster-doctor preflight · 1 node" in again.stdout
    assert took < 30, took

    # In an active virtualenv (made without pip, as Debian's python3 makes them) the doctor goes
    # there, not into .venv.
    in_venv = cleanroot.run(
        root,
        "python3 -m venv --without-pip /root/env && . /root/env/bin/activate && "
        f"cd {cleanroot.CHECKOUT} && rm -rf .venv && python3 install.py --version",
        env,
    )
    assert in_venv.returncode == 0, in_venv.stderr[-3000:]
    assert in_venv.stdout.startswith("cluster-doctor "), in_venv.stdout
    assert (root / "root/env/bin/doctor").exists()
    assert not (root / cleanroot.CHECKOUT.lstrip("/") / ".venv").exists()
