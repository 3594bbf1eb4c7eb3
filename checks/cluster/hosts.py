"""The nodes as hosts: distinct to NCCL, clocks that agree, slots that fit, one doctor version."""

from __future__ import annotations

import statistics
from collections.abc import Iterator

from doctor import __version__
from doctor.core.model import Finding, Fix, Missing, Severity
from doctor.core.nodeset import compact, group_nodes
from doctor.core.shell import command, commands
from doctor.facts.cluster import ClusterFacts
from doctor.plugin import Skip, cluster_check

CLOCK_SKEW_WARN = 5.0  # seconds beyond what the probes' timing leaves uncertain


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
    key_of: dict[str, tuple[str, str]] = {}
    hostid: dict[str, str] = {}
    for name, facts in cluster.nodes.items():
        if isinstance(facts.system, Missing) or isinstance(facts.system.boot_id, Missing):
            continue
        key_of[name] = (facts.system.hostname, facts.system.boot_id)
        if isinstance(facts.env, dict) and facts.env.get("NCCL_HOSTID"):
            hostid[name] = facts.env["NCCL_HOSTID"]
    if len(key_of) < 2:
        raise Skip("fewer than two nodes with hostname and boot_id")
    by_key = group_nodes(key_of)
    # One entry per machine: the same machine listed twice is reported once, above.
    by_host = group_nodes({names[0]: hostname for (hostname, _), names in by_key.items()})
    for (hostname, boot_id), names in by_key.items():
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
                    commands("sudo hostnamectl set-hostname <unique-name>"),
                ),
            )
    for shared, names in group_nodes(hostid).items():
        if len({key_of[n] for n in names}) > 1:
            yield Finding(
                "identity.nccl_hostid_shared",
                Severity.FAIL,
                f"{compact(names)} share NCCL_HOSTID={shared}",
                nodes=tuple(names),
                evidence=(f"NCCL_HOSTID={shared} on {compact(names)}",),
                fix=Fix(
                    "Unset NCCL_HOSTID, or give each machine its own value.",
                    commands("unset NCCL_HOSTID"),
                ),
            )


@cluster_check(
    "clock.skew",
    "Node clocks agree",
    codes={"clock.skew": "a node's clock is off by more than 5 s from the others"},
)
def clock_skew(cluster: ClusterFacts) -> Iterator[Finding]:
    systems = {
        n: f.system
        for n, f in cluster.nodes.items()
        if not isinstance(f.system, Missing) and f.system.clock > 0
    }
    if len(systems) < 2:
        raise Skip("fewer than two node clocks")
    # Each node's clock minus the controller's lies between its reading minus when the answer
    # arrived and its reading minus when it was asked: on a loaded machine the probes of one run
    # start many seconds apart, and that spread is no skew. Saved captures (no times) compare
    # the bare readings.
    timed = all(s.asked for s in systems.values())
    span = {
        n: (s.clock - s.asked[1], s.clock - s.asked[0]) if timed and s.asked else (s.clock, s.clock)
        for n, s in systems.items()
    }
    median = statistics.median((lo + hi) / 2 for lo, hi in span.values())
    for name, (lo, hi) in span.items():
        off = lo - median if lo > median else hi - median if hi < median else 0.0
        if abs(off) > CLOCK_SKEW_WARN:
            clock = systems[name].clock
            seen = f"{lo:+.1f} to {hi:+.1f} s from the controller's" if timed else f"{clock:.1f}"
            yield Finding(
                "clock.skew",
                Severity.WARN,
                f"{name}'s clock is {abs(off):.1f} s {'ahead of' if off > 0 else 'behind'} the "
                "others: logs will not line up and TLS/Kerberos tokens may be refused",
                nodes=(name,),
                evidence=(f"{name}: {seen}, median of all nodes {median:+.1f}",),
                fix=Fix(
                    "Run time synchronisation on every node.",
                    commands("timedatectl status", "sudo systemctl enable --now chrony"),
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
                    (command("{} slots={}", name, gpus),) if gpus else (),
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
    installed = {
        name: facts.peers.doctor_version
        for name, facts in cluster.nodes.items()
        if not isinstance(facts.peers, Missing) and isinstance(facts.peers.doctor_version, str)
    }
    if not installed:
        raise Skip("no node has cluster-doctor installed (the probe is always the controller's)")
    others = {name: v for name, v in installed.items() if v != __version__}
    for version, names in group_nodes(others).items():
        yield Finding(
            "doctor.version_differs",
            Severity.WARN,
            f"{compact(names)} have cluster-doctor {version}; this controller runs {__version__}",
            nodes=tuple(names),
            evidence=(f"importlib.metadata.version('cluster-doctor') = {version}",),
            fix=Fix(
                "Install the same version everywhere (the probe run is always the controller's).",
                (command("pip install cluster-doctor=={}", __version__),),
            ),
        )
