"""Make real failures that surface through PyTorch and the host, not NCCL, and save what they print.

Run by hand as root from the repository root: ``python tests/explain/capture/host_failures.py
[scenario ...]``. Everything runs real torch (CPU) on this machine: DataLoader workers that die,
shared memory that is full (a 256 KiB tmpfs on /dev/shm in a private mount namespace, made with
``unshare -m``), torchrun workers that fail or are killed, a worker the kernel's OOM killer ends
inside a memory cgroup of its own (with the kernel's own log lines), and healthy runs with every
debug log on. Output goes to tests/fixtures/logs/real/.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from tests.explain.capture.bed import save as save_to

PY = sys.executable
TINY_SHM = 'mount -t tmpfs -o size=256k tmpfs /dev/shm && exec "$0" "$@"'
CGROUP = Path("/sys/fs/cgroup/memory/doctor-capture-oom")

# A DataLoader whose worker does something to itself at the tenth sample (CAP_SIGNAL), or whose
# samples are large enough to overflow a tiny /dev/shm when collated into shared memory.
LOADER = r"""
import os, signal, torch
from torch.utils.data import DataLoader, Dataset
class Samples(Dataset):
    def __len__(self):
        return 64
    def __getitem__(self, i):
        if i == 9 and os.environ.get("CAP_SIGNAL"):
            os.kill(os.getpid(), getattr(signal, os.environ["CAP_SIGNAL"]))
        return torch.zeros(int(os.environ.get("CAP_NUMEL", "4")))
for batch in DataLoader(Samples(), num_workers=2, batch_size=4):
    pass
print("done", flush=True)
"""

# A torchrun worker: join the Gloo group, then rank 1 fails as CAP_MODE says; allreduce.
WORKER = r"""
import datetime, os, signal, torch, torch.distributed as dist
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=5))
rank, mode = dist.get_rank(), os.environ.get("CAP_MODE", "")
if rank == 1 and mode == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
if rank == 1 and mode == "raise":
    raise ValueError("batch 17 has 3 samples, expected 4")
if rank == 1 and mode == "oom":
    # Join a memory cgroup limited to 64 MiB, then allocate 512 MiB: the kernel kills us.
    cgroup = os.environ["CAP_CGROUP"]
    with open(f"{cgroup}/cgroup.procs", "w") as f:
        f.write(str(os.getpid()))
    hog = torch.ones(128 << 20)
t = torch.ones(1)
dist.all_reduce(t)
print(f"rank {rank} sum {t.item()}", flush=True)
dist.destroy_process_group()
"""


# An MPI program whose rank 1 dereferences NULL after MPI_Init: Open MPI's own signal handler
# (opal/util/stacktrace.c) prints the crash, then mpirun its report of the rank.
SEGFAULT_C = r"""
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    printf("rank %d up\n", rank);
    fflush(stdout);
    if (rank == 1) *(volatile int *)0 = 1;
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
"""


def save(name: str, header: str, text: str) -> None:
    save_to(__file__, name, header, text)


def run(argv: list[str], env: dict[str, str] | None = None, timeout: float = 120) -> str:
    proc = subprocess.run(
        argv, env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=timeout
    )
    return proc.stdout + proc.stderr


def run_until(argv: list[str], seconds: float, limits: str = "") -> str:
    """What a command printed before it ended or, if it hangs, until ``seconds`` passed."""
    shell = ["sh", "-c", f'{limits} exec "$0" "$@"', *argv] if limits else argv
    proc = subprocess.Popen(shell, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        return proc.communicate(timeout=seconds)[0]
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.communicate()[0]


def torchrun(script: Path, env: dict[str, str]) -> str:
    argv = [PY, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2"]
    return run([*argv, "--max-restarts=0", str(script)], env)


def dataloader_worker_killed() -> None:
    out = run([PY, "-c", LOADER], {"CAP_SIGNAL": "SIGKILL"})
    save("torch-dataloader-killed.log", "DataLoader, 2 workers, one SIGKILLs itself", out)


def dataloader_bus_error() -> None:
    """The signal a worker gets when it touches shared memory that /dev/shm could not back."""
    out = run([PY, "-c", LOADER], {"CAP_SIGNAL": "SIGBUS"})
    save(
        "torch-dataloader-bus-error.log",
        "DataLoader, 2 workers, one gets SIGBUS (sent by itself, as a full /dev/shm would)",
        out,
    )


def dataloader_timeout() -> None:
    """A worker slower than the DataLoader's timeout (a stuck read, a dead filesystem)."""
    code = (
        "import time, torch\n"
        "from torch.utils.data import DataLoader, Dataset\n"
        "class Slow(Dataset):\n"
        "    def __len__(self):\n"
        "        return 8\n"
        "    def __getitem__(self, i):\n"
        "        time.sleep(5)\n"
        "        return torch.zeros(2)\n"
        "for batch in DataLoader(Slow(), num_workers=1, timeout=2):\n"
        "    pass\n"
    )
    save(
        "torch-dataloader-timeout.log",
        "DataLoader(timeout=2), 1 worker taking 5 s a sample",
        run([PY, "-c", code]),
    )


