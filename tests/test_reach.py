"""Judging reachability from the agents' answers (dicts in reach_agent.py's own output format)."""

from __future__ import annotations

import socket
import sys
import threading
import time

from checks.cluster import reach_tcp
from doctor.facts.cluster import ClusterFacts
from doctor.facts.network.reach import Reachability, ReachLink, done_event, judge
from doctor.nodes.inventory import Node
from doctor.nodes.transport.launch import LocalLauncher, Process
from doctor.stages import reach_agent
from doctor.stages.agents import Go, run_agents
from doctor.stages.pairs import Sampling, choose
from doctor.stages.reach import ALL_PAIRS_UP_TO, READY_WITHIN, agent_source, reach_specs

IFACES = {"a": {"eth0": "198.18.0.1"}, "b": {"eth0": "198.18.0.2"}}


def connect(node, address, status="ok", local="198.18.0.1", **kw):
    return {
        "node": node,
        "iface": "eth0",
        "address": address,
        "status": status,
        "local": local,
        **kw,
    }


def accepted(source, target, address, peer):
    return {"local": address, "peer": peer, "token": f"{source} {target} {address}"}


def outputs(a_connects, b_accepted, b_listen="ok"):
    return {
        "a": {"listen": {"198.18.0.1": "ok"}, "accepted": [], "connects": a_connects},
        "b": {"listen": {"198.18.0.2": b_listen}, "accepted": b_accepted, "connects": []},
    }


def test_confirmed_connection_is_ok():
    [link] = judge(
        outputs([connect("b", "198.18.0.2")], [accepted("a", "b", "198.18.0.2", "198.18.0.1")]),
        IFACES,
    )
    assert (link.status, link.seen_from) == ("ok", "198.18.0.1")


def test_nat_changes_the_source_address():
    [link] = judge(
        outputs([connect("b", "198.18.0.2")], [accepted("a", "b", "198.18.0.2", "172.17.0.1")]),
        IFACES,
    )
    assert link.status == "wrong_source" and "arrived from 172.17.0.1" in link.message


def test_connection_answered_by_the_sender_itself():
    docs = outputs([connect("b", "172.17.0.1", local="172.17.0.1")], [])
    docs["a"]["accepted"] = [accepted("a", "b", "172.17.0.1", "172.17.0.1")]
    [link] = judge(docs, IFACES)
    assert link.status == "wrong_host" and "answered by a" in link.message


def test_failures_and_untestable_listeners():
    [link] = judge(outputs([connect("b", "198.18.0.2", "timeout")], []), IFACES)
    assert link.status == "timeout"
    [link] = judge(
        outputs([connect("b", "198.18.0.2", "refused")], [], b_listen="EADDRINUSE: Address in use"),
        IFACES,
    )
    assert link.status == "not_tested" and "EADDRINUSE" in link.message


def test_garbage_agent_output():
    assert done_event("Traceback") is None
    assert done_event("[]") is None
    assert done_event('{"ev": "ready"}\n{"ev": "done", "connects": 3}') is None


def test_peer_selection_all_pairs_then_ring_plus_random():
    small = [f"n{i}" for i in range(5)]
    assert choose(small, Sampling.auto, ALL_PAIRS_UP_TO, 0).peers["n0"] == ("n1", "n2", "n3", "n4")
    big = [f"n{i:02d}" for i in range(40)]
    coverage = choose(big, Sampling.auto, ALL_PAIRS_UP_TO, 0)
    peers = coverage.peers
    assert all(len(p) == 5 for p in peers.values())
    assert {"n01", "n39"} <= set(peers["n00"])
    specs = reach_specs({n: {"eth0": f"10.0.0.{i}"} for i, n in enumerate(big)}, coverage, 4000)
    # Every node expects exactly the connections the others will make to it.
    sent = sum(len(s["targets"]) for s in specs.values())
    assert sent == sum(s["expect"] for s in specs.values())


def test_check_reports_nat_and_none():
    links = judge(
        outputs([connect("b", "198.18.0.2")], [accepted("a", "b", "198.18.0.2", "10.9.9.9")]),
        IFACES,
    )
    reach = Reachability(("a", "b"), IFACES, tuple(links), 4000)
    found = [(f.code, f.nodes) for f in reach_tcp.fn(ClusterFacts(nodes={}, reachability=reach))]
    assert found == [("reach.nat", ("a", "b"))]  # it connects: reported as NAT, not as none


