"""A real SLURM over namespace nodes, started once per module and stopped after.

Needs root, munge and SLURM's daemons: where they are missing these tests fail (CI installs
them); they never skip.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.slurm import Slurm, SlurmNode, slurm_cluster
from tests.slurm.nodes import bed

SHM_64M = 64 << 20
DOCTOR = str(Path(sys.executable).with_name("doctor"))


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Slurm]:
    """Three nodes; node3's /dev/shm is Docker's 64 MB (a planted problem the checks must see)."""
    assert os.geteuid() == 0, "the SLURM test bed needs root (network namespaces, mounts)"
    with bed(3) as b:
        nodes = [
            SlurmNode(name, ns.name, addr, SHM_64M if name == "node3" else None)
            for name, ns, addr in b.nodes
        ]
        scratch = tmp_path_factory.mktemp("slurm")
        with slurm_cluster(scratch, nodes, controller=b.controller) as s:
            yield s
