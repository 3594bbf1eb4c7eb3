"""Interfaces across one node's subnets and across nodes: shared addresses, MTU, names."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from checks.nics.common import where
from doctor.core.model import Finding, Fix, Missing, Severity
from doctor.core.nodeset import compact, group_nodes
from doctor.core.shell import command, commands
from doctor.facts.cluster import ClusterFacts
from doctor.facts.network.net import IfAddr
from doctor.facts.node import NodeFacts
from doctor.judge.drift import drift_findings
from doctor.nic.choice import NicPlan
from doctor.nic.plan import mpi_include
from doctor.plugin import Skip, cluster_check, need, node_check


@node_check(
    "nics.subnet",
    "No two interfaces share one IPv4 subnet",
    needs=("net",),
    codes={"nic.two_in_subnet": "two interfaces hold addresses in the same IPv4 subnet"},
)
def two_in_subnet(facts: NodeFacts) -> Iterator[Finding]:
    net = need(facts.net)
    by_net: dict[str, list[IfAddr]] = defaultdict(list)
    for a in net.ifaddrs:
        if a.family == 2 and a.scope == "global":
            by_net[str(a.network)].append(a)
    if len({a.name for addrs in by_net.values() for a in addrs}) < 2:
        raise Skip("fewer than two interfaces with a global IPv4 address: none can share a subnet")
    for subnet, addrs in by_net.items():
        names = sorted({a.name for a in addrs})
        if len(names) > 1:
            yield Finding(
                "nic.two_in_subnet",
                Severity.WARN,
                f"{', '.join(names)} are all in {subnet}: replies may leave by the other "
                "interface, and a library bound to one may route through the other",
                evidence=tuple(where(a) for a in addrs),
                fix=Fix(
                    "Give each interface its own subnet, or pin the libraries to one of them.",
                    (command("export NCCL_SOCKET_IFNAME=={}", names[0]),),
                ),
            )


@cluster_check(
    "nics.cluster",
    "The chosen interfaces are consistent across nodes",
    needs=("net",),
    codes={
        "nic.same_address": "several nodes would advertise the same bootstrap address",
        "nic.mtu_mismatch": "the MTU of the chosen interface differs between nodes on one subnet",
        "nic.names_differ": "the usable interface has different names on different nodes",
    },
)
def nic_cluster(cluster: ClusterFacts) -> Iterator[Finding]:
    plans = {n: f.nic for n, f in cluster.nodes.items() if isinstance(f.nic, NicPlan)}
    if len(plans) < 2:
        raise Skip("fewer than two nodes with their interfaces read: nothing to compare")
    advertised = {n: p.bootstrap.first.address for n, p in plans.items() if p.bootstrap.first}
    for addr, nodes in group_nodes(advertised).items():
        if len(nodes) > 1:
            yield Finding(
                "nic.same_address",
                Severity.FAIL,
                f"NCCL on {compact(nodes)} would all advertise {addr}: peers connect to "
                "the wrong host (typically docker0 or a NAT address)",
                nodes=tuple(nodes),
                evidence=tuple(f"{n}: {where(plans[n].bootstrap.first)}" for n in nodes),  # type: ignore[arg-type]
                fix=Fix(
                    "Pin NCCL to the interface that holds each node's own address.",
                    commands("export NCCL_SOCKET_IFNAME==<interface>"),
                ),
            )
    subnets = {
        n: str(p.bootstrap.first.network) for n, p in plans.items() if p.bootstrap.first is not None
    }
    for subnet in set(subnets.values()):
        members = {n for n, s in subnets.items() if s == subnet}
        yield from drift_findings(
            _restricted(cluster, members),
            lambda f: _mtu(plans.get(f.node)),
            code="nic.mtu_mismatch",
            what=f"MTU on {subnet}",
            severity=Severity.WARN,
            fix=Fix(
                "Set one MTU on every node of the subnet (large transfers stall otherwise).",
                commands("ip link set dev <interface> mtu <same value everywhere>"),
            ),
        )
    names = {n: p.recommended.name for n, p in plans.items() if p.recommended is not None}
    if len(set(names.values())) > 1:
        groups = group_nodes(names)
        listing = ",".join(sorted(groups))
        mpi = mpi_include(list(plans.values()))
        yield Finding(
            "nic.names_differ",
            Severity.WARN,
            "the cluster interface has different names: "
            + "; ".join(f"{compact(ns)}: {n}" for n, ns in sorted(groups.items())),
            nodes=tuple(names),
            fix=Fix(
                "One exact list for NCCL and the subnet for Open MPI work everywhere; Gloo "
                "needs each node's own name (per-node environment or /etc/nccl.conf for NCCL).",
                (
                    command("export NCCL_SOCKET_IFNAME=={}", listing),
                    command(
                        "mpirun --mca btl_tcp_if_include {0} --mca oob_tcp_if_include {0} ...", mpi
                    ),
                    *(
                        command(
                            "echo {} >> /etc/nccl.conf; export GLOO_SOCKET_IFNAME={}  # on {}",
                            f"NCCL_SOCKET_IFNAME=={n}",
                            n,
                            compact(ns),
                        )
                        for n, ns in sorted(groups.items())
                    ),
                ),
            ),
        )


def _mtu(plan: NicPlan | None) -> int | Missing:
    first = plan.bootstrap.first if plan else None
    iface = plan.net.interfaces.get(first.name) if plan and first else None
    if iface is None or iface.mtu is None:
        return Missing("no MTU")
    return iface.mtu


def _restricted(cluster: ClusterFacts, members: set[str]) -> ClusterFacts:
    # Judged by majority within the subnet: a baseline node may sit on another network.
    return ClusterFacts(nodes={n: f for n, f in cluster.nodes.items() if n in members})
