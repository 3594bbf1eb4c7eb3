"""Every kind of output the paste reader understands, in the order a line is tried against them.

Adding a kind is one ``Kind(name, starts, parse)`` entry in KINDS and, for docs/paste.md and the
error line, one line in DESCRIPTIONS.
"""

from __future__ import annotations

from doctor.paste import amd, env, host, mpi, nccl, net, nvidia, pci, rdma
from doctor.paste.kind import Kind

# Most specific first: an NCCL log line is tried before the looser shapes (`NAME=value`).
KINDS: list[Kind] = [
    *amd.AMD_KINDS,  # before nvidia-smi topo -m: rocm-smi's GPU0 GPU1 ... header is not one
    *nvidia.NVIDIA_KINDS,
    *nccl.NCCL_KINDS,
    *mpi.MPI_KINDS,
    *host.HOST_KINDS,  # after NCCL's: a job's log stamped "[1732000000.104]" is not dmesg
    *net.NET_KINDS,
    *rdma.RDMA_KINDS,
    *pci.PCI_KINDS,
    *env.ENV_KINDS,
]
DESCRIPTIONS: dict[str, str] = {
    **nvidia.DESCRIPTIONS,
    **amd.DESCRIPTIONS,
    **nccl.DESCRIPTIONS,
    **mpi.DESCRIPTIONS,
    **net.DESCRIPTIONS,
    **rdma.DESCRIPTIONS,
    **host.DESCRIPTIONS,
    **pci.DESCRIPTIONS,
    **env.DESCRIPTIONS,
}


def kinds_line() -> str:
    """The names of the kinds understood, for one line of an error message."""
    return ", ".join(k.name for k in KINDS)


def described() -> list[tuple[str, str]]:
    """(name, what it yields) for every kind, in registry order."""
    return [(k.name, DESCRIPTIONS.get(k.name, k.name)) for k in KINDS]
