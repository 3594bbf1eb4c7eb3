"""Real Gloo text of a hung collective: ranks on loopback, one of them late (or running another
collective, or gone), each scenario's whole output as a job's log leaves it. Saves under
tests/fixtures/logs/hang/gloo/. The ranks run under torchrun, or started each by itself (the
env:// rendezvous) where torchrun would end the others before they report.

Run by hand on a machine with torch (the fixtures were taken with torch 2.13.0+cpu, 2 CPUs):
``python tests/explain/hang/capture_gloo.py [NAME ...]`` (all scenarios, or those named). Each
takes 10 to 20 seconds.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

OUT = Path(__file__).resolve().parents[2] / "fixtures" / "logs" / "hang" / "gloo"

WORKER = """
import os, sys, time
from datetime import timedelta
import torch, torch.distributed as dist
rank, case = int(os.environ["RANK"]), sys.argv[1]
dist.init_process_group("gloo", timeout=timedelta(seconds=5))
t = torch.ones(4)
dist.all_reduce(t)
print(f"rank {rank}: step 0 done", flush=True)
late = {"allreduce": [1], "broadcast": [1], "barrier": [1], "barrier-root-late": [0],
        "barrier-all": [1, 2]}.get(case, [])
if rank in late:
    time.sleep(12)
if case == "allreduce":
    dist.all_reduce(t)
elif case == "broadcast":
    dist.broadcast(t, 0)
elif case.startswith("barrier"):
    dist.monitored_barrier(timeout=timedelta(seconds=5), wait_all_ranks=case == "barrier-all")
elif case == "mismatch":
    dist.all_reduce(t) if rank == 0 else dist.broadcast(t, 1)
elif case == "exit":
    if rank == 1:
        os._exit(3)
    time.sleep(1)
    dist.all_reduce(t)
print(f"rank {rank}: done", flush=True)
dist.destroy_process_group()
"""

# name, what it shows, the worker's case, ranks, TORCH_DISTRIBUTED_DEBUG (and "direct": each rank
# started by itself)
SCENARIOS = [
    ("allreduce-late-rank.log", "rank 1 sleeps 12 s before an allreduce (timeout 5 s)",
     "allreduce", 2, "OFF"),
    ("broadcast-late-rank.log", "rank 1 sleeps 12 s before a broadcast from rank 0",
     "broadcast", 2, "OFF"),
    ("allreduce-late-rank-detail.log", "as allreduce-late-rank.log, TORCH_DISTRIBUTED_DEBUG=DETAIL",
     "allreduce", 2, "DETAIL"),
    ("monitored-barrier-late-rank.log", "rank 1 sleeps 12 s before monitored_barrier",
     "barrier", 2, "OFF"),
    ("monitored-barrier-late-root.log", "rank 0 sleeps 12 s before monitored_barrier",
     "barrier-root-late", 2, "OFF"),
    ("monitored-barrier-wait-all.log",
     "ranks 1 and 2 sleep 12 s before monitored_barrier(wait_all_ranks=True)",
     "barrier-all", 3, "OFF"),
    ("mismatch-detail.log",
     "rank 0 runs allreduce, rank 1 broadcast, TORCH_DISTRIBUTED_DEBUG=DETAIL",
     "mismatch", 2, "DETAIL"),
    ("peer-exits-detail.log",
     "rank 1 exits before the second allreduce, TORCH_DISTRIBUTED_DEBUG=DETAIL, ranks started by"
     " themselves", "exit", 2, "DETAIL direct"),
]  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(case: str, ranks: int, debug: str, script: Path) -> str:
    """The scenario's output, every rank's in one stream as a job's log holds it."""
    env = {**os.environ, "TORCH_DISTRIBUTED_DEBUG": debug.split()[0], "OMP_NUM_THREADS": "1"}
    port = free_port()
    if "direct" not in debug:
        argv = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={ranks}",
                "--master-addr=127.0.0.1", f"--master-port={port}", str(script), case]  # fmt: skip
        done = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=120, check=False)  # fmt: skip
        return done.stdout
    read, write = os.pipe()
    rendezvous = {"WORLD_SIZE": str(ranks), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    started = [
        subprocess.Popen(
            [sys.executable, str(script), case],
            stdout=write,
            stderr=write,
            env={**env, **rendezvous, "RANK": str(r)},
        )
        for r in range(ranks)
    ]
    os.close(write)
    with os.fdopen(read) as stream:
        text = stream.read()
    for process in started:
        process.wait(timeout=120)
    return text


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "worker.py"
        script.write_text(WORKER)
        for name, header, case, ranks, debug in SCENARIOS:
            if sys.argv[1:] and name not in sys.argv[1:]:
                continue
            text = run(case, ranks, debug, script)
            head = f"# captured by tests/explain/hang/capture_gloo.py: torch {torch.__version__}"
            launcher = "torchrun" if "direct" not in debug else "python per rank"
            (OUT / name).write_text(f"{head}, {launcher}, {ranks} ranks, {header}\n{text}")
            print(f"saved {name}")


if __name__ == "__main__":
    main()
