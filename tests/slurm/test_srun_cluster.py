"""doctor preflight through a real srun, inside a real allocation, on namespace nodes."""

from __future__ import annotations

import json
import time

import pytest

from tests.cluster.slurm import Slurm
from tests.slurm.conftest import DOCTOR

pytestmark = pytest.mark.cluster


def preflight_in_allocation(
    slurm: Slurm, *args: str, timeout: float = 90
) -> tuple[dict, str, float]:
    started = time.monotonic()
    proc = slurm.client(
        [
            "salloc",
            "-N3",
            "-w",
            "node[1-3]",
            "--immediate=20",
            DOCTOR,
            "preflight",
            "-f",
            "json",
            *args,
        ],
        timeout=timeout,
    )
    elapsed = time.monotonic() - started
    assert proc.stdout.strip().startswith("{"), proc.stderr
    return json.loads(proc.stdout), proc.stderr, elapsed


def test_srun_collects_three_different_nodes(slurm: Slurm) -> None:
    report, err, _ = preflight_in_allocation(slurm, "--launcher", "srun")
    nodes = report["nodes"]
    assert sorted(nodes) == ["node1", "node2", "node3"], err
    assert all(n["status"] == "ok" for n in nodes.values()), nodes
    hostnames = {n["facts"]["system"]["hostname"] for n in nodes.values()}
    assert hostnames == {"node1", "node2", "node3"}
    addresses = {n.address for n in slurm.nodes}
    assert len(addresses) == 3
    # Each capture came from a task of one srun step of this allocation, one task per node.
    envs = [node["facts"]["env"] for node in nodes.values()]
    assert len({e["SLURM_JOB_ID"] for e in envs}) == 1
    assert sorted(e["SLURM_NODEID"] for e in envs) == ["0", "1", "2"]
    # The planted problem shows on node3 only, and fails the run.
    shm = [f for f in report["findings"] if f["code"] == "shm.too_small"]
    assert [f["nodes"] for f in shm] == [["node3"]]
    assert not slurm.leftovers()


def test_auto_uses_srun_inside_an_allocation(slurm: Slurm) -> None:
    report, err, _ = preflight_in_allocation(slurm)
    assert sorted(report["nodes"]) == ["node1", "node2", "node3"], err


def test_stopped_slurmd_is_reported_within_the_deadline(slurm: Slurm) -> None:
    node3 = next(n for n in slurm.nodes if n.name == "node3")
    slurm.stop_slurmd("node3")
    try:
        report, err, elapsed = preflight_in_allocation(slurm, "--deadline", "5")
    finally:
        slurm.start_slurmd(node3)
        slurm.wait_idle(["node3"], timeout=60)
    nodes = report["nodes"]
    assert nodes["node1"]["status"] == nodes["node2"]["status"] == "ok", err
    failure = nodes["node3"]["failure"]
    assert failure["code"] == "node.launch_failed", failure
    assert "node3" in failure["summary"]
    assert "failed on node node3" in failure["detail"]  # what srun said about it
    codes = {f["code"] for f in report["findings"] if f["nodes"] == ["node3"]}
    assert failure["code"] in codes
    # The doctor's own deadline (5 s probe + srun launch grace), not SLURM's 30 s node timeout.
    assert elapsed < 5 + 10 + 10, elapsed
