"""The floor every cluster benchmark compares the doctor against: ``ssh <node> true`` to every
node at once, with the test bed's own ssh_config (what a parallel-ssh loop costs a user)."""

from __future__ import annotations

import shlex
import subprocess
import time
from pathlib import Path

from tests.cluster.harness import Cluster


def logins(
    ssh_config: Path, commands: dict[str, str], what: str, timeout: float, stdin: bytes = b""
) -> float:
    """Seconds for one login per node running its command (``stdin`` on its standard input), all
    started together, until the last one ends: every floor a benchmark sets beside the doctor."""
    started = time.perf_counter()
    procs = [
        subprocess.Popen(
            ["ssh", "-F", str(ssh_config), "-o", "BatchMode=yes", node, command],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for node, command in commands.items()
    ]
    for p in procs:
        assert p.stdin is not None
        p.stdin.write(stdin)
        p.stdin.close()
    if any(p.wait(timeout) != 0 for p in procs):
        raise RuntimeError(f"{what}: a login failed")
    return time.perf_counter() - started


# Run ``each`` (a shell command using "$t") once per target at once, and fail if any run failed:
# a bare ``wait`` exits 0 whatever its jobs did, which once let a floor that ran nothing pass.
EACH = (
    'p=; for t in "$@"; do {each} & p="$p $!"; done; '
    "s=0; for j in $p; do wait $j || s=1; done; exit $s"
)


def fan_out(each: str, targets: list[str]) -> str:
    """A command that runs ``each`` for every target at once and fails if any of them failed."""
    return shlex.join(["sh", "-c", EACH.format(each=each), "sh", *targets])


def by_source(pairs: list[tuple[str, str]]) -> dict[str, list[str]]:
    """The targets of each source node, in the pairs' order."""
    peers: dict[str, list[str]] = {}
    for source, target in pairs:
        peers.setdefault(source, []).append(target)
    return peers


def ssh_floor(c: Cluster, timeout: float = 120) -> float:
    """Seconds for one ``ssh true`` per node, all started together, until the last one ends."""
    return logins(c.ssh_config, dict.fromkeys(c.names, "true"), "ssh floor", timeout)