def dataloader_shm_full() -> None:
    out = run(["unshare", "-m", "sh", "-c", TINY_SHM, PY, "-c", LOADER], {"CAP_NUMEL": "262144"})
    save(
        "torch-dataloader-shm-full.log",
        "DataLoader, 2 workers, batches of 4 MiB, /dev/shm a 256 KiB tmpfs (unshare -m)",
        out,
    )


def share_memory_full() -> None:
    code = "import torch\ntorch.zeros(1 << 20).share_memory_()\n"
    out = run(["unshare", "-m", "sh", "-c", TINY_SHM, PY, "-c", code])
    save("torch-share-memory-full.log", "tensor.share_memory_(), /dev/shm 256 KiB", out)


def shm_too_many_files() -> None:
    """Batches of 200 tensors, each shared through its own file descriptor, under ulimit -n 64.

    The loader then repeats its workers' errors until killed: the first 120 lines are kept."""
    code = (
        "import torch\n"
        "from torch.utils.data import DataLoader, Dataset\n"
        "class Samples(Dataset):\n"
        "    def __len__(self):\n"
        "        return 64\n"
        "    def __getitem__(self, i):\n"
        "        return [torch.zeros(4) for _ in range(200)]\n"
        "loader = DataLoader(Samples(), num_workers=2, batch_size=1, collate_fn=lambda x: x[0])\n"
        "for batch in loader:\n"
        "    pass\n"
    )
    save(
        "torch-shm-too-many-files.log",
        "DataLoader, 2 workers, 200 tensors per batch, ulimit -n 64; its first 120 lines",
        "".join(run_until([PY, "-c", code], 10, "ulimit -n 64;").splitlines(True)[:120]),
    )


def torchrun_worker_killed(folder: Path) -> None:
    out = torchrun(folder / "worker.py", {"CAP_MODE": "kill"})
    save("torchrun-worker-sigkill.log", "torchrun, 2 Gloo workers, rank 1 SIGKILLs itself", out)


def torchrun_worker_exception(folder: Path) -> None:
    out = torchrun(folder / "worker.py", {"CAP_MODE": "raise"})
    save("torchrun-worker-exception.log", "torchrun, 2 Gloo workers, rank 1 raises", out)


def torchrun_worker_oom(folder: Path) -> None:
    """Rank 1 joins a memory cgroup of 64 MiB and allocates 512 MiB; the kernel's lines follow."""
    CGROUP.mkdir(exist_ok=True)
    try:
        (CGROUP / "memory.limit_in_bytes").write_text(str(64 << 20))
        out = torchrun(folder / "worker.py", {"CAP_MODE": "oom", "CAP_CGROUP": str(CGROUP)})
        kernel = subprocess.run(["dmesg"], capture_output=True, text=True).stdout.splitlines()
        # The kernel log is the machine's: keep its last OOM report, from "invoked oom-killer"
        # to the reaper's line after "Killed process".
        end = max(i for i, line in enumerate(kernel) if "Killed process" in line)
        start = max(i for i, line in enumerate(kernel[:end]) if "invoked oom-killer" in line)
        if end + 1 < len(kernel) and "oom_reaper" in kernel[end + 1]:
            end += 1
        report = kernel[start : end + 1]
        save(
            "torchrun-worker-oom-killed.log",
            "torchrun, 2 Gloo workers, rank 1 in a 64 MiB memory cgroup allocates 512 MiB; "
            "then the kernel's OOM report from dmesg",
            out + "\n".join(report) + "\n",
        )
    finally:
        CGROUP.rmdir()


