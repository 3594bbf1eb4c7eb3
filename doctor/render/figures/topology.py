"""Each node's GPU/NIC topology as the geometry of an SVG graph, nodes alike drawn once.

CPU sockets (NUMA nodes) are boxes holding their GPUs (top row) and NICs (bottom row). NVLink
between GPUs is drawn as arcs labelled NV# (or, where every pair has the same NVLink count, as one
bar: the NVSwitch fabric); every GPU is joined to its closest NICs with the PCIe path type between
them (PIX/PXB: GPUDirect RDMA at NCCL's default level; PHB/NODE: through the host bridge; SYS:
across sockets), and neighbouring sockets by the SMP interconnect.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from doctor.core.nodeset import compact
from doctor.facts.topo.matrix import PCIE_LEVELS, Topology, closeness, gpu_fabric, is_label
from doctor.render.figures import as_dict, as_list, as_number, as_text, counted, dig

BOX_W, BOX_H, GAP = 64, 28, 12  # a device's box and the space between two
PAD, HEAD = 14, 36  # inside a socket: padding, and the heading's height (two lines)
CHAR = 6.2  # px per character of the 11px socket heading
EDGE_SPACE = 78  # between the GPU row and the NIC row, where GPU-NIC edges run
ARC_SPACE = 56  # above the sockets, where NVLink arcs rise
SOCKET_GAP = 48
MAX_GRAPHS = 8  # distinct topologies drawn; more are listed by node
UNPLACED = "?"
EDGE_TEXT = {
    "nvlink": "NVLink (NV#: # links bonded)",
    "near": "PIX/PXB: PCIe switches only (GPUDirect RDMA)",
    "host": "PHB/NODE: through the CPU's host bridge",
    "far": "SYS: across CPU sockets",
    "smp": "SMP interconnect between sockets (QPI/UPI)",
}


@dataclass(frozen=True)
class Box:
    name: str
    kind: str  # gpu | nic
    x: float
    y: float
    title: str


@dataclass(frozen=True)
class Socket:
    label: str
    cpus: str  # "CPUs 0-31,64-95", or ""
    x: float
    y: float
    w: float
    h: float


@dataclass(frozen=True)
class Edge:
    path: str
    kind: str  # nvlink | near | host | far | smp
    label: str
    lx: float
    ly: float
    title: str
    width: float = 1.5


@dataclass(frozen=True)
class Graph:
    nodes: str  # the nodes sharing this topology, compactly
    heading: str
    width: float
    height: float
    sockets: tuple[Socket, ...]
    boxes: tuple[Box, ...]
    edges: tuple[Edge, ...]
    kinds: tuple[str, ...]  # edge kinds present, for the legend
    matrix: Topology


def topology_of(facts: Any) -> Topology | None:
    """The ``topo.topology`` of a node's facts as a Topology; None when absent or malformed."""
    doc = as_dict(dig(facts, "topo", "topology"))
    devices = as_list(doc.get("devices"))
    cells = as_list(doc.get("cells"))
    n = len(devices)
    if not devices or not all(isinstance(d, str) for d in devices) or len(cells) != n:
        return None
    rows = [as_list(row) for row in cells]
    if any(len(r) != n or not all(isinstance(c, str) and is_label(c) for c in r) for r in rows):
        return None
    columns = tuple(c for c in as_list(doc.get("columns")) if isinstance(c, str))
    affinity = tuple(tuple(as_text(v) for v in as_list(a)) for a in as_list(doc.get("affinity")))
    topo = Topology(tuple(devices), tuple(tuple(r) for r in rows), columns, affinity[:n])
    return topo if topo.gpus else None


def _path_kind(label: str) -> str:
    if gpu_fabric(label):
        return "nvlink"
    level = PCIE_LEVELS.index(label) if label in PCIE_LEVELS else len(PCIE_LEVELS)
    return "near" if level <= 1 else "host" if level <= 3 else "far"


def _sockets(topo: Topology, facts: Any) -> dict[str, str]:
    """Device -> its socket (NUMA node): GPUs from their NUMA affinity, NICs from sysfs, else
    from the closest GPU they do not reach across sockets (SYS)."""
    place: dict[str, str] = {}
    for gpu in topo.gpus:
        numa = topo.affinity_of(gpu).get("NUMA Affinity") or topo.affinity_of(gpu).get(
            "GPU NUMA ID", ""
        )
        place[gpu] = numa if numa and numa != "N/A" else UNPLACED
    sysfs = {
        as_text(dig(n, "name")): as_number(dig(n, "place", "numa"))
        for n in as_list(dig(facts, "topo", "nics"))
    }
    for nic in topo.nics:
        node = sysfs.get(nic)
        if node is not None and node >= 0:
            place[nic] = str(int(node))
            continue
        near = [g for g in topo.gpus if topo.label(nic, g) != "SYS"]
        best = min(near, key=lambda g: closeness(topo.label(nic, g)), default=None)
        place[nic] = place[best] if best else UNPLACED
    return place


def _socket_order(key: str) -> tuple[bool, int, str]:
    """NUMA 0, 1, ... 10 in numeric order, then ranges ("0-1"), the unplaced last."""
    return (key == UNPLACED, int(key) if key.isdigit() else 1 << 30, key)


