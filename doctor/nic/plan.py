"""One node's NIC picture: what NCCL, Gloo, TensorPipe and Open MPI will use, and what to set.

``plan_node`` is a pure function of NodeFacts and the interfaces peers reached; the pipeline
derives every node's plan once (``with_plan``) and checks, the report and the allreduce read it.
What a plan holds is ``NicPlan`` (choice.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from doctor.core.model import Missing
from doctor.facts.network.net import AF_INET, Interface, NetFacts
from doctor.facts.network.rdma import RdmaFacts
from doctor.facts.node import NodeFacts
from doctor.nic import library
from doctor.nic.choice import NicPlan, env_for
from doctor.nic.config import mca_settings, nccl_settings
from doctor.nic.frameworks import gloo_choice, mpi_choice, tp_choice
from doctor.nic.nccl import ib_choice, select

# Names that belong to container runtimes, hypervisors and overlays, never to the data path
# between nodes (NCCL itself skips only docker*, lo and, from 2.28.3, virbr*).
VIRTUAL_PREFIXES = ("docker", "virbr", "br-", "cni", "flannel", "cali", "kube-", "vxlan", "tunl")
ROUTED_KINDS = ("physical", "ipoib", "bond", "vlan", "macvlan", "ipvlan", "veth")


def mpi_include(plans: list[NicPlan]) -> str | None:
    """The value one mpirun gives btl/oob_tcp_if_include for every node: the interface's name
    where every node calls it the same; else its subnets (Open MPI takes CIDR notation), or the
    names when an interface has no IPv4 subnet (a node skips a name it lacks, with a warning)."""
    chosen = [p.recommended for p in plans if p.recommended is not None]
    names = sorted({i.name for i in chosen})
    if len(names) <= 1:
        return names[0] if names else None
    return subnets(plans) or ",".join(names)


def subnets(plans: list[NicPlan]) -> str | None:
    """The IPv4 subnets of the recommended interfaces, in Open MPI's CIDR notation (None when
    one has no IPv4 subnet). Unlike a name, it also holds on a head node that is not one of the
    nodes, where mpirun itself runs."""
    found = set()
    for plan in plans:
        if plan.recommended is None:
            continue
        ipv4 = next(
            (a for a in plan.recommended.addresses if a.family == AF_INET and a.scope == "global"),
            None,
        )
        if ipv4 is None:
            return None
        found.add(str(ipv4.network))
    return ",".join(sorted(found)) or None


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


def plan_node(facts: NodeFacts, proven: frozenset[str] | None = None) -> NicPlan | Missing:
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
        recommended=recommend(net, proven),
        proven=proven,
    )


def with_plan(facts: NodeFacts, proven: frozenset[str] | None = None) -> NodeFacts:
    """The node's facts with its NIC plan; ``proven``: the interfaces every peer reached over
    TCP (None when the reachability stage did not test the node)."""
    return replace(facts, nic=plan_node(facts, proven))


def with_plans(
    facts: Mapping[str, NodeFacts], proven: Mapping[str, frozenset[str]]
) -> dict[str, NodeFacts]:
    """Every node's facts with its NIC plan, and the Open MPI value every plan shares (one
    mpirun serves every node); a node missing from ``proven`` was not tested."""
    planned = {name: with_plan(f, proven.get(name)) for name, f in facts.items()}
    plans = [f.nic for f in planned.values() if isinstance(f.nic, NicPlan)]
    shared = mpi_include(plans)
    return {
        name: replace(f, nic=replace(f.nic, mpi_include=shared))
        if isinstance(f.nic, NicPlan)
        else f
        for name, f in planned.items()
    }


def would_change(facts: NodeFacts, env: Mapping[str, str]) -> bool:
    """Whether setting ``env`` on the node changes the interfaces NCCL, Gloo or TensorPipe would
    choose there (the replay again, with ``env`` on top); unknown counts as a change."""
    now = facts.nic
    if not isinstance(now, NicPlan) or not isinstance(facts.env, dict):
        return True
    after = plan_node(replace(facts, env={**facts.env, **env}), now.proven)
    return not isinstance(after, NicPlan) or _choices(now) != _choices(after)


def _choices(plan: NicPlan) -> tuple[object, ...]:
    first = plan.bootstrap.first
    return (
        first.name if first else None,
        tuple(a.name for a in plan.socket.interfaces),
        tuple(b.interface for b in plan.gloo.bindings),
        tuple(b.interface for b in plan.tp.bindings),
    )


def cluster_recommendation(by_node: Mapping[str, NicPlan | Missing]) -> dict[str, str]:
    """One environment for every node when the interface has one name; else what can be shared.

    NCCL accepts an exact list (=eth0,ens5: each node uses the name it has) and Open MPI the
    subnets; Gloo and TensorPipe need each node's own name, left to the per-node recommendation.
    """
    plans = [p for p in by_node.values() if isinstance(p, NicPlan)]
    names = sorted({p.recommended.name for p in plans if p.recommended})
    mpi = mpi_include(plans)
    if len(names) == 1:
        return env_for(names[0], mpi)
    if names:
        return {
            "NCCL_SOCKET_IFNAME": "=" + ",".join(names),
            "OMPI_MCA_btl_tcp_if_include": mpi or "",
            "OMPI_MCA_oob_tcp_if_include": mpi or "",
        }
    return {}


def agrees(plan: NicPlan) -> bool | None:
    """Prediction and library name the same bootstrap interface (None: nothing to compare)."""
    if plan.library is None:
        return None
    first = plan.bootstrap.first
    return (first.name if first else None) == plan.library.interface
