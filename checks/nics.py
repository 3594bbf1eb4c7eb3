"""NIC selection: what NCCL, Gloo and Open MPI will use on each node, and why that breaks."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterator

from doctor.drift import drift_findings
from doctor.facts.cluster import ClusterFacts
from doctor.facts.net import IfAddr
from doctor.facts.node import NodeFacts
from doctor.model import Finding, Fix, Missing, Severity
from doctor.nic.grammar import nccl_list_active, parse_nccl_list
from doctor.nic.nccl import parse_comm_id
from doctor.nic.plan import NicPlan, agrees, plan_node, reach_address, virtual_name
from doctor.nodeset import compact
from doctor.plugin import Skip, cluster_check, need, node_check

SLOW_MBPS = 1000


def _plan(facts: NodeFacts) -> NicPlan:
    return need(plan_node(facts), "network interfaces")


def _pin(plan: NicPlan, text: str) -> Fix:
    """Pin every library to the recommended interface (or say that none is usable)."""
    env = plan.recommendation()
    if not env and plan.proven is not None:
        return Fix(
            text + " No interface of this node was reached by every peer over TCP: "
            "fix the paths the reach.* findings name first."
        )
    if not env:
        return Fix(
            text + " No interface on this node has a routable address: fix the network first."
        )
    return Fix(text, tuple(f"export {k}={v}" for k, v in env.items()))


def _where(a: IfAddr) -> str:
    return f"{a.name}:{a.address}"


@node_check(
    "nics.nccl",
    "NCCL bootstraps and sends over a usable interface",
    needs=("net",),
    codes={
        "nccl.iface.none": "NCCL finds no socket interface: ncclCommInit fails",
        "nccl.iface.loopback": "NCCL bootstraps on loopback: other nodes cannot connect",
        "nccl.iface.link_local_only": "NCCL's interface has only a link-local address",
        "nccl.iface.container": "NCCL uses a docker/libvirt/CNI interface, not the node's network",
        "nccl.iface.bridge": "NCCL uses a bridge or a bridge port",
        "nccl.iface.down": "NCCL (before 2.28.3) picks an interface that is not running",
        "nccl.iface.slow": "NCCL's interface is 1 Gb/s or slower",
        "nccl.socket.link_local": "NET/Socket spreads traffic over link-local-only interfaces",
        "nccl.env.malformed": "an NCCL interface variable is malformed",
        "nccl.env.no_match": "NCCL_SOCKET_IFNAME matches no interface with an address",
        "nccl.iface.unreached": "NCCL would use an interface that peers did not all reach over "
        "TCP (bootstrap or NET/Socket): connections to it hang or fail",
        "nccl.library.disagrees": "the real libnccl chose another interface than predicted",
        "nccl.ib.no_match": "NCCL_IB_HCA selects no ACTIVE port of the HCAs here",
    },
)
def nccl_iface(facts: NodeFacts) -> Iterator[Finding]:
    plan = _plan(facts)
    yield from _malformed(plan)
    first = plan.bootstrap.first
    if first is None:
        set_by_user = plan.bootstrap.rule.startswith("NCCL_SOCKET_IFNAME")
        yield Finding(
            "nccl.env.no_match" if set_by_user else "nccl.iface.none",
            Severity.FAIL,
            f"NCCL finds no bootstrap interface ({plan.bootstrap.rule}): "
            f"'{plan.bootstrap.error}' at init",
            evidence=(f"rule: {plan.bootstrap.rule}", _addresses(plan)),
            fix=_pin(plan, "Name an interface that exists with an address on this node."),
        )
    else:
        yield from _bootstrap_hazards(plan, first)
    yield from _socket_hazards(plan)
    yield from _unreached(plan, first)
    yield from _ib_selection(plan)
    lib = plan.library
    if lib is not None and agrees(plan) is False:
        yield Finding(
            "nccl.library.disagrees",
            Severity.WARN,
            f"libnccl chose {lib.interface or 'nothing'} but the prediction is "
            f"{first.name if first else 'nothing'}",
            evidence=(
                f"library {plan.library_path}: Bootstrap {lib.interface}:{lib.address}"
                + (f" (WARN {lib.logged.warning})" if lib.logged.warning else ""),
                f"predicted by rule {plan.bootstrap.rule}: " + (_where(first) if first else "none"),
            ),
            fix=_pin(plan, "Trust the library; pin the interface so both agree."),
        )


def _addresses(plan: NicPlan) -> str:
    have = ", ".join(_where(a) for a in plan.net.ifaddrs) or "no addresses at all"
    return f"addresses here: {have}"


def _bootstrap_hazards(plan: NicPlan, first: IfAddr) -> Iterator[Finding]:
    iface = plan.net.interfaces.get(first.name)
    where = f"NCCL bootstrap uses {_where(first)} ({plan.bootstrap.rule})"
    if first.loopback:
        yield Finding(
            "nccl.iface.loopback",
            Severity.FAIL,
            f"{where}: a loopback address no other node can reach",
            evidence=(_addresses(plan),),
            fix=_pin(plan, "Pin NCCL to the interface the nodes share."),
        )
    elif first.link_local:
        yield Finding(
            "nccl.iface.link_local_only",
            Severity.FAIL,
            f"{where}: link-local, only meaningful on this host, so peers fail to connect",
            evidence=(_addresses(plan),),
            fix=_pin(plan, "Pin NCCL to an interface with a routable address."),
        )
    if virtual_name(first.name):
        yield Finding(
            "nccl.iface.container",
            Severity.FAIL,
            f"{where}: a container/VM network (often the same address on every host)",
            evidence=(f"{first.name} is kind {iface.kind if iface else '?'}",),
            fix=_pin(plan, "Pin NCCL to the node's own network interface."),
        )
    elif iface is not None and (iface.kind == "bridge" or iface.slave_kind == "bridge"):
        role = "a bridge" if iface.kind == "bridge" else f"a port of bridge {iface.master}"
        yield Finding(
            "nccl.iface.bridge",
            Severity.WARN,
            f"{where}: {role}; check that other nodes can reach it",
            fix=_pin(plan, "Pin NCCL explicitly if this is not the cluster network."),
        )
    if iface is not None and not iface.running:
        yield Finding(
            "nccl.iface.down",
            Severity.FAIL,
            f"{where}: the interface is {iface.state()} (NCCL before 2.28.3 does not check)",
            evidence=(f"operstate {iface.operstate}, carrier {iface.carrier}",),
            fix=_pin(plan, "Bring the link up or pin NCCL to a running interface."),
        )
    if iface is not None and iface.speed_mbps is not None and iface.speed_mbps <= SLOW_MBPS:
        yield Finding(
            "nccl.iface.slow",
            Severity.WARN,
            f"{where}: the link runs at {iface.speed_mbps} Mb/s; collectives crawl",
            evidence=(f"/sys/class/net/{iface.name}/speed: {iface.speed_mbps}",),
            fix=Fix("Use a faster interface (NCCL_SOCKET_IFNAME) or fix link negotiation."),
        )


def _socket_hazards(plan: NicPlan) -> Iterator[Finding]:
    if plan.ib is not None and plan.ib.usable:
        return  # NET/IB carries the data; the socket list is not used
    bad = [a for a in plan.socket.interfaces if a.link_local]
    if len(plan.socket.interfaces) > 1 and bad:
        yield Finding(
            "nccl.socket.link_local",
            Severity.WARN,
            "NET/Socket would also use link-local-only "
            + ", ".join(_where(a) for a in bad)
            + ": peers get 'Network is unreachable' on those connections",
            evidence=("NET/Socket list: " + " ".join(_where(a) for a in plan.socket.interfaces),),
            fix=_pin(plan, "Limit NCCL to the routable interface."),
        )


def _reached(plan: NicPlan, name: str | None) -> bool:
    """False only for an interface the reachability stage tested and not every peer reached."""
    iface = plan.net.interfaces.get(name or "")
    return (
        plan.proven is None
        or iface is None
        or reach_address(iface) is None
        or iface.name in plan.proven
    )


def _proven(plan: NicPlan) -> str:
    return "reached by every peer: " + (", ".join(sorted(plan.proven or ())) or "nothing")


def _unreached(plan: NicPlan, first: IfAddr | None) -> Iterator[Finding]:
    """Interfaces NCCL would use that the reachability stage tested and peers failed to reach."""
    if plan.proven is None:
        return
    used = [first] if first is not None else []
    if plan.ib is None or not plan.ib.usable:
        used += plan.socket.interfaces
    bad: dict[str, IfAddr] = {}
    for a in used:
        if not _reached(plan, a.name):
            bad.setdefault(a.name, a)
    if bad:
        yield Finding(
            "nccl.iface.unreached",
            Severity.FAIL,
            "NCCL would use "
            + ", ".join(_where(a) for a in bad.values())
            + ", which not every peer reached over TCP (see the reachability table)",
            evidence=(
                "NCCL bootstrap: " + (_where(first) if first else "none"),
                "NET/Socket list: " + " ".join(_where(a) for a in plan.socket.interfaces),
                _proven(plan),
            ),
            fix=_pin(plan, "Keep NCCL to the interfaces every peer reached."),
        )


def _ib_selection(plan: NicPlan) -> Iterator[Finding]:
    hca = plan.nccl_settings.get("NCCL_IB_HCA")
    if hca is None or plan.ib is None or plan.ib.ports or plan.ib.reason == "no RDMA devices":
        return
    forced = plan.nccl_settings.get("NCCL_NET")
    forced_ib = forced is not None and forced.value.lower() == "ib"
    yield Finding(
        "nccl.ib.no_match",
        Severity.FAIL if forced_ib else Severity.WARN,
        f"NCCL_IB_HCA={hca.value} ({hca.source}) selects no ACTIVE port: NCCL "
        + (
            "fails: 'Failed to initialize any NET plugin'" if forced_ib else "falls back to sockets"
        ),
        evidence=(f"IB: {plan.ib.reason}",),
        fix=Fix(
            "Name this node's HCAs (ls /sys/class/infiniband) with ACTIVE ports, or unset it.",
            ("ls /sys/class/infiniband", "unset NCCL_IB_HCA"),
        ),
    )


def _malformed(plan: NicPlan) -> Iterator[Finding]:
    for name in ("NCCL_SOCKET_IFNAME", "NCCL_IB_HCA"):
        setting = plan.nccl_settings.get(name)
        if setting is None or not nccl_list_active(setting.value):
            continue
        problems = parse_nccl_list(setting.value).problems
        if problems:
            yield Finding(
                "nccl.env.malformed",
                Severity.FAIL,
                f"{name}={setting.value!r} ({setting.source}): {'; '.join(problems)}",
                evidence=(f"{name} from {setting.source}",),
                fix=Fix(
                    "Grammar: comma list of prefixes; '^' first excludes, '=' (after '^') "
                    "means exact names, e.g. NCCL_SOCKET_IFNAME==eth0 or ^docker,lo",
                    tuple(f"export {k}={v}" for k, v in plan.recommendation().items())[:1],
                ),
            )
    family = plan.nccl_settings.get("NCCL_SOCKET_FAMILY")
    if family is not None and family.value not in ("AF_INET", "AF_INET6"):
        yield Finding(
            "nccl.env.malformed",
            Severity.WARN,
            f"NCCL_SOCKET_FAMILY={family.value!r} is neither AF_INET nor AF_INET6: NCCL ignores it",
            fix=Fix(
                "Set exactly AF_INET or AF_INET6, or unset it.",
                ("export NCCL_SOCKET_FAMILY=AF_INET",),
            ),
        )
    comm = plan.nccl_settings.get("NCCL_COMM_ID")
    if comm is not None and (parse_comm_id(comm.value) is None or ":" not in comm.value):
        yield Finding(
            "nccl.env.malformed",
            Severity.FAIL,
            f"NCCL_COMM_ID={comm.value!r} is not <ip>:<port> or [<ipv6>]:<port>",
            fix=Fix(
                "Use the rank-0 node's address and a free port.",
                ("export NCCL_COMM_ID=198.18.0.1:29600",),
            ),
        )


@cluster_check(
    "nics.gloo",
    "Gloo and TensorPipe bind an address other nodes can reach",
    codes={
        "gloo.iface.loopback": "Gloo binds a loopback address (the hostname maps to 127.x)",
        "gloo.env.no_match": "a GLOO_SOCKET_IFNAME name has no address on this node",
        "gloo.env.malformed": "GLOO_SOCKET_IFNAME uses syntax Gloo does not have",
        "gloo.iface.unreached": "Gloo binds an interface that peers did not all reach over TCP",
        "tp.iface.loopback": "TensorPipe (torch RPC) falls back to a loopback address",
        "tp.iface.unreached": "TensorPipe binds an interface that peers did not all reach",
        "tp.env.no_match": "TP_SOCKET_IFNAME names no interface with an address",
    },
)
def gloo_iface(cluster: ClusterFacts) -> Iterator[Finding]:
    # A loopback address only breaks traffic between nodes: on a one-node run it is a warning
    # about the next multi-node job, not a failure of this one.
    cross_node = len(cluster.names) > 1
    readable = {n: f for n, f in cluster.nodes.items() if not isinstance(f.net, Missing)}
    if not readable:
        raise Skip("no node's interfaces could be read")
    for name, facts in readable.items():
        for finding in _gloo_findings(facts, cross_node):
            yield dataclasses.replace(finding, nodes=(name,))


def _gloo_findings(facts: NodeFacts, cross_node: bool) -> Iterator[Finding]:
    plan = _plan(facts)
    for prefix, choice, var, severity in (
        ("gloo", plan.gloo, "GLOO_SOCKET_IFNAME", Severity.FAIL),
        ("tp", plan.tp, "TP_SOCKET_IFNAME", Severity.WARN),
    ):
        value = plan.recommendation().get(var)
        fix = Fix(
            f"Name the interface explicitly in {var}.",
            (f"export {var}={value}",) if value else (),
        )
        if choice.problems and prefix == "gloo":
            yield Finding(
                "gloo.env.malformed",
                Severity.FAIL,
                f"{choice.rule}: {'; '.join(choice.problems)}",
                fix=fix,
            )
        for b in choice.bindings:
            if b.address is None:
                yield Finding(
                    f"{prefix}.env.no_match",
                    severity,
                    f"{choice.rule}: {b.error}",
                    evidence=(_addresses(plan),),
                    fix=fix,
                )
            elif b.loopback:
                yield Finding(
                    f"{prefix}.iface.loopback",
                    severity if cross_node else Severity.WARN,
                    f"{choice.rule}: {prefix.upper() if prefix == 'tp' else 'Gloo'} advertises "
                    f"{b.address}, so other nodes connect to themselves and fail",
                    evidence=(f"getaddrinfo({plan.net.hostname})", _addresses(plan)),
                    fix=Fix(
                        fix.text + " Or map the hostname to the node's real address in /etc/hosts.",
                        fix.commands,
                    ),
                )
            elif not _reached(plan, b.interface):
                yield Finding(
                    f"{prefix}.iface.unreached",
                    severity,
                    f"{choice.rule}: {prefix.upper() if prefix == 'tp' else 'Gloo'} binds "
                    f"{b.interface}:{b.address}, which not every peer reached over TCP",
                    evidence=(_proven(plan),),
                    fix=fix,
                )


@node_check(
    "nics.mpi",
    "Open MPI's TCP interface lists are valid and avoid container bridges",
    needs=("net",),
    codes={
        "mpi.env.both": "both btl_tcp_if_include and btl_tcp_if_exclude are set",
        "mpi.env.malformed": "an Open MPI interface list is malformed",
        "mpi.env.no_match": "an Open MPI include list matches no interface",
        "mpi.iface.container": "Open MPI would also try docker/libvirt/bridge interfaces",
        "mpi.iface.unreached": "Open MPI would also try an interface peers did not all reach",
    },
)
def mpi_iface(facts: NodeFacts) -> Iterator[Finding]:
    plan = _plan(facts)
    for choice in (plan.mpi_btl, plan.mpi_oob):
        value = plan.recommendation().get(f"OMPI_MCA_{choice.parameter}_if_include")
        fix = Fix(
            f"Use one list: {choice.parameter}_if_include with the cluster interface.",
            (f"mpirun --mca {choice.parameter}_if_include {value} ...",) if value else (),
        )
        for problem in choice.problems:
            code = "mpi.env.both" if problem.startswith("Both") else "mpi.env.malformed"
            yield Finding(code, Severity.FAIL, f"{choice.rule}: {problem}", fix=fix)
        if "include" in choice.rule and not choice.interfaces:
            yield Finding(
                "mpi.env.no_match",
                Severity.FAIL,
                f"{choice.rule} matches no up IPv4 interface here",
                evidence=(_addresses(plan),),
                fix=fix,
            )
        included = choice.rule.startswith(f"{choice.parameter}_if_include")
        odd = [] if included else [n for n in choice.interfaces if virtual_name(n)]
        if odd:
            yield Finding(
                "mpi.iface.container",
                Severity.WARN,
                f"Open MPI {choice.parameter} would try {', '.join(odd)} ({choice.rule}): "
                "the same private address on every host makes connections hang",
                fix=fix,
            )
        # A container bridge is reported once, above, even though peers never reach it either.
        unreached = [n for n in choice.interfaces if n not in odd and not _reached(plan, n)]
        if unreached:
            yield Finding(
                "mpi.iface.unreached",
                Severity.WARN,
                f"Open MPI {choice.parameter} would try {', '.join(unreached)} ({choice.rule}), "
                "which not every peer reached over TCP: connections there stall till they time out",
                evidence=(_proven(plan),),
                fix=fix,
            )


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
    for subnet, addrs in by_net.items():
        names = sorted({a.name for a in addrs})
        if len(names) > 1:
            yield Finding(
                "nic.two_in_subnet",
                Severity.WARN,
                f"{', '.join(names)} are all in {subnet}: replies may leave by the other "
                "interface, and a library bound to one may route through the other",
                evidence=tuple(_where(a) for a in addrs),
                fix=Fix(
                    "Give each interface its own subnet, or pin the libraries to one of them.",
                    (f"export NCCL_SOCKET_IFNAME=={names[0]}",),
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
    plans = {n: p for n, f in cluster.nodes.items() if not isinstance(p := plan_node(f), Missing)}
    by_addr: dict[str, list[str]] = defaultdict(list)
    for node, plan in plans.items():
        first = plan.bootstrap.first
        if first is not None:
            by_addr[first.address].append(node)
    for addr, nodes in by_addr.items():
        if len(nodes) > 1:
            yield Finding(
                "nic.same_address",
                Severity.FAIL,
                f"NCCL on {compact(nodes)} would all advertise {addr}: peers connect to "
                "the wrong host (typically docker0 or a NAT address)",
                nodes=tuple(nodes),
                evidence=tuple(f"{n}: {_where(plans[n].bootstrap.first)}" for n in nodes),  # type: ignore[arg-type]
                fix=Fix(
                    "Pin NCCL to the interface that holds each node's own address.",
                    ("export NCCL_SOCKET_IFNAME==<interface>",),
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
                ("ip link set dev <interface> mtu <same value everywhere>",),
            ),
        )
    names = {n: p.recommended.name for n, p in plans.items() if p.recommended is not None}
    if len(set(names.values())) > 1:
        groups: dict[str, list[str]] = defaultdict(list)
        for node, name in names.items():
            groups[name].append(node)
        listing = ",".join(sorted(groups))
        yield Finding(
            "nic.names_differ",
            Severity.WARN,
            "the cluster interface has different names: "
            + "; ".join(f"{compact(ns)}: {n}" for n, ns in sorted(groups.items())),
            nodes=tuple(names),
            fix=Fix(
                "One exact list for NCCL works everywhere; Gloo needs each node's own name "
                "(per-node environment or /etc/nccl.conf for NCCL).",
                (
                    f"export NCCL_SOCKET_IFNAME=={listing}",
                    *(
                        f"on {compact(ns)}: echo 'NCCL_SOCKET_IFNAME=={n}' >> /etc/nccl.conf; "
                        f"export GLOO_SOCKET_IFNAME={n}"
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


CHECKS = [nccl_iface, gloo_iface, mpi_iface, two_in_subnet, nic_cluster]
