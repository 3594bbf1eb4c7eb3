"""One 3-node cluster for the whole fault matrix: every scenario puts back what it broke."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.harness import Cluster, make_cluster
from tests.cluster.slurm import Slurm, slurm_on


@pytest.fixture(scope="session")
def fault_cluster() -> Iterator[Cluster]:
    # Not under /tmp: the nodes' sshd configs and keys live in the work folder, and scenarios
    # mount over a node's /tmp.
    workdir = Path(tempfile.mkdtemp(prefix="cluster-doctor-faults-", dir="/var/tmp"))
    try:
        with make_cluster(3, workdir / "cluster") as cluster:
            yield cluster
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="session")
def fault_slurm(fault_cluster: Cluster) -> Iterator[Slurm]:
    """SLURM over the same nodes, for the srun column (started at its first run)."""
    scratch = Path(tempfile.mkdtemp(prefix="cluster-doctor-slurm-", dir="/var/tmp"))
    try:
        with slurm_on(fault_cluster, scratch) as slurm:
            yield slurm
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
