"""Real NCCL logs from torch on one GPU: a healthy rank, two ranks made two 'hosts' by
NCCL_HOSTID, and two ranks on one GPU (NCCL refuses them). Saves under tests/fixtures/logs/real.

Run by hand on a machine with one NVIDIA GPU and a CUDA torch (the fixtures were taken on an
H200 in a Firecracker VM named "vm", torch 2.11.0+cu130, NCCL 2.28.9):
``python tests/explain/capture/gpu_nccl.py``. No InfiniBand there: NCCL uses sockets on eth0.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from tests.explain.capture.bed import save

WORKER = """
import os, torch, torch.distributed as d
if os.environ.get("HOSTID_PER_RANK"):  # each rank a 'host' of its own to NCCL (host hash)
    os.environ["NCCL_HOSTID"] = "gpuhost-" + os.environ["LOCAL_RANK"]
d.init_process_group("nccl")
r = d.get_rank(); torch.cuda.set_device(0)
t = torch.ones(1 << 20, device="cuda")
for _ in range(3): d.all_reduce(t)
torch.cuda.synchronize()
print("rank", r, "sum", t[0].item(), flush=True)
d.destroy_process_group()
"""
SCENARIOS = [
    # name, header, torchrun arguments, environment
    ("healthy-nccl-one-rank.log", "torchrun --nproc_per_node=1, one allreduce",
     ["--nproc_per_node=1"], {"NCCL_DEBUG_SUBSYS": "INIT,BOOTSTRAP,ENV,NET"}),
    ("healthy-nccl-two-hostids.log",
     "torchrun --nproc_per_node=2 --tee 3, each rank its own NCCL_HOSTID (two 'nodes' of one "
     "hostname, over NET/Socket), three allreduces",
     ["--nproc_per_node=2", "--tee", "3"],
     {"NCCL_DEBUG_SUBSYS": "INIT,BOOTSTRAP,ENV,NET", "NCCL_SOCKET_IFNAME": "eth0",
      "HOSTID_PER_RANK": "1"}),
    ("healthy-nccl-two-hostids-default-subsys.log",
     "the same with NCCL's default subsystems and no --tee", ["--nproc_per_node=2"],
     {"NCCL_SOCKET_IFNAME": "eth0", "HOSTID_PER_RANK": "1"}),
    ("nccl-duplicate-gpu.log", "torchrun --nproc_per_node=2 --tee 3, both ranks on GPU 0",
     ["--nproc_per_node=2", "--tee", "3"], {"NCCL_DEBUG_SUBSYS": "INIT,BOOTSTRAP,ENV,NET"}),
]  # fmt: skip


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        worker = Path(tmp) / "w.py"
        worker.write_text(WORKER)
        for name, header, args, env in SCENARIOS:
            full = {**os.environ, "NCCL_DEBUG": "INFO", "NCCL_IB_TIMEOUT": "22", **env}
            argv = ["torchrun", *args, str(worker)]
            proc = subprocess.run(argv, env=full, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, timeout=150)  # fmt: skip
            settings = " ".join(f"{k}={v}" for k, v in env.items() if k != "HOSTID_PER_RANK")
            save(__file__, name, f"{header}; NCCL_DEBUG=INFO NCCL_IB_TIMEOUT=22 {settings}",
                 proc.stdout)  # fmt: skip


if __name__ == "__main__":
    main()
