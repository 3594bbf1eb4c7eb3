"""TCP between nodes on each interface, judged as Horovod's interface test does."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from checks.stage import not_run
from doctor.facts.cluster import ClusterFacts
from doctor.facts.reach import ReachLink
from doctor.model import Finding, Fix, Severity
from doctor.nodeset import compact
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
    },
)
def reach_tcp(cluster: ClusterFacts) -> Iterator[Finding]:
    reach = need(cluster.reachability)
    by_iface: dict[tuple[str, str], list[ReachLink]] = defaultdict(list)
    for link in reach.links:
        by_iface[(link.target, link.iface)].append(link)
    for source in reach.nodes:
        for target in reach.nodes:
            status = reach.pair_status(source, target)
            if status in (None, "ok", "wrong_source"):  # a NAT path connects: reach.nat
                continue
            tried = [x for x in reach.links if x.source == source and x.target == target]
            yield Finding(
                "reach.none",
                Severity.FAIL,
                f"{source} cannot open TCP to {target} on any interface ({status})",
                nodes=(source, target),
                evidence=tuple(
                    f"{source} → {target} {x.iface} {x.address}:{reach.port}: {x.status}"
                    + (f" ({x.message})" if x.message else "")
                    for x in tried
                ),
                fix=Fix(
                    f"Open TCP between {source} and {target} (firewall, security group, routes); "
                    "NCCL, Gloo and MPI need arbitrary ports both ways.",
                    (f"ssh {source} 'nc -vz -w2 {tried[0].address} 22'",),
                ),
                data={"source": source, "target": target, "status": status},
            )
    isolated: dict[tuple[str, str], list[str]] = defaultdict(list)
    for (target, iface), links in by_iface.items():
        good = [x.source for x in links if x.status == "ok"]
        bad = [x for x in links if x.status not in ("ok", "not_tested")]
        # Sources with no path at all to the target are reach.none already.
        partial = [x for x in bad if reach.pair_status(x.source, target) == "ok"]
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
                    (f"export NCCL_SOCKET_IFNAME=^{iface}",),
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
                    ("docker run --network host ...",),
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
                (f"export NCCL_SOCKET_IFNAME=^{iface},lo",),
            ),
        )
    yield from not_run("reach.not_run", "reachability not tested", reach.not_run)