def test_a_node_whose_agent_did_not_run_is_not_tested_rather_than_refused():
    docs = outputs([connect("b", "198.18.0.2", "refused")], [])
    del docs["b"]  # b's agent failed: nobody listened there
    [link] = judge(docs, IFACES)
    assert link.status == "not_tested" and "did not run on b" in link.message


def test_proven_lists_only_tested_nodes_and_fully_reached_interfaces():
    ifaces = {"a": {"eth0": "198.18.0.1"}, "b": {"eth0": "198.18.0.2", "ens6": "10.99.0.2"}}
    docs = outputs(
        [
            connect("b", "198.18.0.2"),
            {**connect("b", "10.99.0.2", "timeout"), "iface": "ens6"},
        ],
        [accepted("a", "b", "198.18.0.2", "198.18.0.1")],
    )
    reach = Reachability(("a", "b"), ifaces, tuple(judge(docs, ifaces)), 4000)
    # a was never a target (b tried nobody): nothing is known about a's interfaces.
    assert reach.proven() == {"b": {"eth0"}}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LateLauncher(LocalLauncher):
    """Starts one node's agent seconds after the others: the start skew of a large cluster."""

    def __init__(self, late: str, seconds: float) -> None:
        self.late, self.seconds = late, seconds

    def start(self, node: Node, argv: list[str], stdin: bytes) -> Process | str:
        if node.name == self.late:
            time.sleep(self.seconds)
        return super().start(node, argv, stdin)


def loopback_specs(port: int, wrong_port_for: str | None = None) -> dict[str, dict]:
    """Two "nodes" on this machine, on their own loopback addresses, testing each other."""
    ifaces = {"a": {"lo": "127.0.0.2"}, "b": {"lo": "127.0.0.3"}}
    coverage = choose(["a", "b"], Sampling.full, 2, 0)
    specs = reach_specs(ifaces, coverage, port)
    if wrong_port_for:  # its peer connects where nothing listens: a real refusal
        for target in specs[wrong_port_for]["targets"]:
            target["address"] = "127.0.0.9"
    return specs


def run_loopback(specs: dict[str, dict], launcher: LocalLauncher) -> dict[str, dict]:
    agents = run_agents(
        launcher,
        [Node("a"), Node("b")],
        agent_source(),
        "reach-agent",
        lambda n: {**specs[n.name], "barrier": True, "ready_within": READY_WITHIN},
        Go(),
        python=sys.executable,
        deadline=30,
        workers=32,
    )
    done = {n: next(e for e in a.events if e["ev"] == "done") for n, a in agents.items()}
    return done


def test_no_connect_is_judged_before_its_target_listens() -> None:
    # b's agent starts 3 s after a's: without the barrier a's connect would be refused.
    port = free_port()
    done = run_loopback(loopback_specs(port), LateLauncher("b", 3.0))
    links = judge(done, {"a": {"lo": "127.0.0.2"}, "b": {"lo": "127.0.0.3"}})
    assert [(x.source, x.target, x.status) for x in links] == [("a", "b", "ok"), ("b", "a", "ok")]


def test_a_real_refusal_is_reported_at_once() -> None:
    started = time.monotonic()
    done = run_loopback(loopback_specs(free_port(), wrong_port_for="a"), LocalLauncher())
    [connect] = done["a"]["connects"]
    assert connect["status"] == "refused" and connect["address"] == "127.0.0.9"
    assert time.monotonic() - started < 10  # no retrying behind a barrier


class LateSender:
    """The barrier's own conductor, and a peer that connects to a's listener 3 s after a has
    finished its own connects (a loaded node that got its ``go`` late)."""

    def __init__(self, address: str, port: int) -> None:
        self.go = Go()
        self.address, self.port = address, port

    def begin(self, ready: list[str]) -> dict[str, list[str]]:
        return self.go.begin(ready)

    def heard(self, node: str, event: dict) -> dict[str, list[str]]:
        if event.get("ev") == "connected":  # b, still sending: the controller waits for it
            time.sleep(3.0)
            with socket.create_connection((self.address, self.port), timeout=2) as sock:
                sock.sendall(f"b a {self.address}\n".encode())
        return self.go.heard(node, event)


