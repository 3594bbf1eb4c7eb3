"""NCCL's interfaces: bootstrap, NET/Socket and NET/IB as NCCL would choose them on each node."""

from __future__ import annotations

from collections.abc import Iterator

from checks.nics.common import SLOW_MBPS, addresses, pin, plan_of, proven_text, reached, where
from doctor.core.model import Finding, Fix, Severity
from doctor.core.shell import command, commands
from doctor.facts.network.net import IfAddr
from doctor.facts.node import NodeFacts
from doctor.nic.choice import NicPlan
from doctor.nic.grammar import nccl_list_active, parse_nccl_list
from doctor.nic.nccl import parse_comm_id
from doctor.nic.plan import agrees, virtual_name
from doctor.plugin import node_check


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
    plan = plan_of(facts)
    yield from _malformed(plan)
    first = plan.bootstrap.first
    if first is None:
        set_by_user = plan.bootstrap.rule.startswith("NCCL_SOCKET_IFNAME")
        yield Finding(
            "nccl.env.no_match" if set_by_user else "nccl.iface.none",
            Severity.FAIL,
            f"NCCL finds no bootstrap interface ({plan.bootstrap.rule}): "
            f"'{plan.bootstrap.error}' at init",
            evidence=(f"rule: {plan.bootstrap.rule}", addresses(plan)),
            fix=pin(plan, "Name an interface that exists with an address on this node."),
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
                f"predicted by rule {plan.bootstrap.rule}: " + (where(first) if first else "none"),
            ),
            fix=pin(plan, "Trust the library; pin the interface so both agree."),
        )


def _bootstrap_hazards(plan: NicPlan, first: IfAddr) -> Iterator[Finding]:
    iface = plan.net.interfaces.get(first.name)
    uses = f"NCCL bootstrap uses {where(first)} ({plan.bootstrap.rule})"
    if first.loopback:
        yield Finding(
            "nccl.iface.loopback",
            Severity.FAIL,
            f"{uses}: a loopback address no other node can reach",
            evidence=(addresses(plan),),
            fix=pin(plan, "Pin NCCL to the interface the nodes share."),
        )
    elif first.link_local:
        yield Finding(
            "nccl.iface.link_local_only",
            Severity.FAIL,
            f"{uses}: link-local, only meaningful on this host, so peers fail to connect",
            evidence=(addresses(plan),),
            fix=pin(plan, "Pin NCCL to an interface with a routable address."),
        )
    if virtual_name(first.name):
        yield Finding(
            "nccl.iface.container",
            Severity.FAIL,
            f"{uses}: a container/VM network (often the same address on every host)",
            evidence=(f"{first.name} is kind {iface.kind if iface else '?'}",),
            fix=pin(plan, "Pin NCCL to the node's own network interface."),
        )
    elif iface is not None and (iface.kind == "bridge" or iface.slave_kind == "bridge"):
        role = "a bridge" if iface.kind == "bridge" else f"a port of bridge {iface.master}"
        yield Finding(
            "nccl.iface.bridge",
            Severity.WARN,
            f"{uses}: {role}; check that other nodes can reach it",
            fix=pin(plan, "Pin NCCL explicitly if this is not the cluster network."),
        )
    if iface is not None and not iface.running:
        yield Finding(
            "nccl.iface.down",
            Severity.FAIL,
            f"{uses}: the interface is {iface.state()} (NCCL before 2.28.3 does not check)",
            evidence=(f"operstate {iface.operstate}, carrier {iface.carrier}",),
            fix=pin(plan, "Bring the link up or pin NCCL to a running interface."),
        )
    if iface is not None and iface.speed_mbps is not None and iface.speed_mbps <= SLOW_MBPS:
        yield Finding(
            "nccl.iface.slow",
            Severity.WARN,
            f"{uses}: the link runs at {iface.speed_mbps} Mb/s; collectives crawl",
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
            + ", ".join(where(a) for a in bad)
            + ": peers get 'Network is unreachable' on those connections",
            evidence=("NET/Socket list: " + " ".join(where(a) for a in plan.socket.interfaces),),
            fix=pin(plan, "Limit NCCL to the routable interface."),
        )


def _unreached(plan: NicPlan, first: IfAddr | None) -> Iterator[Finding]:
    """Interfaces NCCL would use that the reachability stage tested and peers failed to reach."""
    if plan.proven is None:
        return
    used = [first] if first is not None else []
    if plan.ib is None or not plan.ib.usable:
        used += plan.socket.interfaces
    bad: dict[str, IfAddr] = {}
    for a in used:
        if not reached(plan, a.name):
            bad.setdefault(a.name, a)
    if bad:
        yield Finding(
            "nccl.iface.unreached",
            Severity.FAIL,
            "NCCL would use "
            + ", ".join(where(a) for a in bad.values())
            + ", which not every peer reached over TCP (see the reachability table)",
            evidence=(
                "NCCL bootstrap: " + (where(first) if first else "none"),
                "NET/Socket list: " + " ".join(where(a) for a in plan.socket.interfaces),
                proven_text(plan),
            ),
            fix=pin(plan, "Keep NCCL to the interfaces every peer reached."),
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
            commands("ls /sys/class/infiniband", "unset NCCL_IB_HCA"),
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
                    tuple(command("export {}={}", k, v) for k, v in plan.recommendation().items())[
                        :1
                    ],
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
                commands("export NCCL_SOCKET_FAMILY=AF_INET"),
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
                commands("export NCCL_COMM_ID=198.18.0.1:29600"),
            ),
        )
