"""Node basics: every node answered, and /dev/shm is big enough for NCCL."""

from __future__ import annotations

from collections.abc import Iterator

from doctor.facts.cluster import ClusterFacts
from doctor.facts.node import NodeFacts
from doctor.model import Finding, Fix, Severity
from doctor.plugin import cluster_check, need, node_check
from doctor.units import human_bytes

GIB = 1 << 30
# NCCL's SHM transport allocates a few to ~10 MB per connection; 8 GPUs with several channels
# exhaust Docker's 64 MB default. The NCCL docs recommend --shm-size=1g.
SHM_WARN = 1 * GIB
SHM_FAIL = 256 << 20

SHM_FIX = Fix(
    "Give the container a bigger /dev/shm (or share the host's IPC namespace); in Kubernetes "
    "mount a memory-backed emptyDir at /dev/shm.",
    (
        "docker run --shm-size=1g --ulimit memlock=-1 ...",
        "docker run --ipc=host --ulimit memlock=-1 ...",
        "volumes: [{name: dshm, emptyDir: {medium: Memory}}]  # mounted at /dev/shm",
    ),
)


@node_check(
    "shm.size",
    "/dev/shm is large enough for NCCL's shared-memory buffers",
    needs=("limits",),
    codes={
        "shm.too_small": "/dev/shm is under 256 MiB: NCCL fails with 'failed to extend /dev/shm'",
        "shm.small": "/dev/shm is under 1 GiB: NCCL may run out of it with many GPUs or channels",
    },
)
def shm_size(facts: NodeFacts) -> Iterator[Finding]:
    limits = need(facts.limits)
    size = need(limits.shm_size, "/dev/shm")
    if size < SHM_FAIL:
        code, severity = "shm.too_small", Severity.FAIL
    elif size < SHM_WARN:
        code, severity = "shm.small", Severity.WARN
    else:
        return
    yield Finding(
        code,
        severity,
        f"/dev/shm is only {human_bytes(size)} (NCCL needs about 1 GiB with several GPUs)",
        evidence=(f"statvfs(/dev/shm): {size} bytes, {need(limits.shm_free)} free",),
        fix=SHM_FIX,
        data={"size": size},
    )


@cluster_check(
    "node.reach",
    "Every node answered the probe",
    codes={
        "node.timeout": "the node did not answer within the deadline",
        "node.no_python": "no usable Python interpreter on the node to run the probe",
        "node.probe_failed": "the probe ran but failed on the node",
        "node.bad_capture": "the node answered with something that is not a probe capture",
        "node.launch_failed": "the launcher (srun) could not start the probe on the node",
    },
)
def node_reach(cluster: ClusterFacts) -> Iterator[Finding]:
    for name, failure in cluster.failures.items():
        yield Finding(
            failure.code,
            Severity.FAIL,
            failure.summary,
            nodes=(name,),
            evidence=(failure.detail,) if failure.detail else (),
        )


CHECKS = [node_reach, shm_size]