def test_a_late_sender_still_finds_the_listener_up() -> None:
    # a has nobody to connect to and expects one connection; it must keep listening until it
    # arrives (or the controller says stop), not give up after a quiet spell.
    port = free_port()
    spec = {
        "source": "a",
        "port": port,
        "listen": ["127.0.0.2"],
        "targets": [],
        "expect": 1,
        "connect_timeout": 2.0,
        "deadline": 10.0,
        "barrier": True,
        "ready_within": READY_WITHIN,
    }
    agents = run_agents(
        LocalLauncher(),
        [Node("a")],
        agent_source(),
        "reach-agent",
        lambda n: spec,
        LateSender("127.0.0.2", port),
        python=sys.executable,
        deadline=30,
        workers=32,
    )
    done = next(e for e in agents["a"].events if e["ev"] == "done")
    assert [x["token"] for x in done["accepted"]] == ["b a 127.0.0.2"]


def test_connections_queued_when_told_to_stop_are_still_taken() -> None:
    # The sender's connect completed (the kernel queued it) before the word to stop: closing
    # without accepting it would fail a healthy pair as "never arrived".
    listener = socket.socket()
    listener.bind(("127.0.0.2", 0))
    listener.listen(8)
    listener.setblocking(False)
    with socket.create_connection(listener.getsockname(), timeout=2) as sock:
        sock.sendall(b"b a 127.0.0.2\n")
    connects_done, stop = threading.Event(), threading.Event()
    connects_done.set()
    stop.set()
    out: dict = {"accepted": []}
    spec = {"source": "a", "expect": 5, "deadline": 5.0, "barrier": True}
    reach_agent.listen(spec, [listener], out, connects_done, [0.0], stop)
    assert [x["token"] for x in out["accepted"]] == ["b a 127.0.0.2"]


def _reach_of(statuses: dict[tuple[str, str], str], retried: dict[tuple[str, str], str]):
    names = tuple(sorted({n for pair in statuses for n in pair}))
    ifaces = {n: {"eth0": f"10.0.0.{i}"} for i, n in enumerate(names, 1)}

    def link(pair: tuple[str, str], status: str) -> ReachLink:
        return ReachLink(*pair, "eth0", ifaces[pair[1]]["eth0"], status, message="")

    return Reachability(
        names,
        ifaces,
        tuple(link(p, s) for p, s in statuses.items()),
        4000,
        retried=tuple(link(p, s) for p, s in retried.items()),
    )


def _found(reach: Reachability) -> list[tuple[str, tuple[str, ...]]]:
    cluster = ClusterFacts(nodes={}, reachability=reach)
    return [(f.code, f.nodes) for f in reach_tcp.fn(cluster)]


def test_a_failure_that_passes_alone_is_not_reported_and_a_repeated_one_is_confirmed() -> None:
    names = ["n1", "n2", "n3"]
    statuses = {(s, t): "ok" for s in names for t in names if s != t}
    reach = _reach_of(
        {**statuses, ("n1", "n2"): "timeout", ("n2", "n3"): "refused"},
        {("n1", "n2"): "ok", ("n2", "n3"): "refused"},
    )
    assert reach.pair_status("n1", "n2") == "ok"
    assert _found(reach) == [("reach.none", ("n2", "n3"))]
    [finding] = reach_tcp.fn(ClusterFacts(nodes={}, reachability=reach))
    assert "confirmed alone: refused" in finding.evidence[0]


def test_a_node_no_peer_reaches_is_one_finding_on_that_node() -> None:
    # Sampled: n4 is tested by four peers, each failed twice; everything else works.
    names = ["n1", "n2", "n3", "n4", "n5"]
    statuses = {(s, t): "ok" for s in names for t in names if s != t}
    into = {(s, "n4"): "timeout" for s in names if s != "n4"}
    reach = _reach_of({**statuses, **into}, into)
    assert _found(reach) == [("reach.listener", ("n4",))]
    # Two of its four peers failing is two broken pairs, not a broken node.
    few = {(s, "n4"): "timeout" for s in ("n1", "n2")}
    assert sorted(_found(_reach_of({**statuses, **few}, few))) == [
        ("reach.none", ("n1", "n4")),
        ("reach.none", ("n2", "n4")),
    ]
    out = {("n4", t): "unreachable" for t in names if t != "n4"}
    assert _found(_reach_of({**statuses, **out}, out)) == [("reach.outbound", ("n4",))]
