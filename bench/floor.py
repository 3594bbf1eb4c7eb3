"""The floor every cluster benchmark compares the doctor against: ``ssh <node> true`` to every
node at once, with the test bed's own ssh_config (what a parallel-ssh loop costs a user)."""

from __future__ import annotations

import subprocess
import time

from tests.cluster.harness import Cluster


def ssh_floor(c: Cluster, timeout: float = 120) -> float:
    """Seconds for one ``ssh true`` per node, all started together, until the last one ends."""
    started = time.perf_counter()
    procs = [
        subprocess.Popen(
            ["ssh", "-F", str(c.ssh_config), "-o", "BatchMode=yes", name, "true"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for name in c.names
    ]
    if any(p.wait(timeout) != 0 for p in procs):
        raise RuntimeError("ssh floor: a node failed")
    return time.perf_counter() - started
