"""Capture how Slurm itself ends a job, on the project's harness (tests/cluster: 3 namespace
nodes, a real munge, slurmctld and slurmd per node): a step past its time limit, and a node lost
mid-step (its slurmd and the step's processes there stopped: slurmctld declares it down after
SlurmdTimeout, 30 s on the bed). Run by hand, as root (about three minutes):
``python tests/explain/capture/slurm_ends.py``. Each capture is srun's output, stdout then
stderr, unedited.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from tests.cluster.harness import make_cluster
from tests.cluster.slurm import Slurm, slurm_on

OUT = Path(__file__).resolve().parents[2] / "fixtures" / "logs" / "slurm"
STEP = "echo started on $(hostname); sleep 600"


def srun(slurm: Slurm, *args: str) -> subprocess.Popen[str]:
    argv = ["srun", "-l", "--ntasks-per-node=1", *args, "sh", "-c", STEP]
    return subprocess.Popen(
        argv, env=slurm.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def output(proc: subprocess.Popen[str], timeout: float) -> str:
    out, err = proc.communicate(timeout=timeout)
    return out + err


def save(name: str, header: str, text: str) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / name).write_text(f"# captured by tests/explain/capture/slurm_ends.py: {header}\n{text}")
    print(f"saved {name}")


def time_limit(slurm: Slurm) -> None:
    proc = srun(slurm, "-N2", "--time=1")
    save(
        "time-limit.log",
        "srun -l -N2 --time=1 of a step that sleeps (Slurm's bed, 3 nodes): ended at its limit",
        output(proc, timeout=300),
    )


def node_failure(slurm: Slurm) -> None:
    proc = srun(slurm, "-N3")
    time.sleep(5)
    node = slurm.nodes[1]
    slurm.stop_slurmd(node.name)
    for pid in slurm.leftovers().get(node.name, []):  # the node's step goes with it
        os.kill(pid, signal.SIGKILL)
    save(
        "node-failure.log",
        f"srun -l -N3 of a step that sleeps; {node.name}'s slurmd and step processes killed 5 s in "
        "(the node lost): slurmctld declares it down after SlurmdTimeout (30 s)",
        output(proc, timeout=300),
    )


def main() -> None:
    assert os.geteuid() == 0, "the Slurm bed needs root"
    with tempfile.TemporaryDirectory(prefix="doctor-slurm-ends-") as tmp:
        work = Path(tmp)
        (work / "nodes").mkdir()
        with make_cluster(3, work / "nodes") as cluster, slurm_on(cluster, work / "slurm") as s:
            time_limit(s)
            s.wait_idle([n.name for n in s.nodes], timeout=120)
            node_failure(s)


if __name__ == "__main__":
    main()
