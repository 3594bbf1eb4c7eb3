"""Hung jobs inside a real SLURM allocation: `doctor run --hang-after` with torchrun run as one
srun step per node, and `doctor stacks --launcher srun` (into the running allocation) on a
job srun started itself. Each names the sleeping rank's node only, and nothing is left."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from tests.cluster.slurm import Slurm
from tests.slurm.conftest import DOCTOR
from tests.slurm.test_run_srun import SALLOC, no_leftovers

pytestmark = pytest.mark.cluster

JOB = str(Path(__file__).resolve().parents[1] / "hang" / "job.py")


def test_doctor_run_names_the_hung_rank_of_torchrun_srun_steps(
    slurm: Slurm, tmp_path: Path
) -> None:
    torchrun = [
        sys.executable, "-m", "torch.distributed.run", "--nnodes", "{nnodes}",
        "--nproc-per-node", "2", "--node-rank", "{node_rank}", "--master-addr",
        "{master_addr}", "--master-port", "{master_port}", JOB, "--mode", "sleep", "--rank", "3",
    ]  # fmt: skip
    run = [*DOCTOR, "run", "--python", sys.executable, "--profile", "quick", "--exclude", "shm"]
    run += ["--logs", str(tmp_path), "--hang-after", "8", "--on-hang", "stop", "--grace", "3"]
    proc = slurm.client([*SALLOC, *run, "--", *torchrun], timeout=300)
    assert proc.returncode == 124, proc.stderr[-3000:]
    report = json.loads((tmp_path / "hang-1.json").read_text())
    (finding,) = [f for f in report["findings"] if f["check"] == "hang"]
    assert finding["code"] == "hang.outside_collective" and finding["nodes"] == ["node2"]
    assert finding["data"]["ranks"] == [3]
    assert no_leftovers(slurm), slurm.leftovers()


def test_doctor_stacks_reaches_a_job_srun_started_through_srun(
    slurm: Slurm, tmp_path: Path
) -> None:
    """srun starts the ranks (two a node, RANK from SLURM_PROCID); the doctor, in the same
    allocation, looks at them through its own srun steps (--overlap)."""
    rank = (
        "RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS LOCAL_RANK=$SLURM_LOCALID "
        f"MASTER_ADDR=node1 MASTER_PORT=29631 exec {sys.executable} {JOB} --mode sleep --rank 3"
    )
    log = tmp_path / "job.log"
    stacks = [*DOCTOR, "stacks", "--launcher", "srun", "--python", sys.executable, "-f", "json"]
    script = (
        f"srun -O --ntasks-per-node=2 --kill-on-bad-exit=0 sh -c {shlex.quote(rank)} > {log} 2>&1 &"
        f" for i in $(seq 120); do [ $(grep -c 'steps done' {log}) -ge 6 ] && break; sleep 1; done;"
        f" sleep 2; {shlex.join(stacks)} > {tmp_path / 'stacks.json'}; kill $!; wait"
    )
    proc = slurm.client([*SALLOC, "sh", "-c", script], timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((tmp_path / "stacks.json").read_text())
    (finding,) = [f for f in report["findings"] if f["check"] == "hang"]
    assert finding["code"] == "hang.outside_collective" and finding["nodes"] == ["node2"]
    assert finding["data"]["ranks"] == [3]
    assert no_leftovers(slurm), slurm.leftovers()
