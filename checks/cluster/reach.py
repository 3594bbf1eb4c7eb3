"""TCP between nodes on each interface, judged as Horovod's interface test does."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from checks.stage import not_run, whole_nodes
from doctor.core.model import Finding, Fix, Severity
from doctor.core.nodeset import compact
from doctor.core.shell import command, commands, over_ssh
from doctor.facts.cluster import ClusterFacts
from doctor.facts.network.reach import Reachability, ReachLink
from doctor.plugin import cluster_check, need


@cluster_check(
    "reach.tcp",
    "Every node opens TCP to every peer on its interfaces, from the address it sent from",
    needs=("reachability",),
    codes={
        "reach.none": "a node cannot open TCP to a peer on any of the peer's interfaces",
        "reach.partial": "a peer's interface is reachable from some nodes and not from others",
        "reach.nat": "connections arrive from another address than the sender's (NAT, docker "
        "path): the address a library advertises is not the one peers see",
        "reach.iface_isolated": "an interface no other node reaches (the same address on every "
        "node, like docker0): never use it between nodes",
        "reach.not_run": "the reachability test could not run on a reachable node",
        "reach.listener": "no peer reached a node on any interface (every one that tried "
        "failed, twice): that node's listener or firewall, not N broken pairs",
        "reach.outbound": "a node reached no peer on any interface (every pair it tried "
        "failed, twice): that node's routes or firewall, not N broken pairs",
    },
)
def reach_tcp(cluster: ClusterFacts) -> Iterator[Finding]:
    reach = need(cluster.reachability)
    by_iface: dict[tuple[str, str], list[ReachLink]] = defaultdict(list)
    for link in reach.final():
        by_iface[(link.target, link.iface)].append(link)
    statuses = {
        (s, t): status
        for s in reach.nodes
        for t in reach.nodes
        if (status := reach.pair_status(s, t)) not in (None, "not_tested")
    }
    # A NAT path connects (reach.nat); anything else that is not ok failed, twice.
    failed = {pair: status not in ("ok", "wrong_source") for pair, status in statuses.items()}
    unreached, cut_off = whole_nodes(failed)
    for target, froms in unreached.items():
        yield Finding(
            "reach.listener",
            Severity.FAIL,
            f"No node reached {target} over TCP on any interface (all {len(froms)} peers that "
            f"tried: {compact(froms)}): {target}'s listener never came up, or {target} drops "
            "the connections",
            nodes=(target,),
            evidence=tuple(line for s in froms for line in _attempts(reach, s, target)),
            fix=Fix(
                f"Look at {target}'s firewall (iptables/nftables) and that it can listen on "
                "arbitrary TCP ports; NCCL, Gloo and MPI need them.",
                (command("ssh {} 'sudo iptables -S; sudo nft list ruleset'", target),),
            ),
            data={"target": target, "cut_off": froms},
        )
    for source in cut_off:
        tos = [
            t for (s, t), broke in failed.items() if s == source and broke and t not in unreached
        ]
        if not tos:
            continue
        yield Finding(
            "reach.outbound",
            Severity.FAIL,
            f"{source} reached no peer over TCP on any interface (all {len(tos)} it tried: "
            f"{compact(tos)})",
            nodes=(source,),
            evidence=tuple(line for t in tos for line in _attempts(reach, source, t)),
            fix=Fix(
                f"Look at {source}'s routes and outgoing firewall rules.",
                (command("ssh {} 'ip route; sudo iptables -S OUTPUT'", source),),
            ),
            data={"source": source, "unreached": tos},
        )
    for (source, target), broke in failed.items():
        if not broke or target in unreached or source in cut_off:
            continue
        status = statuses[(source, target)]
        tried = reach.tried(source, target)
        yield Finding(
            "reach.none",
            Severity.FAIL,
            f"{source} cannot open TCP to {target} on any interface ({status})",
            nodes=(source, target),
            evidence=tuple(_attempts(reach, source, target)),
            fix=Fix(
                f"Open TCP between {source} and {target} (firewall, security group, routes); "
                "NCCL, Gloo and MPI need arbitrary ports both ways.",
                (over_ssh(source, "nc -vz -w2 {} 22", tried[0].address),),
            ),
            data={"source": source, "target": target, "status": status},
        )
    isolated: dict[tuple[str, str], list[str]] = defaultdict(list)
    for (target, iface), links in by_iface.items():
        good = [x.source for x in links if x.status == "ok"]
        bad = [x for x in links if x.status not in ("ok", "not_tested")]
        # Sources with no path at all to the target are reach.none already.
        partial = [x for x in bad if reach.pair_status(x.source, target) == "ok"]
        if target in unreached:
            continue
        nat = [x for x in links if x.status == "wrong_source"]
        if not good and bad and all(x.status == "wrong_host" for x in bad):
            isolated[(iface, links[0].address)].append(target)
        elif good and any(x.status != "wrong_source" for x in partial):
            blocked = compact(x.source for x in partial)
            yield Finding(
                "reach.partial",
                Severity.FAIL,
                f"{target}'s {iface} ({links[0].address}) is reachable from {compact(good)} "
                f"but not from {blocked}",
                nodes=(target, *(x.source for x in partial)),
                evidence=tuple(f"{x.source} → {target} {iface}: {x.status}" for x in partial),
                fix=Fix(
                    f"Find what blocks {blocked} from {target}'s {iface} "
                    "(firewall rule, route, VLAN), or exclude the interface.",
                    (command("export NCCL_SOCKET_IFNAME=^{}", iface),),
                ),
            )
        for x in nat:
            yield Finding(
                "reach.nat",
                Severity.WARN,
                f"{x.source} → {target} {iface}: the connection arrives from {x.seen_from}, not "
                "from the address it was sent from",
                nodes=(x.source, target),
                evidence=(x.message,),
                fix=Fix(
                    "A NAT or container network sits on this path; use an interface whose "
                    "address peers see directly (host networking for containers).",
                    commands("docker run --network host ..."),
                ),
            )
    for (iface, address), targets in isolated.items():
        yield Finding(
            "reach.iface_isolated",
            Severity.INFO,
            f"{iface} ({address}) on {compact(targets)} reaches no other node: each connection "
            "was answered by the sender itself",
            nodes=tuple(targets),
            evidence=tuple(
                f"{x.source} → {x.target} {iface}: {x.message}"
                for x in by_iface[(targets[0], iface)]
            ),
            fix=Fix(
                f"Keep {iface} out of NCCL, Gloo and MPI.",
                (command("export NCCL_SOCKET_IFNAME=^{},lo", iface),),
            ),
        )
    yield from not_run("reach.not_run", "reachability not tested", reach.not_run)


def _attempts(reach: Reachability, source: str, target: str) -> list[str]:
    """What each interface's connect got, the first time and, where it was tested again
    alone, the second ("confirmed" when that failed too)."""
    again = {x.iface: x for x in reach.retried if (x.source, x.target) == (source, target)}
    lines = []
    for x in reach.first_tried(source, target):
        line = f"{source} → {target} {x.iface} {x.address}:{reach.port}: {x.status}"
        line += f" ({x.message})" if x.message else ""
        second = again.get(x.iface)
        if second is not None:
            word = "confirmed alone" if second.status != "ok" else "alone"
            line += f"; {word}: {second.status}" + (
                f" ({second.message})" if second.message else ""
            )
        lines.append(line)
    return lines
