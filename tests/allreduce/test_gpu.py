"""The NCCL path for real, where a GPU exists (skipped on CPU-only machines such as CI).

Two ranks on one GPU look like two hosts to NCCL with distinct NCCL_HOSTID and NCCL_NET=Socket
(technical-notes §8.2): a plumbing test of bootstrap, eager init and the NET transport.
"""

from __future__ import annotations

import sys

import pytest

from doctor.nodes.inventory import Node
from doctor.nodes.transport.launch import LocalLauncher, Process
from doctor.stages.allreduce.stage import Job as Request
from tests.allreduce.stagekit import run_stage

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine"),
]


class HostIdLauncher(LocalLauncher):
    """Each "node" gets its own NCCL host identity, so NCCL counts two nodes."""

    def start(self, node: Node, argv: list[str], stdin: bytes) -> Process | str:
        env = [f"NCCL_HOSTID=doctor-{node.name}", "NCCL_NET=Socket", "NCCL_SOCKET_IFNAME==lo"]
        return super().start(node, ["env", *env, *argv], stdin)


def test_two_ranks_on_one_gpu_over_nccl_socket() -> None:
    nodes = (Node("gpu-a"), Node("gpu-b"))
    request = Request(
        nodes=nodes,
        backend="nccl",
        gpus={"gpu-a": 1, "gpu-b": 1},
        python=sys.executable,
        sizes=(4096, 1 << 20),
        recommendation={},
    )
    stage = run_stage(request, HostIdLauncher())
    (run,) = stage.runs
    assert run.status == "passed", run.headline()
    assert run.nccl is not None and run.nccl["nnodes"] == 2
    assert "NET/Socket" in run.nccl["transports"]
