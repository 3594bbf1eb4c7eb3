"""Topology facts: the GPU/NIC matrix from NVML (else nvidia-smi, else sysfs) and NIC placement."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from doctor.core.capture import Capture
from doctor.core.model import Missing
from doctor.facts.amd.model import AmdFacts
from doctor.facts.amd.sysfs import parse_amd
from doctor.facts.pci import PciDevice, parse_pci
from doctor.facts.topo.matrix import KNOWN_COLUMNS, Topology, xgmi_label
from doctor.facts.topo.nvml import (
    NVSWITCH_CLASS,
    NvmlGpu,
    NvmlShapeError,
    nvlink_label,
    p2p_problems,
    pair_answers,
    parse_nvml_gpus,
    pcie_label,
)
from doctor.facts.topo.pcitree import PciPlace, pci_label, place_from_realpath
from doctor.facts.topo.smi_nvlink import ERRORS_SLOT, STATUS_SLOT, nvlink_gpus
from doctor.facts.topo.smi_text import TopoParseError, parse_topo_text

PCI_ROOT = "/sys/bus/pci/devices"
NET_ROOT = "/sys/class/net"
IB_ROOT = "/sys/class/infiniband"


@dataclass(frozen=True)
class Port:
    """One RDMA port, from /sys/class/infiniband/<hca>/ports/<n>/ ('?' where unread)."""

    number: str
    state: str  # ACTIVE, DOWN, INIT, ARMED, ACTIVE_DEFER
    link_layer: str  # InfiniBand, Ethernet (RoCE)
    rate: str  # "400 Gb/sec (4X NDR)"


@dataclass(frozen=True)
class Nic:
    """A PCI network device: an RDMA HCA (named as ibverbs names it) or a plain netdev."""

    name: str  # mlx5_0, or eth0 for a NIC without RDMA
    address: str  # its PCI function, 0000:17:00.0
    rdma: bool
    netdevs: tuple[str, ...]  # the netdevs of the same PCI function
    place: PciPlace
    ports: tuple[Port, ...] = ()

    @property
    def usable(self) -> bool:
        """NCCL uses only ACTIVE ports; a NIC whose ports were not read is given the benefit."""
        return not self.ports or any(port.state == "ACTIVE" for port in self.ports)


@dataclass(frozen=True)
class TopoFacts:
    # "nvml", "nvidia-smi", "kfd" (AMD) or "sysfs": where the GPU matrix came from; "nvlink"
    # where a paste gave only `nvidia-smi nvlink` (NVLink per GPU in ``nvml``, no matrix)
    source: str
    topology: Topology
    nics: tuple[Nic, ...]  # every PCI NIC sysfs shows
    rdma: tuple[str, ...]  # the matrix's RDMA NICs NCCL can use (GPUDirect RDMA candidates)
    nvidia_smi: Topology | Missing  # `nvidia-smi topo -m` as parsed, when it ran
    nvml: tuple[NvmlGpu, ...] = ()  # NVML's GPUs; a paste's `nvidia-smi nvlink` (smi_nvlink.py)
    p2p: dict[str, dict[str, str]] = field(default_factory=dict)  # "GPU0-GPU1" → not-OK caps
    mismatches: tuple[str, ...] = ()  # where NVML/sysfs and nvidia-smi disagree
    notes: tuple[str, ...] = ()  # why a better source was not used


def _places(cap: Capture, pci: list[PciDevice]) -> dict[str, PciPlace]:
    out = {}
    for dev in pci:
        real = cap.value(f"realpath:{PCI_ROOT}/{dev.address}")
        place = place_from_realpath(real, dev.numa_node) if isinstance(real, str) else None
        if place is not None:
            out[dev.address] = place
    return out


def _nic_place(cap: Capture, link: str, numa: dict[str, int | None]) -> PciPlace | None:
    real = cap.value(f"realpath:{link}")
    if not isinstance(real, str):
        return None
    place = place_from_realpath(real, None)
    if place is None:
        return None
    return PciPlace(place.root, place.chain, numa.get(place.address))


def _sysfs_text(text: str | Missing, numbered: bool = False) -> str:
    """A sysfs attribute's text, '?' if unread; ``numbered`` drops the "4: " of "4: ACTIVE"
    (drivers/infiniband/core/sysfs.c prints state as "%d: %s")."""
    if isinstance(text, Missing):
        return "?"
    text = text.strip()
    return (text.partition(": ")[2] if numbered else text) or "?"


def _ports(cap: Capture, hca: str) -> tuple[Port, ...]:
    base = f"{IB_ROOT}/{hca}/ports"
    listing = cap.dir(base)
    return tuple(
        Port(
            port,
            _sysfs_text(cap.file(f"{base}/{port}/state"), numbered=True),
            _sysfs_text(cap.file(f"{base}/{port}/link_layer")),
            _sysfs_text(cap.file(f"{base}/{port}/rate")),
        )
        for port in ([] if isinstance(listing, Missing) else listing)
    )


def parse_nics(cap: Capture, pci: list[PciDevice]) -> list[Nic]:
    """RDMA HCAs first (sorted), then PCI netdevs that are not an HCA's own interface."""
    numa = {d.address: d.numa_node for d in pci}
    nics: list[Nic] = []
    hcas = cap.dir(IB_ROOT)
    for hca in [] if isinstance(hcas, Missing) else hcas:
        place = _nic_place(cap, f"{IB_ROOT}/{hca}/device", numa)
        netdevs = cap.dir(f"{IB_ROOT}/{hca}/device/net")
        if place is not None:
            own = () if isinstance(netdevs, Missing) else tuple(netdevs)
            nics.append(Nic(hca, place.address, True, own, place, _ports(cap, hca)))
    taken = {n for nic in nics for n in nic.netdevs}
    ifaces = cap.dir(NET_ROOT)
    for iface in [] if isinstance(ifaces, Missing) else ifaces:
        place = _nic_place(cap, f"{NET_ROOT}/{iface}/device", numa)
        if place is not None and iface not in taken:
            nics.append(Nic(iface, place.address, False, (iface,), place))
    return nics


