"""Capture a job's whole log as a user pastes it: the echoed launch command, torchrun's own lines
(LOGLEVEL=INFO: its rendezvous result, global_world_sizes among them), the program's prints, and
the real libnccl's INFO lines of every rank, interleaved as they came.

Run by hand from the repository root: ``python tests/explain/capture/job_log.py``. torch (a CPU
build: Gloo carries the allreduce) and the nvidia-nccl-cu12 wheel must be installed. Each rank
calls ncclGetUniqueId through ctypes with NCCL_DEBUG=INFO (bootstrap lines need no GPU). NCCL
prints its version line at communicator init, which needs a GPU; so rank 0 prints the library's
own banner (the "NCCL version X+cudaY" string inside libnccl.so.2) once, bare, as NCCL before
2.9 printed it (init.cc showVersion: printf on stdout). Output: tests/fixtures/paste/.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

OUT = Path(__file__).resolve().parents[2] / "fixtures" / "paste"
NAME = "torchrun-job-nccl-bootstrap.log"

TRAIN = r"""
import ctypes, glob, os, re
import torch, torch.distributed as dist
import nvidia.nccl
path = glob.glob(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so*"))[0]
dist.init_process_group("gloo")
rank = dist.get_rank()
print(f"rank {rank}: loading model", flush=True)
uid = ctypes.create_string_buffer(128)
ctypes.CDLL(path).ncclGetUniqueId(uid)
if rank == 0:
    banner = re.search(rb"NCCL version [0-9.]+\+cuda[0-9.]+", open(path, "rb").read())
    print(banner.group().decode(), flush=True)
total = torch.ones(1) * (rank + 1)
dist.all_reduce(total)
print(f"rank {rank}: epoch 0 step 0 loss {1.0 / total.item():.4f}", flush=True)
dist.destroy_process_group()
"""


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        Path(folder, "train.py").write_text(TRAIN)
        env = {**os.environ, "LOGLEVEL": "INFO", "NCCL_DEBUG": "INFO"}
        proc = subprocess.run(
            ["bash", "-xc", "torchrun --nproc_per_node=2 --master_port=29733 train.py"],
            cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            timeout=300,
        )  # fmt: skip
    # The temporary folder's name changes each run: keep it out of the fixture.
    text = re.sub(r"/tmp/[\w.]+", "/tmp/capture", proc.stdout)
    header = (
        "# captured by tests/explain/capture/job_log.py: bash -x, torchrun --nproc_per_node=2 "
        "(torch CPU build, Gloo), LOGLEVEL=INFO NCCL_DEBUG=INFO; each rank's ncclGetUniqueId of "
        "the nvidia-nccl-cu12 wheel; the bare version line is that library's own banner string, "
        "printed once by rank 0 as NCCL before 2.9 did (its init needs a GPU)\n"
    )
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / NAME).write_text(header + text)
    print(f"saved {NAME} (rc {proc.returncode})")


if __name__ == "__main__":
    sys.exit(main())
