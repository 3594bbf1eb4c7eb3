"""Gloo, TensorPipe and Open MPI: the addresses they bind and the interface lists they try."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from checks.nics.common import addresses, plan_of, proven_text, reached
from doctor.core.model import Finding, Fix, Missing, Severity
from doctor.core.shell import command
from doctor.facts.cluster import ClusterFacts
from doctor.facts.node import NodeFacts
from doctor.nic.plan import virtual_name
from doctor.plugin import Skip, cluster_check, node_check


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
    plan = plan_of(facts)
    for prefix, choice, var, severity in (
        ("gloo", plan.gloo, "GLOO_SOCKET_IFNAME", Severity.FAIL),
        ("tp", plan.tp, "TP_SOCKET_IFNAME", Severity.WARN),
    ):
        value = plan.recommendation().get(var)
        fix = Fix(
            f"Name the interface explicitly in {var}.",
            (command("export {}={}", var, value),) if value else (),
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
                    evidence=(addresses(plan),),
                    fix=fix,
                )
            elif b.loopback:
                yield Finding(
                    f"{prefix}.iface.loopback",
                    severity if cross_node else Severity.WARN,
                    f"{choice.rule}: {prefix.upper() if prefix == 'tp' else 'Gloo'} advertises "
                    f"{b.address}, so other nodes connect to themselves and fail",
                    evidence=(f"getaddrinfo({plan.net.hostname})", addresses(plan)),
                    fix=Fix(
                        fix.text + " Or map the hostname to the node's real address in /etc/hosts.",
                        fix.commands,
                    ),
                )
            elif not reached(plan, b.interface):
                yield Finding(
                    f"{prefix}.iface.unreached",
                    severity,
                    f"{choice.rule}: {prefix.upper() if prefix == 'tp' else 'Gloo'} binds "
                    f"{b.interface}:{b.address}, which not every peer reached over TCP",
                    evidence=(proven_text(plan),),
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
    plan = plan_of(facts)
    for choice in (plan.mpi_btl, plan.mpi_oob):
        value = plan.recommendation().get(f"OMPI_MCA_{choice.parameter}_if_include")
        fix = Fix(
            f"Use one list: {choice.parameter}_if_include with the cluster interface.",
            (command("mpirun --mca {} {} ...", f"{choice.parameter}_if_include", value),)
            if value
            else (),
        )
        for problem in choice.problems:
            code = "mpi.env.both" if problem.startswith("Both") else "mpi.env.malformed"
            yield Finding(code, Severity.FAIL, f"{choice.rule}: {problem}", fix=fix)
        if "include" in choice.rule and not choice.interfaces:
            yield Finding(
                "mpi.env.no_match",
                Severity.FAIL,
                f"{choice.rule} matches no up IPv4 interface here",
                evidence=(addresses(plan),),
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
        unreached = [n for n in choice.interfaces if n not in odd and not reached(plan, n)]
        if unreached:
            yield Finding(
                "mpi.iface.unreached",
                Severity.WARN,
                f"Open MPI {choice.parameter} would try {', '.join(unreached)} ({choice.rule}), "
                "which not every peer reached over TCP: connections there stall till they time out",
                evidence=(proven_text(plan),),
                fix=fix,
            )
