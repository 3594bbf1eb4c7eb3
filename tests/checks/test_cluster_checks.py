"""Cross-node checks on small hand-built facts: names, identity, clocks, slots, versions, reach."""

from __future__ import annotations

import dataclasses
from typing import Any

from checks.cluster import clock_skew, doctor_version, identity_unique, names_resolve, slots_gpus
from checks.system import node_reach
from doctor import __version__
from doctor.core.model import Missing, NodeFailure, Severity
from doctor.facts.cluster import ClusterFacts
from doctor.facts.network.peers import PeerFacts
from doctor.facts.node import NodeFacts
from doctor.facts.system import SystemFacts
from doctor.judge.runner import run_checks
from doctor.nodes.inventory import Node
from doctor.plugin import Skip
from tests import factkit as fk

ADDR = {"n1": "198.18.0.1", "n2": "198.18.0.2", "n3": "198.18.0.3"}


def node(
    name: str,
    *,
    hostname: str | None = None,
    boot_id: str | None = None,
    clock: float = 1000.0,
    asked: tuple[float, float] | None = None,
    resolved: dict[str, Any] | None = None,
    version: str | None = None,
    env: dict[str, str] | None = None,
    gpus: int = 0,
) -> NodeFacts:
    system = SystemFacts(
        hostname or name, "Debian", "6.1", "x86_64", "3.11.2", "/usr/bin/python3",
        boot_id or f"boot-{name}", 8, (0,), None, clock, asked,
    )  # fmt: skip
    if resolved is None:
        resolved = {n: (a,) for n, a in ADDR.items()}
    peers = PeerFacts(
        {k: v if isinstance(v, Missing) else tuple(v) for k, v in resolved.items()}, version
    )
    return fk.node(name, system=system, env=env or {}, pci=[fk.gpu()] * gpus, peers=peers)


def cluster(*nodes: NodeFacts, slots: dict[str, int] | None = None) -> ClusterFacts:
    inv = {
        n.node: Node(n.node, ADDR.get(n.node, n.node), slots=(slots or {}).get(n.node))
        for n in nodes
    }
    return ClusterFacts(nodes={n.node: n for n in nodes}, inventory=inv, master_addr="n1")


def codes(check, facts) -> list[tuple[str, tuple[str, ...]]]:
    return [(f.code, f.nodes) for f in check.fn(facts)]


def test_names_clean_loopback_unresolvable_inconsistent():
    ok = cluster(node("n1"), node("n2"), node("n3"))
    assert codes(names_resolve, ok) == []
    loop = cluster(
        node("n1", resolved={**{n: (a,) for n, a in ADDR.items()}, "n1": ("127.0.1.1",)}),
        node("n2"),
        node("n3"),
    )
    [f] = list(names_resolve.fn(loop))
    assert (f.code, f.nodes) == ("names.loopback", ("n1",))
    assert "echo '198.18.0.1 n1' | sudo tee -a /etc/hosts" in f.fix.commands  # type: ignore[union-attr]
    gone = Missing("n3: gaierror: [Errno -2] Name or service not known", "failed")
    missing = cluster(
        node("n1"),
        node("n2", resolved={"n1": ("198.18.0.1",), "n2": ("198.18.0.2",), "n3": gone}),
        node("n3"),
    )
    [f] = list(names_resolve.fn(missing))
    assert (f.code, f.nodes, f.summary) == ("names.unresolvable", ("n2",), "n2 cannot resolve n3")
    assert f.fix.commands == ("echo '198.18.0.3 n3' | sudo tee -a /etc/hosts",)  # type: ignore[union-attr]
    odd = cluster(
        node("n1"),
        node("n2"),
        node("n3", resolved={**{n: (a,) for n, a in ADDR.items()}, "n2": ("198.18.9.9",)}),
    )
    [f] = list(names_resolve.fn(odd))
    assert f.code == "names.inconsistent" and "n3: 198.18.9.9" in f.evidence


def test_names_own_loopback_with_gloo_and_tp_pinned_is_a_warning():
    own_loop = {**{n: (a,) for n, a in ADDR.items()}, "n2": ("127.0.1.1",)}
    pins = {"GLOO_SOCKET_IFNAME": "eth0", "TP_SOCKET_IFNAME": "eth0"}
    pinned = cluster(node("n1"), node("n2", resolved=own_loop, env=pins), node("n3"))
    [f] = list(names_resolve.fn(pinned))
    assert (f.code, f.severity, f.nodes) == ("names.loopback", Severity.WARN, ("n2",))
    half = cluster(
        node("n1"), node("n2", resolved=own_loop, env={"GLOO_SOCKET_IFNAME": "eth0"}), node("n3")
    )
    assert [f.severity for f in names_resolve.fn(half)] == [Severity.FAIL]
    # Another node's name (here the master's) to loopback: pinning does not help connects to it.
    peer_loop = {**{n: (a,) for n, a in ADDR.items()}, "n1": ("127.0.1.1",)}
    master = cluster(node("n1"), node("n2", resolved=peer_loop, env=pins), node("n3"))
    assert [f.severity for f in names_resolve.fn(master)] == [Severity.FAIL]


