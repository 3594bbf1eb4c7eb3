"""Make a multi-node job fail the ways a scheduler sees, on real Slurm, and save what it printed.

Run by hand as root from the repository root: ``python tests/explain/capture/scheduler.py
[scenario ...]``. The project's harness (tests/cluster/: three network-namespace nodes with their
own hostnames and addresses, real slurmctld and slurmd) runs tests/hang/job.py (torch, Gloo on
CPU), six ranks, two a node (``srun -l``: each line behind its task's label, RANK from
SLURM_PROCID, MASTER_ADDR node1). Every scenario's output (srun's stdout, then its stderr) goes to
tests/fixtures/logs/bed/ under the scenario's name, unedited; the README beside them says what
each is. Nothing is left running: the harness ends every process of its nodes.

- ``store-refused``: rank 0, on node1, exits at once instead of starting the job (its store never
  listens); the other ranks dial node1's store until their timeout.
- ``hung-timeout``: rank 3 (node2) sleeps after three steps; the others wait in the fourth
  allreduce until the process group's timeout (20 s) ends them; srun then ends rank 3.
- ``time-limit``: the same hang with a timeout longer than the job's time limit (1 minute):
  Slurm ends the job.
- ``node-fail``: the same hang; node2's slurmd is stopped while the job runs, and slurmctld,
  hearing nothing from it past SlurmdTimeout, sets it DOWN: the job's node failure.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from tests.cluster.harness import make_cluster
from tests.cluster.slurm import Slurm, slurm_on

ROOT = Path(__file__).resolve().parents[3]
OUT = ROOT / "tests" / "fixtures" / "logs" / "bed"
JOB = ROOT / "tests" / "hang" / "job.py"
PORT = 29641


def rank_line(mode: str, timeout: float, exit_rank: int | None = None) -> str:
    """The shell line srun runs for each task: the job, or (``exit_rank``) an exit at once."""
    env = (
        "RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS LOCAL_RANK=$SLURM_LOCALID "
        f"MASTER_ADDR=node1 MASTER_PORT={PORT}"
    )
    job = f"exec {sys.executable} {JOB} --mode {mode} --rank 3 --ddp_timeout {timeout:g}"
    if exit_rank is None:
        return f"{env} {job}"
    return f'[ "$SLURM_PROCID" = {exit_rank} ] && exit 3; {env} {job}'


def srun(slurm: Slurm, line: str, salloc: list[str], extra: str = "", timeout: float = 300) -> str:
    argv = [
        "salloc", "-N3", "-w", "node[1-3]", "--immediate=20", *salloc,
        "srun", "-l", "-O", "--ntasks-per-node=2", *extra.split(), "sh", "-c", line,
    ]  # fmt: skip
    proc = slurm.client(argv, timeout=timeout)
    return proc.stdout + proc.stderr


def store_refused(slurm: Slurm) -> tuple[str, str]:
    text = srun(slurm, rank_line("none", 20, exit_rank=0), [], "--kill-on-bad-exit=0")
    return text, "rank 0 (node1) exits 3 before the job starts: its store never listens"


def hung_timeout(slurm: Slurm) -> tuple[str, str]:
    text = srun(slurm, rank_line("sleep", 20), [], "--kill-on-bad-exit=1")
    return text, "rank 3 (node2) sleeps; the others' process group times out after 20 s"


def time_limit(slurm: Slurm) -> tuple[str, str]:
    text = srun(slurm, rank_line("sleep", 900), ["-t", "1"], timeout=400)
    return text, "rank 3 (node2) sleeps, the others wait (900 s): the 1 minute limit ends it"


def node_fail(slurm: Slurm) -> tuple[str, str]:
    argv = [
        "salloc", "-N3", "-w", "node[1-3]", "--immediate=20",
        "srun", "-l", "-O", "--ntasks-per-node=2", "sh", "-c", rank_line("sleep", 900),
    ]  # fmt: skip
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(argv, env=slurm.env, stdout=out, stderr=subprocess.STDOUT)
        try:
            time.sleep(25)  # the job's steps done, the ranks waiting
            node = next(n for n in slurm.nodes if n.name == "node2")
            slurm.stop_slurmd(node.name)
            proc.wait(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            slurm.start_slurmd(node)
        out.seek(0)
        text = out.read()
    return text, "rank 3 (node2) sleeps, the others wait; node2's slurmd stopped 25 s in"


SCENARIOS: dict[str, Callable[[Slurm], tuple[str, str]]] = {
    "store-refused": store_refused,
    "hung-timeout": hung_timeout,
    "time-limit": time_limit,
    "node-fail": node_fail,
}


def main(names: list[str]) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as work, ExitStack() as stack:
        cluster = stack.enter_context(make_cluster(3, Path(work) / "nodes"))
        slurm = stack.enter_context(slurm_on(cluster, Path(work) / "slurm"))
        for name in names or list(SCENARIOS):
            began = time.monotonic()
            text, what = SCENARIOS[name](slurm)
            header = (
                f"# captured by tests/explain/capture/scheduler.py {name} (Slurm on the harness's "
                f"three nodes, torch {torch_version()}, Gloo): {what}\n"
            )
            (OUT / f"{name}.log").write_text(header + text)
            print(f"saved {name}.log ({time.monotonic() - began:.0f} s)", flush=True)
            slurm.wait_idle([n.name for n in slurm.nodes], 120)


def torch_version() -> str:
    return subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.__version__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


if __name__ == "__main__":
    main([a for a in sys.argv[1:] if a in SCENARIOS])