def _smi(cap: Capture) -> Topology | Missing:
    result = cap.command("nvidia-smi:topo")
    if isinstance(result, Missing):
        return result
    if result.rc != 0:
        lines = (result.stderr or result.stdout).strip().splitlines()
        return Missing(f"nvidia-smi topo -m exited {result.rc}: {lines[-1] if lines else ''}")
    try:
        return parse_topo_text(result.stdout)
    except TopoParseError as exc:
        return Missing(f"nvidia-smi topo -m: {exc}", "failed")


def _matrix(
    gpus: list[str],
    nics: list[Nic],
    gpu_label: dict[tuple[int, int], str],
    places: dict[str, PciPlace],
    affinity: Sequence[tuple[str, ...]],
    columns: tuple[str, ...],
    notes: list[str],
) -> Topology:
    """Fill a matrix: GPU pairs from ``gpu_label``, everything with a NIC from PCI distance.

    A pair no source can place is shown as SYS (the worst case) and named in ``notes``.
    """
    names = [*gpus, *(n.name for n in nics)]
    spots = [*(places.get(g) for g in gpus), *(n.place for n in nics)]
    cells = []
    for i in range(len(names)):
        row = []
        for j in range(len(names)):
            a, b = spots[i], spots[j]
            if i == j:
                row.append("X")
            elif (i, j) in gpu_label:
                row.append(gpu_label[(i, j)])
            elif a is not None and b is not None:
                row.append(pci_label(a, b))
            else:
                row.append("SYS")
                if i < j:
                    notes.append(f"{names[i]}-{names[j]}: no PCI place known, shown as SYS")
        cells.append(tuple(row))
    rows = [*affinity, *(() for _ in nics)]
    return Topology(tuple(names), tuple(cells), columns, tuple(rows), nic_legend=bool(nics))


