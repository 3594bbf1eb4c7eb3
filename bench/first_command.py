"""The README's first command in clean Debian roots: how long a new user waits.

    python3 -m bench.first_command [--suites bookworm,trixie] [--out bench/first_command.json]

For each suite: a fresh root (tests/cleanroot.py: debootstrap's minbase with python3 only), this
checkout copied in, then `python3 install.py` timed twice: the first run (a .venv, pip from the
pinned wheel, the doctor and its requirements from the index, then `doctor preflight`) and the
second (nothing to install: straight to the preflight). Needs root, debootstrap, Debian's mirror
and the package index; the roots are removed afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

from tests import cleanroot

COMMAND = f"cd {cleanroot.CHECKOUT} && python3 install.py"


def measure(suite: str) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="first-command-") as folder:
        root = Path(folder, suite)
        cleanroot.build(root, suite)
        cleanroot.copy_checkout(root)
        env = cleanroot.site_ca(root)
        python = cleanroot.run(root, "python3 --version", env).stdout.split()[-1]
        runs = []
        for _ in range(2):
            started = time.monotonic()
            proc = cleanroot.run(root, COMMAND, env)
            runs.append(round(time.monotonic() - started, 1))
            assert proc.returncode in (0, 1), proc.stderr[-2000:]
            assert "cluster-doctor preflight" in proc.stdout, proc.stdout[-2000:]
        return {"suite": suite, "python": python, "first_s": runs[0], "second_s": runs[1]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suites", default="bookworm,trixie")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_suffix(".json"))
    args = parser.parse_args()
    results = [measure(s) for s in args.suites.split(",")]
    doc = {
        "what": "python3 install.py in a clean Debian root (debootstrap minbase + python3), "
        "first run and second run, whole command, seconds",
        "machine": f"{platform.machine()}, {len(os.sched_getaffinity(0))} cores",
        "results": results,
    }
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