def build_graph(nodes: list[str], topo: Topology, facts: Any, source: str) -> Graph:
    """The graph of one topology shared by ``nodes``."""
    place = _sockets(topo, facts)
    keys = sorted(set(place.values()), key=_socket_order)
    nvlinks = {pair: label for pair, label in topo.links().items() if gpu_fabric(label)}
    top = ARC_SPACE if nvlinks else 10
    boxes: dict[str, Box] = {}
    sockets = []
    x = 10.0
    for key in keys:
        gpus = [g for g in topo.gpus if place[g] == key]
        nics = [n for n in topo.nics if place[n] == key]
        label = "NUMA node unknown" if key == UNPLACED else f"CPU socket · NUMA {key}"
        cpus = next((topo.affinity_of(g).get("CPU Affinity", "") for g in gpus), "")
        cpus = f"CPUs {cpus}" if cpus else ""
        width: float = 2 * PAD + max(len(gpus), len(nics), 1) * (BOX_W + GAP) - GAP
        width = max(width, 2 * PAD + CHAR * max(len(label), len(cpus)))
        height = HEAD + 2 * BOX_H + EDGE_SPACE + PAD
        sockets.append(Socket(label, cpus, x, top, width, height))
        for row, devices in ((0, gpus), (1, nics)):
            for i, name in enumerate(devices):
                bx = x + PAD + i * (BOX_W + GAP)
                by = top + HEAD + row * (BOX_H + EDGE_SPACE)
                info = ", ".join(f"{k} {v}" for k, v in topo.affinity_of(name).items() if v)
                boxes[name] = Box(
                    name,
                    "nic" if row else "gpu",
                    bx,
                    by,
                    f"{name}" + (f" ({info})" if info else ""),
                )
        x += width + SOCKET_GAP

    edges: list[Edge] = []
    labels = set(nvlinks.values())
    pairs = len(topo.gpus) * (len(topo.gpus) - 1) // 2
    if len(topo.gpus) >= 3 and len(nvlinks) == pairs and len(labels) == 1:
        (label,) = labels
        first, last = boxes[topo.gpus[0]], boxes[topo.gpus[-1]]
        bar_y = top - 24
        drops = " ".join(f"M{boxes[g].x + BOX_W / 2} {bar_y} V{boxes[g].y}" for g in topo.gpus)
        path = f"M{first.x + BOX_W / 2} {bar_y} H{last.x + BOX_W / 2} {drops}"
        title = f"{label} between every pair of GPUs (an NVSwitch fabric)"
        mid = (first.x + last.x + BOX_W) / 2
        edges.append(
            Edge(path, "nvlink", f"NVLink {label}, every pair", mid, bar_y - 5, title, 2.5)
        )
    else:
        for pair, label in nvlinks.items():
            a, b = (boxes[d] for d in pair.split("-", 1))
            x1, x2 = a.x + BOX_W / 2, b.x + BOX_W / 2
            rise = min(ARC_SPACE - 8, 14 + abs(x2 - x1) / 8)
            path = f"M{x1} {a.y} Q{(x1 + x2) / 2} {a.y - 2 * rise} {x2} {b.y}"
            stroke = 1 + min(int(label[2:]), 18) / 4
            edges.append(
                Edge(
                    path, "nvlink", label, (x1 + x2) / 2, a.y - rise - 3, f"{pair}: {label}", stroke
                )
            )
    for gpu in topo.gpus:
        level, closest = topo.closest_nics(gpu)
        for nic in closest:
            g, n = boxes[gpu], boxes[nic]
            x1, y1, x2, y2 = g.x + BOX_W / 2, g.y + BOX_H, n.x + BOX_W / 2, n.y
            edges.append(
                Edge(
                    f"M{x1} {y1} L{x2} {y2}",
                    _path_kind(level),
                    level,
                    (x1 + x2) / 2,
                    (y1 + y2) / 2,
                    f"{gpu} → {nic}: {level}",
                )
            )
    for left, right in pairwise(sockets):
        y = left.y + left.h / 2
        path = f"M{left.x + left.w} {y} H{right.x}"
        edges.append(
            Edge(
                path,
                "smp",
                "SYS",
                left.x + left.w + SOCKET_GAP / 2,
                y - 6,
                "SMP interconnect between sockets (QPI/UPI)",
            )
        )

    heading = f"{counted(len(topo.gpus), 'GPU')}, {counted(len(topo.nics), 'NIC')}"
    kinds = tuple(
        k for k in ("nvlink", "near", "host", "far", "smp") if any(e.kind == k for e in edges)
    )
    return Graph(
        compact(nodes),
        heading + (f" (from {source})" if source else ""),
        x - SOCKET_GAP + 10,
        top + max((s.h for s in sockets), default=0) + 10,
        tuple(sockets),
        tuple(boxes.values()),
        tuple(edges),
        kinds,
        topo,
    )


def build_graphs(nodes: Any) -> tuple[list[Graph], list[str]]:
    """One graph per distinct topology among the report's nodes (at most MAX_GRAPHS), and the
    nodes whose topology was not drawn because MAX_GRAPHS was reached."""
    groups: dict[str, list[str]] = {}
    found: dict[str, tuple[Topology, Any, str]] = {}
    for name, entry in as_dict(nodes).items():
        facts = dig(entry, "facts")
        topo = topology_of(facts)
        if topo is None:
            continue
        key = json.dumps([topo.devices, topo.cells, topo.affinity])
        groups.setdefault(key, []).append(name)
        found.setdefault(key, (topo, facts, as_text(dig(facts, "topo", "source"))))
    ordered = sorted(groups, key=lambda k: -len(groups[k]))
    graphs = [build_graph(groups[k], *found[k]) for k in ordered[:MAX_GRAPHS]]
    left = [n for k in ordered[MAX_GRAPHS:] for n in groups[k]]
    return graphs, left


def cell_kind(label: str) -> str:
    """The CSS kind of a topology matrix cell (the diagonal is ``self``)."""
    return "self" if label == "X" else _path_kind(label)
