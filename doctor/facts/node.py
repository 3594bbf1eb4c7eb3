"""NodeFacts: everything parsed from one node's capture, each area a value or a Missing."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from doctor.core.capture import Capture
from doctor.core.model import Missing
from doctor.facts.amd.model import AmdFacts
from doctor.facts.amd.sysfs import parse_amd
from doctor.facts.frameworks import FrameworkFacts, parse_frameworks
from doctor.facts.gpu import GpuFacts
from doctor.facts.gpu_bench import GpuBench, parse_gpu_bench
from doctor.facts.gpu_vendors import parse_gpus
from doctor.facts.host.host import HostFacts, parse_host
from doctor.facts.kernel.log import KernelLogFacts, parse_kernel
from doctor.facts.limits import LimitFacts, parse_limits
from doctor.facts.mpi import MpiFacts, parse_mpi
from doctor.facts.nccl.libraries import NcclFacts, parse_nccl
from doctor.facts.network.net import NetFacts, parse_net
from doctor.facts.network.peers import PeerFacts, parse_peers
from doctor.facts.network.rdma import RdmaFacts, parse_rdma
from doctor.facts.nvidia.driver import DriverFacts, parse_driver
from doctor.facts.nvidia.gpu_host import GpuHostFacts, parse_gpu_host
from doctor.facts.pci import PciDevice, parse_pci
from doctor.facts.pcie_link import PcieLink, parse_pcie_links
from doctor.facts.system import SystemFacts, parse_system
from doctor.facts.topo.topology import TopoFacts, parse_topo

if TYPE_CHECKING:
    from doctor.nic.choice import NicPlan

T = TypeVar("T")
# Until the pipeline derives it (doctor/nic/plan.py with_plan), after the cross-node stages.
NOT_DERIVED = Missing("the NIC plan is derived once the cross-node stages ran", "unsupported")


@dataclass(frozen=True)
class NodeFacts:
    node: str
    capture: Capture
    system: SystemFacts | Missing
    limits: LimitFacts | Missing
    env: dict[str, str] | Missing
    pci: list[PciDevice] | Missing
    pcie_links: dict[str, PcieLink] | Missing
    topo: TopoFacts | Missing
    peers: PeerFacts | Missing
    net: NetFacts | Missing
    rdma: RdmaFacts | Missing
    nccl: NcclFacts | Missing
    driver: DriverFacts | Missing
    gpus: GpuFacts | Missing
    gpu_host: GpuHostFacts | Missing
    gpu_bench: GpuBench | Missing
    amd: AmdFacts | Missing
    mpi: MpiFacts | Missing
    frameworks: FrameworkFacts | Missing
    kernel: KernelLogFacts | Missing
    host: HostFacts | Missing
    # Derived, not parsed: what NCCL, Gloo and Open MPI will use here and what to set, on the
    # interfaces every peer reached over TCP when the reachability stage ran.
    nic: NicPlan | Missing = NOT_DERIVED

    def to_json(self) -> dict[str, Any]:
        from doctor.core.jsonable import jsonable

        return {k: jsonable(getattr(self, k)) for k in FACT_AREAS}


def guarded(parse: Callable[[Capture], T], cap: Capture, area: str) -> T | Missing:
    """Run one area's parser; a parser that breaks on odd input makes that area Missing only."""
    try:
        return parse(cap)
    except Exception as exc:  # reported as the area's reason, never a traceback
        return Missing(f"could not parse {area}: {type(exc).__name__}: {exc}", "failed")


def _env(cap: Capture) -> dict[str, str] | Missing:
    value = cap.value("env")
    return value if isinstance(value, (dict, Missing)) else Missing("env is not a map", "failed")


# Each area's parser, in report order; a new area is one line here and one field above.
PARSERS: dict[str, Callable[[Capture], Any]] = {
    "system": parse_system,
    "limits": parse_limits,
    "env": _env,
    "pci": parse_pci,
    "pcie_links": parse_pcie_links,
    "nccl": parse_nccl,
    "driver": parse_driver,
    "gpus": parse_gpus,
    "gpu_host": parse_gpu_host,
    "gpu_bench": parse_gpu_bench,
    "amd": parse_amd,
    "mpi": parse_mpi,
    "frameworks": parse_frameworks,
    "net": parse_net,
    "rdma": parse_rdma,
    "topo": parse_topo,
    "peers": parse_peers,
    "kernel": parse_kernel,
    "host": parse_host,
}
# The areas a check can name in ``needs``.
FACT_AREAS: tuple[str, ...] = tuple(PARSERS)


def parse_node(node: str, cap: Capture) -> NodeFacts:
    areas: dict[str, Any] = {area: guarded(parse, cap, area) for area, parse in PARSERS.items()}
    return NodeFacts(node=node, capture=cap, **areas)
