"""The reachability stage: short TCP connects between nodes on every candidate interface.

All pairs up to ALL_PAIRS_UP_TO nodes, a fixed fan-in sample beyond (doctor/stages/pairs.py).
A TCP connect costs a node almost nothing, so the threshold is set by what a 2-core test bed
running every node shares: 32 nodes is 992 ordered pairs, done in a few seconds there.

A pair that failed is tested again after the stage, from new agents on a new port, one target
node at a time (that node and the peers that failed to reach it, nothing else running): only a
second failure is reported (``Reachability.retried`` holds the second attempts).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from importlib.resources import files
from typing import Any

from doctor.core.model import Missing
from doctor.facts.coverage import Coverage
from doctor.facts.network.reach import FAILED, Reachability, ReachLink, done_event, judge
from doctor.facts.node import NodeFacts
from doctor.nic.plan import reach_address
from doctor.nodes.inventory import Node
from doctor.nodes.transport import BatchTransport, ExecResult, Transport
from doctor.nodes.transport.launchers import launcher_for
from doctor.stages.agents import STARTING, Go, run_agents
from doctor.stages.collect import probe_argv
from doctor.stages.pairs import Sampling, choose

ALL_PAIRS_UP_TO = 32
# Three SYNs (Linux sends them at 0, 1 and 3 s) before a pair is called a timeout: one lost
# SYN or a slow ARP resolution on a busy fabric is not a broken link. A blackholed peer costs it
# once (every connect runs at the same time).
CONNECT_TIMEOUT = 5.0
DEADLINE = 10.0  # seconds an agent listens and connects once it may go
READY_WITHIN = 20.0  # seconds each agent gets, from its start, to have its listeners up
# One srun step starts every agent at once, with no controller in between to say go: a refused
# connect is retried this long after the agent started (srun's start skew is well under it).
RETRY_REFUSED = 10.0
BARRIER = "ready barrier: every listener was up before any node connected"
RETRIED = f"one srun step: refused connects retried for {RETRY_REFUSED:g}s after the start"


def candidates(probed: Mapping[str, NodeFacts]) -> dict[str, dict[str, str]]:
    """Per node, each routable interface (the NIC facts' own rule) and the address it is tested
    on (its first IPv4, else its first global IPv6)."""
    out: dict[str, dict[str, str]] = {}
    for name, facts in probed.items():
        if isinstance(facts.net, Missing):
            continue
        out[name] = {
            iface.name: address
            for iface in facts.net.interfaces.values()
            if (address := reach_address(iface)) is not None
        }
    return out


def reach_specs(
    ifaces: dict[str, dict[str, str]], coverage: Coverage, port: int
) -> dict[str, dict[str, Any]]:
    """Per node: what to listen on, which peers' interfaces to connect to, what to expect."""
    specs = {}
    for name in ifaces:
        targets = [
            {"node": p, "iface": i, "address": a}
            for p in coverage.peers[name]
            for i, a in ifaces[p].items()
        ]
        expect = sum(len(ifaces[name]) for p in ifaces if coverage.tests(p, name))
        specs[name] = {
            "source": name,
            "port": port,
            "listen": sorted(set(ifaces[name].values())),
            "targets": targets,
            "expect": expect,
            "connect_timeout": CONNECT_TIMEOUT,
            "deadline": DEADLINE,
        }
    return specs


def agent_source() -> bytes:
    return files("doctor.stages").joinpath("reach_agent.py").read_bytes()


def run_reach(
    probed: Mapping[str, NodeFacts],
    nodes: list[Node],
    transport: Transport | BatchTransport,
    *,
    workers: int,
    mode: Sampling = Sampling.auto,
    seed: int = 0,
    python: str | None = None,
    port: int | None = None,
    on_pairs: Callable[[int, int], None] | None = None,
) -> Reachability | Missing:
    """Run the agent on every probed node with candidates (at most ``workers`` started at once);
    judge what each listener saw; test each failed pair again.

    ``on_pairs(tested, total)`` hears of the pairs tested as each node's agent finishes.
    """
    found = candidates(probed)
    ifaces = {n.name: found[n.name] for n in nodes if found.get(n.name)}
    if len(ifaces) < 2:
        return Missing("fewer than two nodes with a routable interface address")
    coverage = choose(list(ifaces), mode, ALL_PAIRS_UP_TO, seed)
    port = port or random.Random().randrange(40000, 60000)
    tested = [n for n in nodes if n.name in ifaces]
    progress = _Counter(coverage.pairs, on_pairs)
    outputs, not_run = _round(
        transport, tested, reach_specs(ifaces, coverage, port), python, workers, progress
    )
    links = tuple(judge(outputs, ifaces))
    protocol = RETRIED if isinstance(transport, BatchTransport) else BARRIER
    first = Reachability(tuple(ifaces), ifaces, links, port, not_run, coverage, protocol)
    return replace(first, retried=tuple(_again(first, transport, tested, python, workers)))


def _again(
    first: Reachability,
    transport: Transport | BatchTransport,
    nodes: list[Node],
    python: str | None,
    workers: int,
) -> list[ReachLink]:
    """Every failed pair once more: per target node, that node and its failed sources alone."""
    failed: dict[str, list[str]] = {}
    for source in first.nodes:
        for target in first.nodes:
            if first.pair_status(source, target) in FAILED:
                failed.setdefault(target, []).append(source)
    retried: list[ReachLink] = []
    for target, sources in failed.items():
        names = [*sources, target]
        ifaces = {n: first.interfaces[n] for n in names}
        coverage = Coverage("full", None, {n: (target,) if n != target else () for n in names})
        port = random.Random().randrange(40000, 60000)
        specs = reach_specs(ifaces, coverage, port)
        alone = [n for n in nodes if n.name in ifaces]
        outputs, _ = _round(transport, alone, specs, python, workers, _Counter(0, None))
        retried += judge(outputs, ifaces)
    return retried


def _round(
    transport: Transport | BatchTransport,
    nodes: list[Node],
    specs: dict[str, dict[str, Any]],
    python: str | None,
    workers: int,
    progress: _Counter,
) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    if isinstance(transport, BatchTransport):
        return _in_one_step(transport, nodes, specs, python)
    return _behind_barrier(transport, nodes, specs, python, progress, workers)


def _behind_barrier(
    transport: Transport,
    nodes: list[Node],
    specs: dict[str, dict[str, Any]],
    python: str | None,
    progress: _Counter,
    workers: int,
) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    def spec_for(node: Node) -> dict[str, Any]:
        # The agent waits for its go as long as the controller may take to start every agent.
        return {**specs[node.name], "barrier": True, "ready_within": STARTING * READY_WITHIN}

    def heard(node: str, event: dict[str, Any]) -> None:
        if event.get("ev") == "done":
            progress.add(len({t["node"] for t in specs[node]["targets"]}))

    agents = run_agents(
        launcher_for(transport),
        nodes,
        agent_source(),
        "reach-agent",
        spec_for,
        Go(),
        python=python,
        deadline=DEADLINE + 10,
        ready_within=READY_WITHIN,
        workers=workers,
        on_event=heard,
    )
    outputs, not_run = {}, {}
    for name, agent in agents.items():
        done = next((e for e in agent.events if e.get("ev") == "done"), None)
        if done is not None and isinstance(done.get("connects"), list):
            outputs[name] = done
        else:
            not_run[name] = agent.error or "the reachability agent ended without its results"
    return outputs, not_run


@dataclass
class _Counter:
    total: int
    tell: Callable[[int, int], None] | None
    tested: int = 0

    def add(self, pairs: int) -> None:
        self.tested += pairs
        if self.tell is not None:
            self.tell(self.tested, self.total)


def _in_one_step(
    transport: BatchTransport,
    nodes: list[Node],
    specs: dict[str, dict[str, Any]],
    python: str | None,
) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    step = {name: {**spec, "retry_refused": RETRY_REFUSED} for name, spec in specs.items()}
    argv = probe_argv(python, {"nodes": step})
    answers = transport.execute_all(nodes, argv, agent_source(), RETRY_REFUSED + DEADLINE + 10)
    outputs, not_run = {}, {}
    for name, answer in answers.items():
        if not isinstance(answer, ExecResult):
            not_run[name] = answer.summary
        elif (done := done_event(answer.stdout.decode("utf-8", "replace"))) is not None:
            outputs[name] = done
        else:
            tail = answer.stderr.decode("utf-8", "replace").strip().splitlines()
            why = tail[-1] if tail else f"exit status {answer.rc}"
            not_run[name] = f"reach agent failed: {why}"
    return outputs, not_run