def _from_nvml(
    raw: dict, places: dict[str, PciPlace], pci: list[PciDevice], nics: list[Nic], notes: list[str]
) -> tuple[Topology, tuple[NvmlGpu, ...], dict[str, dict[str, str]]]:
    switches = {d.address for d in pci if d.pci_class == NVSWITCH_CLASS}
    gpus = parse_nvml_gpus(raw, set(places), switches)
    if nics and any(g.bus_id not in places for g in gpus):
        # A GPU sysfs does not show (a container without /sys): no NIC distance to guess.
        notes.append("a GPU is missing from sysfs: NICs left out of the matrix")
        nics = []
    pairs = pair_answers(raw)
    labels: dict[tuple[int, int], str] = {}
    p2p: dict[str, dict[str, str]] = {}
    for i, a in enumerate(gpus):
        for j, b in enumerate(gpus):
            if i == j:
                continue
            pair = pairs.get((i, j), {})
            label = nvlink_label(a, b) or pcie_label(pair)
            if label is not None:
                labels[(i, j)] = label  # else the PCI places decide, as for NICs
            problems = p2p_problems(pair)
            if problems and i < j:
                p2p[f"{a.name}-{b.name}"] = problems
    gpu_places = {g.name: places[g.bus_id] for g in gpus if g.bus_id in places}
    affinity = [(g.cpu_affinity, g.numa_affinity, g.numa_id) for g in gpus]
    names = [g.name for g in gpus]
    topo = _matrix(names, nics, labels, gpu_places, affinity, KNOWN_COLUMNS, notes)
    return topo, tuple(gpus), p2p


def _from_sysfs(
    pci: list[PciDevice], places: dict[str, PciPlace], nics: list[Nic], notes: list[str]
) -> Topology:
    """GPUs in PCI bus order (nvidia-smi's order), PCIe labels only: sysfs cannot see NVLink."""
    gpus = sorted((d for d in pci if d.is_nvidia_gpu), key=lambda d: d.address)
    names = [f"GPU{i}" for i in range(len(gpus))]
    if nics and any(d.address not in places for d in gpus):
        notes.append("a GPU has no sysfs path: NICs left out of the matrix")
        nics = []
    gpu_places = {
        n: places[d.address] for n, d in zip(names, gpus, strict=True) if d.address in places
    }
    affinity = [
        (d.local_cpus or "N/A", "N/A" if d.numa_node is None else str(d.numa_node)) for d in gpus
    ]
    return _matrix(names, nics, {}, gpu_places, affinity, KNOWN_COLUMNS[:2], notes)


def _from_kfd(
    amd: AmdFacts,
    pci: list[PciDevice],
    places: dict[str, PciPlace],
    nics: list[Nic],
    notes: list[str],
) -> Topology:
    """AMD GPUs in PCI bus order (HIP's), XGMI pairs from the KFD topology, PCIe by distance."""
    names = [f"GPU{i}" for i in range(len(amd.gpus))]
    if nics and any(g.bus_id not in places for g in amd.gpus):
        notes.append("a GPU has no sysfs path: NICs left out of the matrix")
        nics = []
    links = amd.pair_links()
    labels = {}
    for i, a in enumerate(amd.gpus):
        for j, b in enumerate(amd.gpus):
            link = links.get(frozenset((a.bus_id, b.bus_id)))
            if i != j and link is not None and link.type == "XGMI":
                labels[(i, j)] = xgmi_label(link.hops)
    gpu_places = {
        n: places[g.bus_id] for n, g in zip(names, amd.gpus, strict=True) if g.bus_id in places
    }
    by_address = {d.address: d for d in pci}
    affinity = []
    for g in amd.gpus:
        dev = by_address.get(g.bus_id)
        numa = g.numa_node if g.numa_node is not None and g.numa_node >= 0 else None
        cpus = dev.local_cpus if dev is not None and dev.local_cpus else "N/A"
        affinity.append((cpus, "N/A" if numa is None else str(numa)))
    return _matrix(names, nics, labels, gpu_places, affinity, KNOWN_COLUMNS[:2], notes)


