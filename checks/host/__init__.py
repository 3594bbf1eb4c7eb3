"""The host beside the GPUs: filesystems, mounts, memory, swap, stuck processes, services, the
SLURM node state, CPUs, temperatures, and how the nodes compare."""

from checks.host.inventory import inventory, load
from checks.host.services import governor, services, slurm_node, temperature
from checks.host.storage import disk, dstate, memory, mounts

CHECKS = [
    disk,
    mounts,
    memory,
    dstate,
    services,
    slurm_node,
    governor,
    temperature,
    inventory,
    load,
]
