"""Every node has as many GPUs as the others, and as many as the ranks it is given."""

from __future__ import annotations

from collections.abc import Iterator

from doctor.core.model import Finding, Fix, Missing, Severity
from doctor.core.shell import command, commands
from doctor.facts.cluster import ClusterFacts
from doctor.facts.node import NodeFacts
from doctor.judge.drift import drift_findings, need_drift
from doctor.plugin import cluster_check

LIST = commands(
    "nvidia-smi -L", "amd-smi list", "lspci -d ::0300; lspci -d ::0302; lspci -d ::1200"
)


def gpu_count(f: NodeFacts) -> int | Missing:
    return f.gpus if isinstance(f.gpus, Missing) else len(f.gpus.gpus)


@cluster_check(
    "gpu.count",
    "Every node has the same number of GPUs, and at least one per rank it is given",
    needs=("gpus",),
    codes={
        "gpu.count.differs": "a node has a different number of GPUs than the others",
        "gpu.count.slots": "a node is given more ranks (slots) than it has GPUs",
    },
)
def count(cluster: ClusterFacts) -> Iterator[Finding]:
    slotted: dict[str, tuple[int, int]] = {}  # a node given slots that has GPUs: (slots, GPUs)
    for name, facts in cluster.nodes.items():
        node, gpus = cluster.inventory.get(name), gpu_count(facts)
        if node is not None and node.slots is not None and not isinstance(gpus, Missing) and gpus:
            slotted[name] = (node.slots, gpus)
    if not slotted:
        need_drift(cluster, "a GPU", (gpu_count, 0))
    yield from drift_findings(
        cluster,
        gpu_count,
        code="gpu.count.differs",
        what="the number of GPUs",
        severity=Severity.FAIL,
        fix=Fix(
            "A GPU fell off the bus, lost its driver or is hidden from this environment "
            "(CUDA_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES, a container's device list): a job "
            "that starts one rank per GPU fails there with 'invalid device ordinal'.",
            LIST,
        ),
    )
    for name, (slots, gpus) in slotted.items():
        if slots > gpus:
            yield Finding(
                "gpu.count.slots",
                Severity.FAIL,
                f"{name} is given {slots} slots but has {gpus} GPU(s): ranks past the last "
                "GPU fail to pick a device, or share one and run out of memory",
                nodes=(name,),
                evidence=(f"slots={slots}", f"GPUs: {gpus}"),
                fix=Fix("Give the node one slot per GPU.", (command("{} slots={}", name, gpus),)),
                data={"slots": slots, "gpus": gpus},
            )


CHECKS = [count]
