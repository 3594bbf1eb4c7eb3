"""A job's processes on the test bed's nodes: which are still running, and waiting until none is.

The namespace nodes share one PID space; a node's processes are those in its network namespace
(``ip netns pids``), matched by their command line.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

from tests.cluster.harness import Cluster
from tests.cluster.netns import sh


def running(c: Cluster, marks: tuple[str, ...]) -> dict[str, dict[int, str]]:
    """Per node, the pids (and command lines) of its processes that match (zombies are gone)."""
    found: dict[str, dict[int, str]] = {}
    for node in c.nodes:
        for pid in sh("ip", "netns", "pids", node.ns.name, check=False).stdout.split():
            with contextlib.suppress(OSError):
                stat = Path(f"/proc/{pid}/stat").read_text()
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
                if stat.rsplit(")", 1)[1].split()[0] != "Z" and any(
                    m.encode() in cmdline for m in marks
                ):
                    found.setdefault(node.name, {})[int(pid)] = cmdline.decode()[:120]
    return found


def left_behind(c: Cluster, marks: tuple[str, ...]) -> dict[str, list[str]]:
    """The job's processes still on each node."""
    return {node: list(pids.values()) for node, pids in running(c, marks).items()}


def end_job(c: Cluster, marks: tuple[str, ...]) -> None:
    """Kill, by pid, what a test launched by hand on the nodes (the doctor's own must be gone
    by itself: ``settle`` checks that)."""
    for pids in running(c, marks).values():
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def settle(c: Cluster, marks: tuple[str, ...], seconds: float = 10) -> dict[str, list[str]]:
    """What is still running once SSH sessions have had time to close."""
    end = time.monotonic() + seconds
    while (left := left_behind(c, marks)) and time.monotonic() < end:
        time.sleep(0.3)
    return left
