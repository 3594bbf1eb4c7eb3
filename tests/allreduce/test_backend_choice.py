"""--backend auto: NCCL where every node has an NVIDIA GPU, RCCL (torch's "nccl" on a ROCm build)
where every node has an AMD GPU and a ROCm torch, Gloo otherwise. The decision only: no AMD GPU
here to run RCCL on."""

from __future__ import annotations

from dataclasses import replace

import pytest

from doctor.facts.frameworks import FrameworkFacts
from doctor.facts.node import NodeFacts
from doctor.facts.pci import PciDevice
from doctor.nodes.inventory import Node
from doctor.pipeline.request import AllreduceSettings
from doctor.pipeline.steps import job_for
from tests import factkit as fk


def _amd_gpu(address: str) -> PciDevice:
    """An MI300X as sysfs lists it: AMD's vendor id, class 0x1200 (processing accelerator)."""
    return PciDevice(address, 0x1002, 0x74A1, 0x120000, "amdgpu", 0, "0-95", (address,))


def _rocm_torch() -> FrameworkFacts:
    frameworks = fk.torch("2.5.1+rocm6.2", cuda=None)
    assert frameworks.torch is not None
    return replace(frameworks, torch=replace(frameworks.torch, hip="6.2.41133-dd7f95766"))


def _backend(*nodes: NodeFacts) -> tuple[str, dict[str, int]]:
    inventory = [Node(n.node, address=f"10.0.0.{i}") for i, n in enumerate(nodes, 1)]
    job = job_for(AllreduceSettings(), inventory, {n.node: n for n in nodes}, "python3")
    return job.backend, job.gpus


def test_amd_nodes_with_a_rocm_torch_use_rccl_through_torchs_nccl_backend() -> None:
    gpus = [_amd_gpu(f"0000:{b:02x}:00.0") for b in (0x05, 0x15)]
    a = fk.node("mi300x-1", pci=gpus, frameworks=_rocm_torch())
    b = fk.node("mi300x-2", pci=gpus, frameworks=_rocm_torch())
    assert _backend(a, b) == ("nccl", {"mi300x-1": 2, "mi300x-2": 2})


def test_amd_gpus_with_a_cuda_or_cpu_torch_fall_back_to_gloo() -> None:
    gpus = [_amd_gpu("0000:05:00.0")]
    cuda = fk.node("mi300x-1", pci=gpus, frameworks=fk.torch())
    cpu = fk.node("mi300x-2", pci=gpus, frameworks=fk.torch("2.5.1+cpu", cuda=None))
    assert _backend(cuda, cpu)[0] == "gloo"


def test_one_node_without_a_usable_gpu_keeps_the_cluster_on_gloo() -> None:
    amd = fk.node("mi300x-1", pci=[_amd_gpu("0000:05:00.0")], frameworks=_rocm_torch())
    cpu = fk.node("cpu-1", pci=[fk.nic()], frameworks=_rocm_torch())
    assert _backend(amd, cpu)[0] == "gloo"


def test_nvidia_nodes_still_use_nccl() -> None:
    a, b = fk.node("h100-1", pci=[fk.gpu()]), fk.node("h100-2", pci=[fk.gpu()])
    assert _backend(a, b)[0] == "nccl"


@pytest.mark.parametrize("gpu", ["h200", "h100"])
def test_one_local_gpu_runs_one_nccl_rank_not_two_on_the_same_gpu(gpu: str) -> None:
    """The real captures of one-GPU nodes: `doctor allreduce --local` (2 ranks by default)
    gave NCCL "invalid usage" on the H200, its two ranks on one GPU of one host (the H100's
    report, after the fix: one rank, nothing to reduce across). Gloo still doubles."""
    import json
    from pathlib import Path

    from doctor.core.capture import Capture
    from doctor.facts.node import parse_node

    raw = json.loads((Path(__file__).parents[1] / f"fixtures/gpu/{gpu}/probe.json").read_text())
    facts = parse_node("vm", Capture(raw))
    local = Node("vm")  # no address: this machine
    job = job_for(AllreduceSettings(ranks=2), [local], {"vm": facts}, "python3")
    assert (job.backend, len(job.nodes), job.gpus) == ("nccl", 1, {"vm": 1})
    gloo = job_for(AllreduceSettings(ranks=2, backend="gloo"), [local], {"vm": facts}, "python3")
    assert len(gloo.nodes) == 2
