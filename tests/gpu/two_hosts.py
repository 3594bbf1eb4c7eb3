"""Two NCCL "hosts" on one GPU: distinct NCCL_HOSTID and NCCL_NET=Socket make NCCL count two nodes
(technical-notes §8.2), a plumbing run of bootstrap, eager init and the NET transport. The GPU
test asserts on it, the GPU capture saves its report (allreduce-two-hosts.json)."""

from __future__ import annotations

import sys

from doctor.nodes.inventory import Node
from doctor.nodes.transport.launch import LocalLauncher, Process
from doctor.stages.allreduce.stage import Job
from tests.allreduce.stagekit import Staged, run_stage


class HostIdLauncher(LocalLauncher):
    """Each "node" gets its own NCCL host identity, so NCCL counts two nodes."""

    def start(self, node: Node, argv: list[str], stdin: bytes) -> Process | str:
        env = [f"NCCL_HOSTID=doctor-{node.name}", "NCCL_NET=Socket", "NCCL_SOCKET_IFNAME==lo"]
        return super().start(node, ["env", *env, *argv], stdin)


def run_two_hosts() -> Staged:
    """The allreduce stage across two ranks of the one GPU, each its own NCCL host."""
    nodes = (Node("gpu-a"), Node("gpu-b"))
    job = Job(
        nodes=nodes,
        backend="nccl",
        gpus={"gpu-a": 1, "gpu-b": 1},
        python=sys.executable,
        sizes=(4096, 1 << 20),
        recommendation={},
    )
    return run_stage(job, HostIdLauncher())
