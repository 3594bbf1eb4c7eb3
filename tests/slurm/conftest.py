"""A real SLURM over the namespace cluster, started once per module and stopped after.

Needs root, munge and SLURM's daemons: where they are missing these tests fail (CI installs
them); they never skip.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import ExitStack

import pytest

from tests.cluster.harness import make_cluster
from tests.cluster.slurm import Slurm, slurm_on

# The doctor as a command; ``-m`` works wherever pip put (or did not put) the console script.
DOCTOR = [sys.executable, "-m", "doctor"]


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Slurm]:
    """Three nodes; node3's /dev/shm is Docker's 64 MB (a planted problem the checks must see)."""
    assert os.geteuid() == 0, "the SLURM test bed needs root (network namespaces, mounts)"
    workdir = tmp_path_factory.mktemp("nodes")
    with ExitStack() as stack:
        cluster = stack.enter_context(make_cluster(3, workdir, small_shm=("node3",)))
        yield stack.enter_context(slurm_on(cluster, tmp_path_factory.mktemp("slurm")))
