"""PCI distances from sysfs paths, computed the way NCCL builds its topology tree.

NCCL (`src/graph/xml.cc` ncclTopoGetXmlFromSys) climbs a device's sysfs path two components at a
time (a switch's downstream then upstream port), so each PCI node of its tree is a switch's
upstream port; when the next component up is not a bus address (``pci0000:00``) it attaches the
device to a CPU node keyed by the device's ``numa_node``. Its paths (`src/graph/paths.cc`
ncclTopoSetPaths) are PIX through one switch, PXB through several, PHB through the CPU and SYS
across CPUs. nvidia-smi adds NODE for two host bridges of the same NUMA node, which NCCL folds
into PHB (both hang off the same CPU node).
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.facts.pci import bridge_chain


@dataclass(frozen=True)
class PciPlace:
    """Where a device sits: its root complex, the bus addresses down to it, its NUMA node."""

    root: str  # "pci0000:00": the host bridge the device hangs off
    chain: tuple[str, ...]  # ("0000:00:01.0", "0000:01:00.0", ...) ending with the device itself
    numa: int | None

    @property
    def address(self) -> str:
        return self.chain[-1]


def place_from_realpath(realpath: str, numa: int | None) -> PciPlace | None:
    """A PCI place from a resolved sysfs path; None when the path is not under a PCI root."""
    parts = realpath.split("/")
    roots = [p for p in parts if p.startswith("pci") and ":" in p]
    chain = bridge_chain(realpath)
    if not roots or not chain:
        return None
    return PciPlace(roots[0], chain, numa)


def nccl_switches(place: PciPlace) -> tuple[str, ...]:
    """NCCL's PCI nodes above a device, nearest first (each a switch's upstream port)."""
    out = []
    i = len(place.chain) - 1
    while i >= 2:
        i -= 2
        out.append(place.chain[i])
    return tuple(out)


def pci_label(a: PciPlace, b: PciPlace) -> str:
    """nvidia-smi's PCIe label between two devices: X, PIX, PXB, PHB, NODE or SYS."""
    if a.address == b.address:
        return "X"
    if a.root != b.root:
        return "NODE" if a.numa == b.numa else "SYS"
    up_a, up_b = nccl_switches(a), nccl_switches(b)
    common = next((s for s in up_a if s in up_b), None)
    if common is None:
        return "PHB"
    return "PIX" if up_a.index(common) + up_b.index(common) == 0 else "PXB"
