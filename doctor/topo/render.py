"""Show a node's topology: a matrix like `nvidia-smi topo -m`, its legend, NIC affinity, JSON."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from doctor.facts.topo import TopoFacts
from doctor.topo.matrix import LEGEND, NVLINK, Topology, closeness, nccl_path

# NCCL's default NCCL_NET_GDR_LEVEL (src/graph/paths.cc ncclTopoCheckGdr): GPUDirect RDMA is used
# only when the GPU-NIC path is PXB or closer.
GDR_DEFAULT_LEVEL = "PXB"
STYLES = {
    "X": "dim",
    "PIX": "green",
    "PXB": "cyan",
    "PHB": "yellow",
    "NODE": "yellow",
    "SYS": "red",
}


@dataclass(frozen=True)
class TopoView:
    """What one topology report shows, whichever source it came from."""

    node: str
    source: str  # "nvml", "nvidia-smi", "sysfs" or the file a matrix was read from
    topology: Topology
    rdma: tuple[str, ...]  # the NICs that can do RDMA (GPUDirect RDMA candidates)
    nic_lines: tuple[str, ...] = ()  # one line per PCI NIC sysfs shows
    notes: tuple[str, ...] = ()


def view_of(node: str, facts: TopoFacts) -> TopoView:
    nic_lines = tuple(
        f"{n.name:<12} {n.address}  NUMA {'?' if n.place.numa is None else n.place.numa:<3} "
        f"{'RDMA' if n.rdma else 'netdev'}  {','.join(n.netdevs) or '-'}"
        + "".join(f"  port {p.number} {p.state} {p.link_layer} {p.rate}" for p in n.ports)
        for n in facts.nics
    )
    mismatches = tuple(f"disagrees with nvidia-smi: {m}" for m in facts.mismatches)
    return TopoView(
        node, facts.source, facts.topology, facts.rdma, nic_lines, facts.notes + mismatches
    )


def gdr_allowed(label: str) -> bool:
    """Would NCCL use GPUDirect RDMA over this GPU-NIC path at its default level?"""
    return closeness(label) <= closeness(GDR_DEFAULT_LEVEL)


def nic_affinity(view: TopoView) -> dict[str, dict[str, Any]]:
    """For each GPU: the closest NICs (RDMA ones where the node has any), and what NCCL does."""
    topo = view.topology
    among = tuple(n for n in topo.nics if n in view.rdma) or topo.nics
    out = {}
    for gpu in topo.gpus:
        label, nics = topo.closest_nics(gpu, among)
        if nics:
            out[gpu] = {
                "nics": list(nics),
                "label": label,
                "nccl_path": nccl_path(label),
                "rdma": nics[0] in view.rdma,
                "gdr": nics[0] in view.rdma and gdr_allowed(label),
            }
    return out


def topo_json(view: TopoView) -> dict[str, Any]:
    topo = view.topology
    return {
        "node": view.node,
        "source": view.source,
        "gpus": len(topo.gpus),
        "nics": list(topo.nics),
        "rdma": list(view.rdma),
        "links": topo.links(),
        "affinity": {d: topo.affinity_of(d) for d in topo.gpus},
        "closest_nic": nic_affinity(view),
        "notes": list(view.notes),
    }


def _width(header: list[str], rows: list[list[str]]) -> int:
    """The width a matrix needs to show every cell whole (one space each side of a column)."""
    widths = [len(h) for h in header]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, [*row, *[""] * len(widths)], strict=False)]
    return sum(w + 2 for w in widths)


def _cell(label: str) -> Text:
    style = "bold green" if NVLINK.fullmatch(label) else STYLES.get(label, "")
    return Text(label, style=style)


def render_topology(view: TopoView, out: Console) -> None:
    topo = view.topology
    out.print(Text(f"{view.node}: topology from {view.source}", style="bold"))
    if not topo.gpus:
        out.print(f"no NVIDIA GPU on {view.node}")
    else:
        aliases = {n: f"NIC{i}" for i, n in enumerate(topo.nics)} if topo.nic_legend else {}
        names = [aliases.get(d, d) for d in topo.devices]
        header = ["", *names, *topo.columns]
        rows = [[names[i], *topo.cells[i], *topo.affinity[i]] for i in range(len(topo.devices))]
        table = Table(box=None, pad_edge=False, show_edge=False)
        for n, title in enumerate(header):
            centred = 0 < n <= len(names)
            table.add_column(title, justify="center" if centred else "left", no_wrap=True)
        for row in rows:
            padded = row + [""] * (len(header) - len(row))
            table.add_row(*(_cell(c) if 0 < n <= len(names) else c for n, c in enumerate(padded)))
        # A wide matrix stays a matrix: never squeezed to the terminal (nvidia-smi does not either).
        width = out.width
        out.width = max(width, _width(header, rows))
        try:
            out.print(table)
        finally:
            out.width = width
        out.print("\nLegend:")
        for label, meaning in LEGEND:
            out.print(f"  {label:<4} = {meaning}", highlight=False)
        if aliases:
            out.print("\nNIC Legend:")
            for nic, alias in aliases.items():
                out.print(f"  {alias}: {nic}")
        affinity = nic_affinity(view)
        if affinity:
            out.print(
                "\nClosest NIC per GPU (GPUDirect RDMA at NCCL's default NCCL_NET_GDR_LEVEL):"
            )
            for gpu, near in affinity.items():
                gdr = "GDR on" if near["gdr"] else ("GDR off" if near["rdma"] else "no RDMA")
                out.print(f"  {gpu:<6} {','.join(near['nics']):<24} {near['label']:<5} {gdr}")
    if view.nic_lines:
        out.print("\nPCI NICs:")
        for line in view.nic_lines:
            out.print(f"  {line}", highlight=False)
    elif not topo.nics:
        out.print("\nno NIC found")
    for note in view.notes:
        out.print(f"note: {note}", highlight=False)
