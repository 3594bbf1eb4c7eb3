"""One node's NIC picture: what NCCL, Gloo, TensorPipe and Open MPI will use, and what to set.

``plan_node`` is a pure function of NodeFacts, so the cluster view is a loop over nodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from doctor.facts.net import AF_INET, Interface, NetFacts
from doctor.facts.node import NodeFacts
from doctor.facts.rdma import RdmaFacts
from doctor.model import Missing
from doctor.nic import library
from doctor.nic.config import Setting, mca_settings, nccl_settings
from doctor.nic.frameworks import MpiChoice, SocketChoice, gloo_choice, mpi_choice, tp_choice
from doctor.nic.nccl import (
    IbChoice,
    LibraryBootstrap,
    Selection,
    Version,
    ib_choice,
    select,
)

# Names that belong to container runtimes, hypervisors and overlays, never to the data path
# between nodes (NCCL itself skips only docker*, lo and, from 2.28.3, virbr*).
VIRTUAL_PREFIXES = ("docker", "virbr", "br-", "cni", "flannel", "cali", "kube-", "vxlan", "tunl")
ROUTED_KINDS = ("physical", "ipoib", "bond", "vlan", "macvlan", "ipvlan", "veth")


@dataclass(frozen=True)
class NicPlan:
    node: str
    net: NetFacts
    nccl_settings: dict[str, Setting]
    nccl_version: Version | None
    bootstrap: Selection
    socket: Selection
    ib: IbChoice | None
    library: LibraryBootstrap | None  # what the real libnccl chose on the node, when it ran
    library_path: str | None
    gloo: SocketChoice
    tp: SocketChoice
    mpi_btl: MpiChoice
    mpi_oob: MpiChoice
    recommended: Interface | None
    proven: frozenset[str] | None  # interfaces peers reached over TCP; None: not tested

    def recommendation(self) -> dict[str, str]:
        """Environment that pins every library to the recommended interface."""
        if self.recommended is None:
            return {}
        return env_for(self.recommended.name)


def env_for(name: str) -> dict[str, str]:
    return {
        "NCCL_SOCKET_IFNAME": f"={name}",
        "GLOO_SOCKET_IFNAME": name,
        "TP_SOCKET_IFNAME": name,
        "OMPI_MCA_btl_tcp_if_include": name,
        "OMPI_MCA_oob_tcp_if_include": name,
    }


def virtual_name(name: str) -> bool:
    return name.startswith(VIRTUAL_PREFIXES)


def routable(iface: Interface) -> bool:
    """Up, running, and holding an address another node can reach (not loopback/link-local)."""
    return (
        iface.running
        and iface.kind != "loopback"
        and any(a.scope == "global" for a in iface.addresses)
    )


def reach_address(iface: Interface) -> str | None:
    """The address the reachability stage tests ``iface`` on: the first non-link-local IPv4 of
    a routable interface, else its first global IPv6 (an IPv6-only fabric; a link-local one
    names no route without the sender's own interface). None: the interface is not tested."""
    if not routable(iface):
        return None
    usable = [a for a in iface.addresses if a.scope == "global"]  # never empty when routable
    return next((a for a in usable if a.family == AF_INET), usable[0]).address


def recommend(net: NetFacts, proven: frozenset[str] | None = None) -> Interface | None:
    """The interface every library should use: routable, not a container/VM bridge, the one
    holding the default route first, then real NICs, IPv4, and the fastest link. Once the
    reachability stage ran, only interfaces every peer reached (``proven``) qualify."""
    candidates = [
        i for i in net.interfaces.values() if routable(i) and (proven is None or i.name in proven)
    ]
    if not candidates:
        return None

    def score(i: Interface) -> tuple:
        return (
            not virtual_name(i.name) and i.kind != "bridge" and i.slave_kind is None,
            i.kind in ROUTED_KINDS,
            i.name in net.default_routes,
            any(a.family == 2 and not a.link_local for a in i.addresses),
            i.speed_mbps or 0,
        )

    return max(candidates, key=score)


def plan_node(facts: NodeFacts) -> NicPlan | Missing:
    net = facts.net
    if isinstance(net, Missing):
        return net
    env = facts.env if isinstance(facts.env, dict) else {}
    settings = nccl_settings(env, facts.nccl if not isinstance(facts.nccl, Missing) else None)
    lib = library.pick(facts)
    version = library.nccl_version(facts)
    rdma = facts.rdma if isinstance(facts.rdma, RdmaFacts) else None
    mca = mca_settings(env, net)
    return NicPlan(
        node=facts.node,
        net=net,
        nccl_settings=settings,
        nccl_version=version,
        bootstrap=select(net, settings, version, bootstrap=True),
        socket=select(net, settings, version, bootstrap=False),
        ib=ib_choice(rdma, settings) if rdma is not None else None,
        library=library.bootstrap(facts),
        library_path=lib.path if lib else None,
        gloo=gloo_choice(net, env),
        tp=tp_choice(net, env),
        mpi_btl=mpi_choice(net, mca, "btl_tcp"),
        mpi_oob=mpi_choice(net, mca, "oob_tcp"),
        recommended=recommend(net, facts.proven_ifaces),
        proven=facts.proven_ifaces,
    )


def _binding_json(choice: SocketChoice) -> dict[str, Any]:
    first = choice.bindings[0] if choice.bindings else None
    return {
        "interface": first.interface if first else None,
        "address": first.address if first else None,
        "rule": choice.rule,
        "devices": [
            {"interface": b.interface, "address": b.address, "error": b.error}
            for b in choice.bindings
        ],
        "problems": list(choice.problems),
    }


def plan_json(plan: NicPlan) -> dict[str, Any]:
    """The per-node part of `doctor nics --format json` and of the report's "nics" section."""
    first = plan.bootstrap.first
    nccl: dict[str, Any] = {
        "version": ".".join(map(str, plan.nccl_version)) if plan.nccl_version else None,
        "settings": {
            k: {"value": s.value, "source": s.source} for k, s in plan.nccl_settings.items()
        },
        "bootstrap": {
            "interface": first.name if first else None,
            "address": first.address if first else None,
            "rule": plan.bootstrap.rule,
            "error": plan.bootstrap.error,
        },
        "socket": [{"interface": a.name, "address": a.address} for a in plan.socket.interfaces],
        "net": "IB" if plan.ib and plan.ib.usable else "Socket",
    }
    if plan.ib is not None:
        nccl["ib"] = {
            "reason": plan.ib.reason,
            "ports": [f"{p.hca}:{p.port}/{p.transport}" for p in plan.ib.ports],
        }
    if plan.library is not None:
        lib_id = plan.library.id_address
        nccl["library"] = {
            "path": plan.library_path,
            "bootstrap": {
                "interface": plan.library.interface,
                "address": plan.library.address,
                "warning": plan.library.logged.warning,
            },
            "unique_id": {
                "family": _family(lib_id.family) if lib_id else None,
                "address": lib_id.address if lib_id else None,
                "port": lib_id.port if lib_id else None,
                "interface": plan.library.id_interface,
            },
            "agrees": agrees(plan),
        }
    return {
        "interfaces": [
            {
                "name": i.name,
                "kind": i.kind,
                "state": i.state(),
                "mtu": i.mtu,
                "speed_mbps": i.speed_mbps,
                "addresses": [
                    {"address": a.address, "prefixlen": a.prefixlen, "scope": a.scope}
                    for a in i.addresses
                ],
                "master": i.master,
                "driver": i.driver,
                "pci": i.pci_address,
                "numa_node": i.numa_node,
            }
            for i in plan.net.interfaces.values()
        ],
        "default_route": list(plan.net.default_routes),
        "nccl": nccl,
        "gloo": _binding_json(plan.gloo),
        "tp": _binding_json(plan.tp),
        "mpi": {
            c.parameter: {
                "interfaces": list(c.interfaces),
                "rule": c.rule,
                "problems": list(c.problems),
            }
            for c in (plan.mpi_btl, plan.mpi_oob)
        },
        "recommendation": plan.recommendation(),
        "proven_reachable": sorted(plan.proven) if plan.proven is not None else None,
    }


def _family(family: int) -> str:
    return "AF_INET" if family == AF_INET else "AF_INET6"


def agrees(plan: NicPlan) -> bool | None:
    """Prediction and library name the same bootstrap interface (None: nothing to compare)."""
    if plan.library is None:
        return None
    first = plan.bootstrap.first
    return (first.name if first else None) == plan.library.interface
