"""The NCCL path for real, where a GPU exists (skipped on CPU-only machines such as CI).

Two ranks on one GPU look like two hosts to NCCL with distinct NCCL_HOSTID and NCCL_NET=Socket
(technical-notes §8.2): a plumbing test of bootstrap, eager init and the NET transport.
"""

from __future__ import annotations

import pytest

from tests.gpu.two_hosts import run_two_hosts

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine"),
]


def test_two_ranks_on_one_gpu_over_nccl_socket() -> None:
    stage = run_two_hosts()
    (run,) = stage.runs
    assert run.status == "passed", run.headline()
    assert run.nccl is not None and run.nccl["nnodes"] == 2
    assert "NET/Socket" in run.nccl["transports"]
