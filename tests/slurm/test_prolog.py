"""The doctor as SLURM's real Prolog: a 64 MB /dev/shm node is drained, a good one runs jobs."""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Iterator
from contextlib import ExitStack

import pytest

from tests.cluster.harness import make_cluster
from tests.cluster.slurm import Slurm, slurm_on
from tests.slurm.conftest import DOCTOR

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def prolog_slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Slurm]:
    assert os.geteuid() == 0, "the SLURM test bed needs root (network namespaces, mounts)"
    scratch = tmp_path_factory.mktemp("slurm-prolog")
    prolog = scratch / "prolog.sh"
    # As docs/slurm.md shows: Slurm runs the Prolog with no search path, so the script sets one.
    # Its kernel log window starts now: this machine's log holds lines other tests planted.
    since = f"@{time.time():.6f}"
    prolog.write_text(
        "#!/bin/sh\nPATH=/usr/sbin:/usr/bin:/sbin:/bin\n"
        f"exec {shlex.join(DOCTOR)} preflight --local --prolog --since {since}\n"
    )
    prolog.chmod(0o755)
    with ExitStack() as stack:
        cluster = stack.enter_context(
            make_cluster(2, tmp_path_factory.mktemp("nodes"), small_shm=("node2",))
        )
        yield stack.enter_context(slurm_on(cluster, scratch, prolog=str(prolog)))


def test_healthy_node_runs_the_job(prolog_slurm: Slurm) -> None:
    proc = prolog_slurm.client(["srun", "-w", "node1", "--immediate=20", "hostname"], timeout=60)
    assert (proc.returncode, proc.stdout) == (0, "node1\n"), proc.stderr
    prolog_slurm.wait_idle(["node1"])  # not drained: back to idle once the job is done


def test_node_with_small_shm_is_drained_with_the_reason_logged(prolog_slurm: Slurm) -> None:
    proc = prolog_slurm.client(["srun", "-w", "node2", "--immediate=20", "hostname"], timeout=60)
    assert proc.returncode != 0 and "node2" not in proc.stdout
    assert "Prolog failure on node node2" in proc.stderr
    state = prolog_slurm.client(["scontrol", "show", "node", "node2"]).stdout
    assert "+DRAIN" in state and "Reason=Prolog error" in state, state
    # slurmd logs the Prolog's output: the doctor's one line says why.
    log = (prolog_slurm.scratch / "slurmd.node2.log").read_text()
    assert (
        "prolog failed: rc:1 output:cluster-doctor: node2: shm.too_small: /dev/shm is only 64 MiB"
        in log
    )
    prolog_slurm.wait_idle(["node1"])  # not drained: back to idle once the job is done