def test_names_master_addr_unresolvable_is_named_as_such():
    facts = dataclasses.replace(cluster(node("n1"), node("n2")), master_addr="head")
    facts.nodes["n2"].peers.resolved["head"] = Missing("head: not known")  # type: ignore[union-attr]
    [f] = list(names_resolve.fn(facts))
    assert f.summary == "n2 cannot resolve MASTER_ADDR head"


def test_names_skip_single_node():
    try:
        list(names_resolve.fn(cluster(node("n1"))))
    except Skip as skip:
        assert "one node" in skip.reason
    else:
        raise AssertionError("expected a skip")


def test_identity():
    assert codes(identity_unique, cluster(node("n1", boot_id="b"), node("n2", boot_id="b"))) == []
    same = cluster(node("n1", hostname="x", boot_id="b"), node("n2", hostname="x", boot_id="b"))
    assert codes(identity_unique, same) == [("identity.same_host", ("n1", "n2"))]
    dup = cluster(node("n1", hostname="x"), node("n2", hostname="x"), node("n3"))
    assert codes(identity_unique, dup) == [("identity.hostname_duplicate", ("n1", "n2"))]
    hostid = cluster(node("n1", env={"NCCL_HOSTID": "h"}), node("n2", env={"NCCL_HOSTID": "h"}))
    assert codes(identity_unique, hostid) == [("identity.nccl_hostid_shared", ("n1", "n2"))]


def test_clock_skew():
    assert codes(clock_skew, cluster(node("n1"), node("n2", clock=1003), node("n3"))) == []
    [f] = list(clock_skew.fn(cluster(node("n1"), node("n2", clock=1042.5), node("n3"))))
    assert f.code == "clock.skew" and f.nodes == ("n2",) and "42.5 s ahead" in f.summary


def test_probes_answered_seconds_apart_on_a_busy_controller_are_no_skew():
    # 64 nodes on one loaded machine: n3 was asked 30 s after n1, its clock read 30 s later.
    timed = [node(f"n{i}", clock=1000.0 + 15 * i, asked=(999.0 + 15 * i, 1002.0 + 15 * i))
             for i in range(1, 4)]  # fmt: skip
    assert codes(clock_skew, cluster(*timed)) == []
    # The same spread with n2's clock 42 s ahead of the controller's and the others'.
    timed[1] = node("n2", clock=1072.0, asked=(1029.0, 1032.0))
    [f] = list(clock_skew.fn(cluster(*timed)))
    assert f.nodes == ("n2",) and "40.5 s ahead" in f.summary


def test_slots_against_gpus():
    facts = cluster(
        node("n1", gpus=8),
        node("n2", gpus=4),
        node("n3", gpus=8),
        slots={"n1": 8, "n2": 8, "n3": 4},
    )
    assert codes(slots_gpus, facts) == [
        ("slots.exceed_gpus", ("n2",)),
        ("slots.unused_gpus", ("n3",)),
    ]


def test_doctor_version():
    facts = cluster(node("n1", version=__version__), node("n2", version="0.0.1"), node("n3"))
    [f] = list(doctor_version.fn(facts))
    assert (f.code, f.nodes) == ("doctor.version_differs", ("n2",))


def test_reach_failures_have_fixes_and_run_through_the_runner():
    facts = cluster(node("n1"))
    facts.failures["n2"] = NodeFailure("n2", "ssh.auth_failed", "root@198.18.0.2 refused every key")
    facts.failures["n3"] = NodeFailure("n3", "ssh.host_key_changed", "changed")
    facts.inventory["n2"] = Node("n2", "198.18.0.2", port=2222, user="root")
    facts.inventory["n3"] = Node("n3", "198.18.0.3")
    [outcome] = run_checks([node_reach], facts)
    by_code = {f.code: f for f in outcome.findings}
    assert by_code["ssh.auth_failed"].fix.commands == ("ssh-copy-id -p 2222 root@198.18.0.2",)  # type: ignore[union-attr]
    assert by_code["ssh.host_key_changed"].fix.commands == ("ssh-keygen -R 198.18.0.3",)  # type: ignore[union-attr]
