"""Every node resolves every node's name and MASTER_ADDR alike, and never to loopback."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from doctor.core.model import Finding, Fix, Missing, Severity
from doctor.core.nodeset import compact
from doctor.core.shell import command
from doctor.facts.cluster import ClusterFacts
from doctor.facts.network.peers import PeerFacts
from doctor.plugin import Skip, cluster_check

PINS = ("GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME")


def _is_loopback(addr: str) -> bool:
    return addr.startswith("127.") or addr == "::1"


def _peers(cluster: ClusterFacts) -> dict[str, PeerFacts]:
    out = {n: f.peers for n, f in cluster.nodes.items() if not isinstance(f.peers, Missing)}
    if not out:
        raise Skip("no node reported name resolution")
    return out


def _hostname(cluster: ClusterFacts, node: str) -> str:
    system = cluster.nodes[node].system
    return node if isinstance(system, Missing) else system.hostname


def _real_address(cluster: ClusterFacts, name: str, peers: dict[str, PeerFacts]) -> str:
    """What most nodes resolve ``name`` to (loopback aside), else the inventory's address."""
    votes: dict[str, int] = defaultdict(int)
    for facts in peers.values():
        addrs = facts.resolved.get(name)
        if isinstance(addrs, tuple):
            for addr in addrs:
                if not _is_loopback(addr):
                    votes[addr] += 1
    if votes:
        return max(votes, key=lambda a: votes[a])
    node = cluster.inventory.get(name)
    return (node.address if node and node.address else None) or "<its address>"


@cluster_check(
    "names.resolve",
    "Every node resolves every node's name and MASTER_ADDR to the same routable address",
    codes={
        "names.loopback": "a node's name resolves to a loopback address (127.0.1.1): peers can't "
        "connect to what Gloo/torch.distributed bind",
        "names.unresolvable": "a node cannot resolve another node's name or MASTER_ADDR",
        "names.inconsistent": "nodes resolve the same name to different addresses",
    },
)
def names_resolve(cluster: ClusterFacts) -> Iterator[Finding]:
    if len(cluster.names) < 2:
        raise Skip("one node: nothing to resolve across nodes")
    peers = _peers(cluster)
    names = list(cluster.inventory) or list(cluster.nodes)
    if cluster.master_addr and cluster.master_addr not in names:
        names.append(cluster.master_addr)
    unresolved: dict[str, list[str]] = defaultdict(list)
    answers: dict[str, dict[tuple[str, ...], list[str]]] = defaultdict(lambda: defaultdict(list))
    for source, facts in peers.items():
        own = _hostname(cluster, source)
        for name in [*names, own] if own not in names else names:
            addrs = facts.resolved.get(name)
            if addrs is None:
                continue  # not asked on this node (its own hostname is asked only there)
            if isinstance(addrs, Missing):
                unresolved[name].append(source)
            elif any(_is_loopback(a) for a in addrs):
                yield _loopback(cluster, source, name, addrs, own, peers)
            else:
                answers[name][addrs].append(source)
    for name, sources in unresolved.items():
        addr = _real_address(cluster, name, peers)
        what = "MASTER_ADDR " + name if name == cluster.master_addr else name
        yield Finding(
            "names.unresolvable",
            Severity.FAIL,
            f"{compact(sources)} cannot resolve {what}",
            nodes=tuple(sources),
            evidence=tuple(
                f"{s}: {r.reason}"
                for s in sources
                if isinstance(r := peers[s].resolved[name], Missing)
            ),
            fix=Fix(
                f"Add {name} to DNS, or to /etc/hosts on {compact(sources)}.",
                (command("echo {} | sudo tee -a /etc/hosts", f"{addr} {name}"),),
            ),
            data={"name": name},
        )
    for name, groups in answers.items():
        if len(groups) < 2:
            continue
        yield Finding(
            "names.inconsistent",
            Severity.WARN,
            f"{name} resolves to different addresses on different nodes",
            nodes=tuple(sorted(s for srcs in groups.values() for s in srcs)),
            evidence=tuple(f"{compact(srcs)}: {', '.join(a)}" for a, srcs in groups.items()),
            fix=Fix(
                "Make DNS and every /etc/hosts agree (a stale /etc/hosts line is the usual cause).",
                (command("getent hosts {}  # on each node", name),),
            ),
            data={"name": name},
        )


def _loopback(
    cluster: ClusterFacts,
    source: str,
    name: str,
    addrs: tuple[str, ...],
    own: str,
    peers: dict[str, PeerFacts],
) -> Finding:
    real = _real_address(cluster, name, peers)
    loop = next(a for a in addrs if _is_loopback(a))
    whose = "its own name" if name in (own, source) else "the name"
    # Gloo and TensorPipe look their own hostname up only when no interface is named: with
    # both named on the node, its own name is no longer what they listen on (a peer's name or
    # MASTER_ADDR resolving to loopback still sends connects to the node itself).
    env = cluster.nodes[source].env
    pinned = name in (own, source) and isinstance(env, dict) and all(env.get(v) for v in PINS)
    severity, harm = (
        Severity.FAIL,
        "Gloo/torch.distributed would listen there and other nodes cannot connect",
    )
    if pinned:
        severity = Severity.WARN
        harm = (
            f"{' and '.join(PINS)} are set there, so Gloo and TensorPipe do not use it; "
            "other programs that look the name up still get loopback"
        )
    return Finding(
        "names.loopback",
        severity,
        f"{source} resolves {whose} {name} to {loop}: {harm}",
        nodes=(source,),
        evidence=(f"{source}: getaddrinfo({name}) = {', '.join(addrs)}",),
        fix=Fix(
            f"On {source}, map {name} to its real address in /etc/hosts (or pin the interface).",
            (
                command("sudo sed -i {} /etc/hosts", f"/^{loop.replace('.', '[.]')}[[:space:]]/d"),
                command("echo {} | sudo tee -a /etc/hosts", f"{real} {name}"),
                command("export GLOO_SOCKET_IFNAME=<data NIC>  # or pin the interface instead"),
            ),
        ),
        data={"name": name, "addresses": list(addrs)},
    )