def healthy_torchrun_debug(folder: Path) -> None:
    env = {"TORCH_CPP_LOG_LEVEL": "INFO", "TORCH_DISTRIBUTED_DEBUG": "DETAIL", "LOGLEVEL": "INFO"}
    out = torchrun(folder / "worker.py", env)
    save(
        "healthy-torchrun-gloo-debug.log",
        "torchrun, 2 Gloo workers, allreduce succeeds; TORCH_CPP_LOG_LEVEL=INFO "
        "TORCH_DISTRIBUTED_DEBUG=DETAIL LOGLEVEL=INFO",
        out,
    )


def healthy_torchrun_two_agents(folder: Path) -> None:
    """Two torchrun agents of one c10d rendezvous on this host, the second 4 s late: the late one
    finds the store's port taken (the first agent hosts it) and joins as a client."""
    argv = [PY, "-m", "torch.distributed.run", "--nnodes=2", "--nproc-per-node=1"]
    argv += ["--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:29622", "--rdzv-id=late"]
    argv += ["--max-restarts=0", str(folder / "worker.py")]
    env = {**os.environ, "TORCH_CPP_LOG_LEVEL": "INFO", "LOGLEVEL": "INFO"}
    first = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    time.sleep(4)
    second = run(argv, env)
    save(
        "healthy-torchrun-two-agents.log",
        "torchrun --nnodes=2 twice on this host (c10d rendezvous), the second 4 s late, Gloo "
        "allreduce succeeds; TORCH_CPP_LOG_LEVEL=INFO LOGLEVEL=INFO; the first agent's output, "
        "then the second's",
        first.communicate(timeout=120)[0] + second,
    )


def healthy_dataloader() -> None:
    """Workers that start, warn and finish: nothing to explain."""
    code = (
        "import warnings, torch\n"
        "from torch.utils.data import DataLoader\n"
        "warnings.simplefilter('always')\n"
        "loader = DataLoader(list(range(64)), num_workers=2, batch_size=8, pin_memory=True,\n"
        "                    persistent_workers=True)\n"
        "for epoch in range(2):\n"
        "    for step, batch in enumerate(loader):\n"
        "        print(f'epoch {epoch} step {step} batch {batch.tolist()}', flush=True)\n"
    )
    save(
        "healthy-dataloader.log",
        "DataLoader, 2 persistent workers, pin_memory without CUDA (warns), 2 epochs",
        run([PY, "-W", "always", "-c", code]),
    )


def mpi_rank_segfault(folder: Path) -> None:
    source, program = folder / "segv.c", folder / "segv"
    source.write_text(SEGFAULT_C)
    subprocess.run(["mpicc", "-o", str(program), str(source)], check=True)
    argv = ["mpirun", "--allow-run-as-root", "-np", "2", "-H", "localhost:2", str(program)]
    save("mpi-rank-segfault.log", "mpirun -np 2 -H localhost:2, rank 1 segfaults", run(argv))


def main(wanted: set[str]) -> None:
    with tempfile.TemporaryDirectory(prefix="doctor-capture-") as tmp:
        folder = Path(tmp)
        (folder / "worker.py").write_text(WORKER)
        scenarios = {
            "dataloader_worker_killed": dataloader_worker_killed,
            "dataloader_bus_error": dataloader_bus_error,
            "dataloader_timeout": dataloader_timeout,
            "dataloader_shm_full": dataloader_shm_full,
            "share_memory_full": share_memory_full,
            "shm_too_many_files": shm_too_many_files,
            "torchrun_worker_killed": lambda: torchrun_worker_killed(folder),
            "torchrun_worker_exception": lambda: torchrun_worker_exception(folder),
            "torchrun_worker_oom": lambda: torchrun_worker_oom(folder),
            "healthy_torchrun_debug": lambda: healthy_torchrun_debug(folder),
            "healthy_torchrun_two_agents": lambda: healthy_torchrun_two_agents(folder),
            "healthy_dataloader": healthy_dataloader,
            "mpi_rank_segfault": lambda: mpi_rank_segfault(folder),
        }
        for name, scenario in scenarios.items():
            if not wanted or name in wanted:
                scenario()


if __name__ == "__main__":
    main(set(sys.argv[1:]))