def cross_check(ours: Topology, smi: Topology) -> tuple[str, ...]:
    """Pairs both matrices name whose labels differ: 'GPU0-mlx5_0: PXB here, PIX in nvidia-smi'."""
    shared = [d for d in ours.devices if d in smi.devices]
    out = []
    for i, a in enumerate(shared):
        for b in shared[i + 1 :]:
            mine, theirs = ours.label(a, b), smi.label(a, b)
            if mine != theirs:
                out.append(f"{a}-{b}: {mine} here, {theirs} in nvidia-smi topo -m")
    return tuple(out)


def _pasted(cap: Capture, pci: Missing) -> TopoFacts | Missing:
    """A node seen through pasted text, with no PCI tree: `nvidia-smi topo -m` as its matrix and
    `nvidia-smi nvlink -s`/`-e` as its NVLink facts, whichever were pasted."""
    smi = _smi(cap)
    texts = [cap.command(slot) for slot in (STATUS_SLOT, ERRORS_SLOT)]
    status, errors = (r.stdout if not isinstance(r, Missing) else None for r in texts)
    gpus = tuple(nvlink_gpus(status, errors))
    if not isinstance(smi, Topology) and not gpus:
        return Missing(f"no PCI devices to place: {pci.reason}", pci.kind)
    if isinstance(smi, Topology):
        topo, source = smi, "nvidia-smi"
    else:  # link counts per GPU, no matrix
        topo, source = Topology((), (), (), ()), "nvlink"
    return TopoFacts(
        source=source,
        topology=topo,
        nics=(),
        rdma=topo.nics,  # nvidia-smi lists ibverbs devices only
        nvidia_smi=smi,
        nvml=gpus,
        notes=("pasted: no PCI tree, NVLink from `nvidia-smi nvlink`" if gpus else "pasted",),
    )


def parse_topo(cap: Capture) -> TopoFacts | Missing:
    pci = parse_pci(cap)
    if isinstance(pci, Missing):
        return (
            _pasted(cap, pci)
            if pci.kind == "unsupported"
            else Missing(f"no PCI devices to place: {pci.reason}", pci.kind)
        )
    places = _places(cap, pci)
    nics = parse_nics(cap, pci)
    smi = _smi(cap)
    raw = cap.value("nvml:topology")
    notes: list[str] = []
    from_nvml = None
    if isinstance(raw, dict):
        try:
            from_nvml = _from_nvml(raw, places, pci, nics, notes)
        except NvmlShapeError as exc:
            notes.append(f"NVML: {exc}")
    elif isinstance(raw, Missing):
        notes.append(raw.reason)
    if from_nvml is not None:
        topo, gpus, p2p = from_nvml
        source = "nvml"
    else:
        gpus, p2p = (), {}
        amd = parse_amd(cap)
        if isinstance(smi, Topology):
            topo, source = smi, "nvidia-smi"
        elif not isinstance(amd, Missing) and amd.gpus and amd.links:
            topo, source = _from_kfd(amd, pci, places, nics, notes), "kfd"
        else:
            notes.append(smi.reason)
            topo, source = _from_sysfs(pci, places, nics, notes), "sysfs"
    # nvidia-smi lists ibverbs devices only: every NIC of its matrix is an RDMA device.
    from_smi = source == "nvidia-smi"
    rdma = tuple(topo.nics) if from_smi else tuple(n.name for n in nics if n.rdma and n.usable)
    return TopoFacts(
        source=source,
        topology=topo,
        nics=tuple(nics),
        rdma=rdma,
        nvidia_smi=smi,
        nvml=gpus,
        p2p=p2p,
        mismatches=cross_check(topo, smi) if not from_smi and isinstance(smi, Topology) else (),
        notes=tuple(notes),
    )
