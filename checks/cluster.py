"""Cross-node checks: names resolve alike, hosts are distinct, clocks agree, slots fit GPUs."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterator

from doctor import __version__
from doctor.facts.cluster import ClusterFacts
from doctor.facts.peers import PeerFacts
from doctor.facts.reach import ReachLink
from doctor.model import Finding, Fix, Missing, Severity
from doctor.nodeset import compact
from doctor.plugin import Skip, cluster_check, need

CLOCK_SKEW_WARN = 5.0  # seconds; the probes start within a second or so of each other


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
                (f"echo '{addr} {name}' | sudo tee -a /etc/hosts",),
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
                (f"getent hosts {name}  # on each node",),
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
    return Finding(
        "names.loopback",
        Severity.FAIL,
        f"{source} resolves {whose} {name} to {loop}: Gloo/torch.distributed would listen "
        "there and other nodes cannot connect",
        nodes=(source,),
        evidence=(f"{source}: getaddrinfo({name}) = {', '.join(addrs)}",),
        fix=Fix(
            f"On {source}, map {name} to its real address in /etc/hosts (or pin the interface).",
            (
                f"sudo sed -i '/^{loop.replace('.', '[.]')}[[:space:]]/d' /etc/hosts",
                f"echo '{real} {name}' | sudo tee -a /etc/hosts",
                "export GLOO_SOCKET_IFNAME=<data NIC>  # or pin the interface instead",
            ),
        ),
        data={"name": name, "addresses": list(addrs)},
    )


@cluster_check(
    "identity.unique",
    "Every node is a distinct host to NCCL (hostname + boot_id, or NCCL_HOSTID)",
    codes={
        "identity.same_host": "two entries report the same hostname and boot_id: the same machine "
        "listed twice, or NCCL's host hash collides",
        "identity.hostname_duplicate": "different machines report the same hostname",
        "identity.nccl_hostid_shared": "different machines share NCCL_HOSTID: NCCL treats them as "
        "one host and tries shared memory between them",
    },
)
def identity_unique(cluster: ClusterFacts) -> Iterator[Finding]:
    # NCCL's host hash is NCCL_HOSTID when set, else hostname + boot_id (getHostHash in
    # NCCL's utils.cc): nodes with equal hashes are treated as one host.
    by_key: dict[tuple[str, str], list[str]] = defaultdict(list)
    by_hostid: dict[str, list[str]] = defaultdict(list)
    key_of: dict[str, tuple[str, str]] = {}
    for name, facts in cluster.nodes.items():
        if isinstance(facts.system, Missing) or isinstance(facts.system.boot_id, Missing):
            continue
        key = key_of[name] = (facts.system.hostname, facts.system.boot_id)
        by_key[key].append(name)
        if isinstance(facts.env, dict) and facts.env.get("NCCL_HOSTID"):
            by_hostid[facts.env["NCCL_HOSTID"]].append(name)
    if len(key_of) < 2:
        raise Skip("fewer than two nodes with hostname and boot_id")
    by_host: dict[str, list[str]] = defaultdict(list)
    for (hostname, boot_id), names in by_key.items():
        by_host[hostname].append(names[0])
        if len(names) > 1:
            yield Finding(
                "identity.same_host",
                Severity.FAIL,
                f"{', '.join(names)} report the same hostname and boot_id: one machine listed "
                "twice, or NCCL will take them for one host",
                nodes=tuple(names),
                evidence=(f"{', '.join(names)}: hostname {hostname}, boot_id {boot_id}",),
                fix=Fix(
                    "List each machine once (aliases and addresses count), or give each "
                    "its own hostname."
                ),
            )
    for hostname, names in by_host.items():
        if len(names) > 1:
            yield Finding(
                "identity.hostname_duplicate",
                Severity.WARN,
                f"{compact(names)} all call themselves {hostname!r}: launchers that group ranks "
                "by hostname will mix them up",
                nodes=tuple(names),
                evidence=tuple(f"{n}: hostname {hostname}, boot_id {key_of[n][1]}" for n in names),
                fix=Fix(
                    "Give every node its own hostname (cloned images keep the template's).",
                    ("sudo hostnamectl set-hostname <unique-name>",),
                ),
            )
    for hostid, names in by_hostid.items():
        if len({key_of[n] for n in names}) > 1:
            yield Finding(
                "identity.nccl_hostid_shared",
                Severity.FAIL,
                f"{compact(names)} share NCCL_HOSTID={hostid}",
                nodes=tuple(names),
                evidence=(f"NCCL_HOSTID={hostid} on {compact(names)}",),
                fix=Fix(
                    "Unset NCCL_HOSTID, or give each machine its own value.", ("unset NCCL_HOSTID",)
                ),
            )


@cluster_check(
    "clock.skew",
    "Node clocks agree",
    codes={"clock.skew": "a node's clock is off by more than 5 s from the others"},
)
def clock_skew(cluster: ClusterFacts) -> Iterator[Finding]:
    clocks = {
        n: f.system.clock
        for n, f in cluster.nodes.items()
        if not isinstance(f.system, Missing) and f.system.clock > 0
    }
    if len(clocks) < 2:
        raise Skip("fewer than two node clocks")
    median = statistics.median(clocks.values())
    for name, clock in clocks.items():
        off = clock - median
        if abs(off) > CLOCK_SKEW_WARN:
            yield Finding(
                "clock.skew",
                Severity.WARN,
                f"{name}'s clock is {abs(off):.1f} s {'ahead of' if off > 0 else 'behind'} the "
                "others: logs will not line up and TLS/Kerberos tokens may be refused",
                nodes=(name,),
                evidence=(f"{name}: {clock:.1f}, median of all nodes {median:.1f}",),
                fix=Fix(
                    "Run time synchronisation on every node.",
                    ("timedatectl status", "sudo systemctl enable --now chrony"),
                ),
                data={"offset": round(off, 3)},
            )


@cluster_check(
    "slots.gpus",
    "Each node's slots (ranks) fit its GPUs",
    codes={
        "slots.exceed_gpus": "more ranks than GPUs on a node: ranks would share a GPU",
        "slots.unused_gpus": "fewer ranks than GPUs on a node: some GPUs stay idle",
    },
)
def slots_gpus(cluster: ClusterFacts) -> Iterator[Finding]:
    checked = False
    for name, node in cluster.inventory.items():
        facts = cluster.nodes.get(name)
        if node.slots is None or facts is None or isinstance(facts.pci, Missing):
            continue
        checked = True
        gpus = sum(1 for d in facts.pci if d.is_nvidia_gpu)
        if node.slots > gpus:
            yield Finding(
                "slots.exceed_gpus",
                Severity.FAIL,
                f"{name} has {node.slots} slots but {gpus} NVIDIA GPU{'s' if gpus != 1 else ''}",
                nodes=(name,),
                evidence=(f"inventory: {name} slots={node.slots}", f"PCI: {gpus} NVIDIA GPUs"),
                fix=Fix(
                    f"Give {name} at most {gpus} slots in the hostfile.",
                    (f"{name} slots={gpus}",) if gpus else (),
                ),
                data={"slots": node.slots, "gpus": gpus},
            )
        elif node.slots < gpus:
            yield Finding(
                "slots.unused_gpus",
                Severity.INFO,
                f"{name} has {gpus} GPUs but only {node.slots} slots",
                nodes=(name,),
                evidence=(f"inventory: {name} slots={node.slots}", f"PCI: {gpus} NVIDIA GPUs"),
                fix=Fix(f"Use slots={gpus} for {name} if every GPU should train."),
                data={"slots": node.slots, "gpus": gpus},
            )
    if not checked:
        raise Skip("no slots given in the inventory")


@cluster_check(
    "doctor.version",
    "The cluster-doctor installed on nodes matches the controller's",
    codes={"doctor.version_differs": "a node has another cluster-doctor version installed"},
)
def doctor_version(cluster: ClusterFacts) -> Iterator[Finding]:
    versions: dict[str, list[str]] = defaultdict(list)
    for name, facts in cluster.nodes.items():
        if isinstance(facts.peers, Missing):
            continue
        version = facts.peers.doctor_version
        if isinstance(version, str) and version != __version__:
            versions[version].append(name)
    for version, names in versions.items():
        yield Finding(
            "doctor.version_differs",
            Severity.WARN,
            f"{compact(names)} have cluster-doctor {version}; this controller runs {__version__}",
            nodes=tuple(names),
            evidence=(f"importlib.metadata.version('cluster-doctor') = {version}",),
            fix=Fix(
                "Install the same version everywhere (the probe run is always the controller's).",
                (f"pip install cluster-doctor=={__version__}",),
            ),
        )


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
    for name, reason in reach.not_run.items():
        yield Finding(
            "reach.not_run",
            Severity.WARN,
            f"reachability not tested from {name}: {reason}",
            nodes=(name,),
        )


CHECKS = [names_resolve, identity_unique, clock_skew, slots_gpus, doctor_version, reach_tcp]
