"""One node's topology as a report shows it: the matrix, NIC affinity, GPUDirect RDMA, JSON.

The view comes from a probed node's facts, a saved capture, or a saved `nvidia-smi topo -m`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from doctor.core.capture import Capture, CaptureError
from doctor.core.errors import UsageError
from doctor.core.files import read_bounded
from doctor.core.jsonable import loads
from doctor.core.model import Missing
from doctor.facts.gpu import GpuFacts
from doctor.facts.gpu_vendors import parse_gpus
from doctor.facts.network.rdma import RdmaFacts, parse_rdma
from doctor.facts.topo.matrix import Topology, closeness, nccl_path
from doctor.facts.topo.smi_text import TopoParseError, parse_topo_text
from doctor.facts.topo.topology import TopoFacts, parse_topo

# NCCL's default NCCL_NET_GDR_LEVEL (src/graph/paths.cc ncclTopoCheckGdr): GPUDirect RDMA is used
# only when the GPU-NIC path is PXB or closer.
GDR_DEFAULT_LEVEL = "PXB"
NOT_READ = Missing("not read for this view", "unsupported")


@dataclass(frozen=True)
class TopoView:
    """What one topology report shows, whichever source it came from."""

    node: str
    source: str  # "nvml", "nvidia-smi", "sysfs" or the file a matrix was read from
    topology: Topology
    rdma: tuple[str, ...]  # the NICs that can do RDMA (GPUDirect RDMA candidates)
    nic_lines: tuple[str, ...] = ()  # one line per PCI NIC sysfs shows
    notes: tuple[str, ...] = ()
    # Each RDMA port's rate, width and error counters; each GPU's temperature, margin to
    # slowdown, power cap and firmware (what `doctor topo` shows beside the matrix).
    ports: tuple[dict[str, Any], ...] = ()
    gpus: tuple[dict[str, Any], ...] = ()


def port_rows(rdma: RdmaFacts | Missing) -> tuple[dict[str, Any], ...]:
    if isinstance(rdma, Missing):
        return ()
    rows = []
    for hca in rdma.hcas:
        for p in hca.ports:
            # The error counters that are not zero (data, packets and waits are traffic);
            # None where no counter was read.
            errors = None
            if p.counters is not None:
                errors = {
                    k: v
                    for k, v in p.counters.values.items()
                    if v
                    and not k.startswith("hw:")
                    and "data" not in k
                    and "packets" not in k
                    and k != "port_xmit_wait"
                }
            rows.append(
                {
                    "port": f"{hca.name}/{p.number}",
                    "model": hca.hca_type,
                    "firmware": hca.fw_ver,
                    "state": p.state_text,
                    "link_layer": p.link_layer,
                    "rate_gbps": p.rate_gbps,
                    "width": p.width,
                    "speed": p.speed,
                    "errors": errors,
                }
            )
    return tuple(rows)


def gpu_rows(gpus: GpuFacts | Missing) -> tuple[dict[str, Any], ...]:
    if isinstance(gpus, Missing):
        return ()
    return tuple(
        {
            "gpu": f"GPU{g.index}",
            "name": g.name,
            "temperature": g.health.temperature,
            "slowdown_margin": g.health.slowdown_margin,
            "power_limit": g.health.power_limit,
            "power_default": g.health.power_default,
            "vbios": g.health.vbios,
            "firmware": g.health.firmware,
        }
        for g in gpus.gpus
    )


def view_of(
    node: str,
    facts: TopoFacts,
    rdma: RdmaFacts | Missing = NOT_READ,
    gpus: GpuFacts | Missing = NOT_READ,
) -> TopoView:
    nic_lines = tuple(
        f"{n.name:<12} {n.address}  NUMA {'?' if n.place.numa is None else n.place.numa:<3} "
        f"{'RDMA' if n.rdma else 'netdev'}  {','.join(n.netdevs) or '-'}"
        + "".join(f"  port {p.number} {p.state} {p.link_layer} {p.rate}" for p in n.ports)
        for n in facts.nics
    )
    mismatches = tuple(f"disagrees with nvidia-smi: {m}" for m in facts.mismatches)
    return TopoView(
        node,
        facts.source,
        facts.topology,
        facts.rdma,
        nic_lines,
        facts.notes + mismatches,
        port_rows(rdma),
        gpu_rows(gpus),
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
        "ports": list(view.ports),
        "gpu_vitals": list(view.gpus),
    }


MAX_TOPO_INPUT = 64 << 20  # a node's whole capture is a few MB


def view_from_file(path: Path) -> TopoView:
    """Read a saved `nvidia-smi topo -m` output, or a node's capture from `doctor collect`.

    Anything that is neither is a one-line usage error.
    """
    try:
        text = read_bounded(path, MAX_TOPO_INPUT).decode("utf-8", "replace")
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror}") from None
    if text.lstrip().startswith("{"):
        return _view_from_capture(path, text)
    try:
        topo = parse_topo_text(text)
    except TopoParseError as exc:
        raise UsageError(f"{path}: not an nvidia-smi topo -m output: {exc}") from None
    # nvidia-smi lists RDMA (ibverbs) devices only, so every NIC row is one.
    return TopoView(path.name, str(path), topo, topo.nics)


def _view_from_capture(path: Path, text: str) -> TopoView:
    try:
        cap = Capture(loads(text))
    except (ValueError, CaptureError) as exc:
        raise UsageError(f"{path}: not a probe capture: {exc}") from None
    facts = parse_topo(cap)
    if isinstance(facts, Missing):
        raise UsageError(f"{path}: no topology in this capture: {facts.reason}")
    return view_of(path.stem, facts, parse_rdma(cap), parse_gpus(cap))
