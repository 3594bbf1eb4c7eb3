"""The controller's own limit on open files, raised where many nodes need more: a login node's
soft limit is often 1,024, and a preflight of 1,024 nodes holds about 1,550 (docs/scale.md)."""

from __future__ import annotations

import subprocess
import sys

CODE = """
import resource
from doctor.nodes.connect import room_for

resource.setrlimit(resource.RLIMIT_NOFILE, ({soft}, {hard}))
for nodes in {nodes}:
    room_for(nodes)
    print(*resource.getrlimit(resource.RLIMIT_NOFILE))
"""


def limits(soft: int, hard: int, nodes: list[int]) -> list[tuple[int, int]]:
    """Run in a child process: this one's limit stays as it was."""
    code = CODE.format(soft=soft, hard=hard, nodes=nodes)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return [(int(a), int(b)) for a, b in (line.split() for line in out.stdout.splitlines())]


def test_many_nodes_raise_the_soft_limit_toward_the_hard_one() -> None:
    assert limits(64, 4096, [10, 1024, 10]) == [(276, 4096), (2304, 4096), (2304, 4096)]


def test_never_past_the_hard_limit() -> None:
    assert limits(64, 512, [1024]) == [(512, 512)]


def test_a_high_enough_limit_is_left_alone() -> None:
    assert limits(4096, 4096, [128]) == [(4096, 4096)]
