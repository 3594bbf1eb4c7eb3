"""The SSH mesh stage: from every node, ``ssh -o BatchMode=yes`` to its peers, as mpirun does.

All pairs up to ALL_PAIRS_UP_TO nodes, a fixed fan-in sample beyond (doctor/stages/pairs.py). An
SSH login costs both ends a key exchange: all pairs at 16 nodes is 15 logins out of and 15 into
every node, about a second of each node's CPU; sampled, each node makes and takes 5.

The controller schedules every login of the cluster (Scheduler): at most PER_SOURCE at once from
a node, PER_TARGET at once into one (under sshd's MaxStartups, 10), and in all as many as the
congestion window allows (doctor/stages/window.py: it grows while logins stay fast, halves when
one is slow or times out into a node others reach). On a real cluster it opens to the pipeline's
budget within a few rounds; where nodes share CPUs (containers on one host, the test bed) it
keeps the doctor's own load from timing out the logins it is measuring.

A failed login is tried again after the stage, alone (one login at a time in the whole cluster,
from a new agent, so a new ssh process and connection): only a second failure is reported
(``SshMesh.retried`` holds the second attempts).
"""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Callable
from importlib.resources import files
from typing import Any

from doctor.facts.coverage import Coverage
from doctor.facts.network.mesh import OK, MeshLink, SshMesh, link_of
from doctor.nodes.inventory import Node
from doctor.nodes.transport import Transport
from doctor.nodes.transport.launchers import launcher_for
from doctor.stages.agents import Said, run_agents
from doctor.stages.pairs import Sampling, choose
from doctor.stages.window import START, Window

ALL_PAIRS_UP_TO = 16
PER_SOURCE = 8
PER_TARGET = 8
CONNECT_TIMEOUT = 5
# Seconds an ssh may run past its ConnectTimeout (authentication on a loaded node) before the
# agent kills it and reports a timeout.
GRACE = 10.0


def mesh_spec(source: Node, nodes: list[Node], coverage: Coverage) -> dict[str, Any]:
    """What ``source`` may try: its peers, starting with the one after it (rotation)."""
    i = nodes.index(source)
    peers = [n for n in nodes[i + 1 :] + nodes[:i] if coverage.tests(source.name, n.name)]
    targets = [
        # The name the launcher would use; a non-default port or user as the inventory gives it.
        {"name": n.name, "host": n.name, "port": n.port if n.port != 22 else None, "user": n.user}
        for n in peers
    ]
    return {"targets": targets, "connect_timeout": CONNECT_TIMEOUT, "grace": GRACE}


def stage_deadline(pairs: int, at_once: int = START) -> float:
    """Room for every login to take its ConnectTimeout, ``at_once`` at a time (as many as the
    window starts with), and the last its grace: a backstop (each login's agent ends it)."""
    rounds = -(-pairs // at_once)
    return rounds * CONNECT_TIMEOUT + CONNECT_TIMEOUT + 2 * GRACE


class Scheduler:
    """Hands out the logins (``try <i>``) within the per-source and per-target bounds and the
    window, and ``end`` to each agent with nothing left to try. Each login that ends sizes the
    window: a slow one, or a timeout into a node that took another login, is congestion; a
    timeout into a node nobody has reached yet says nothing about the load."""

    def __init__(self, targets: dict[str, list[str]], window: Window) -> None:
        self.window = window
        self.handed: dict[tuple[str, int], float] = {}  # (source, index) -> when
        self.reached: set[str] = set()  # targets some login reached
        self.queues = {s: deque(enumerate(ts)) for s, ts in targets.items()}
        self.targets = targets
        self.from_source: Counter[str] = Counter()
        self.into_target: Counter[str] = Counter()
        self.trying: dict[str, set[int]] = {s: set() for s in targets}
        self.ready: list[str] = []
        self.ended: set[str] = set()

    def begin(self, ready: list[str]) -> Said:
        self.ready = ready
        return self._fill()

    def heard(self, node: str, event: dict[str, Any]) -> Said:
        index = event.get("index")
        if event.get("ev") == "link" and index in self.trying[node]:
            self._release(node, index)
            self._sized(node, index, event)
        elif event.get("ev") == "ended":  # the agent is gone: its logins will never report
            for index in list(self.trying[node]):
                self._release(node, index)
            self.queues[node].clear()
            self.ended.add(node)
        return self._fill()

    def _sized(self, source: str, index: int, event: dict[str, Any]) -> None:
        target, began = self.targets[source][index], self.handed.pop((source, index))
        link = link_of(source, event)
        if link is None or link.seconds is None:
            return
        if link.status == "timeout":
            if target in self.reached:
                self.window.ended(began, None)
        else:
            if link.status == OK:
                self.reached.add(target)
            self.window.ended(began, link.seconds)

    def _release(self, source: str, index: int) -> None:
        self.trying[source].discard(index)
        self.from_source[source] -= 1
        self.into_target[self.targets[source][index]] -= 1

    def _fill(self) -> Said:
        said: dict[str, list[str]] = {}
        busy = sum(self.from_source.values())
        progress = True
        while progress and busy < self.window.size:
            progress = False
            for source in self.ready:  # one login per source per pass: fair to every node
                queue = self.queues[source]
                if busy >= self.window.size or self.from_source[source] >= PER_SOURCE:
                    continue
                pick = next((p for p in queue if self.into_target[p[1]] < PER_TARGET), None)
                if pick is None:
                    continue
                queue.remove(pick)
                self.trying[source].add(pick[0])
                self.from_source[source] += 1
                self.into_target[pick[1]] += 1
                self.handed[(source, pick[0])] = time.monotonic()
                said.setdefault(source, []).append(f"try {pick[0]}")
                busy += 1
                progress = True
        for source in self.ready:
            idle = not self.queues[source] and not self.from_source[source]
            if idle and source not in self.ended:
                self.ended.add(source)
                said.setdefault(source, []).append("end")
        return said


def agent_source() -> bytes:
    return files("doctor.stages").joinpath("mesh_agent.py").read_bytes()


def run_mesh(
    nodes: list[Node],
    transport: Transport,
    *,
    workers: int,
    mode: Sampling = Sampling.auto,
    seed: int = 0,
    python: str | None = None,
    on_pairs: Callable[[int, int], None] | None = None,
) -> SshMesh:
    """Run the agent on every node; each tries its peers among ``nodes``, as scheduled (at most
    ``workers`` logins at once); then each failed login again, alone.

    A stage that overruns its deadline keeps every link tested before it; the untested ones are
    left out of the matrix (not failures of the nodes it could not get to), and the sources that
    did not finish say why in ``not_run``. ``on_pairs(tested, total)`` hears of each link.
    """
    coverage = choose([n.name for n in nodes], mode, ALL_PAIRS_UP_TO, seed)
    specs = {n.name: mesh_spec(n, nodes, coverage) for n in nodes}
    tested = 0

    def heard(source: str, event: dict[str, Any]) -> None:
        nonlocal tested
        if event.get("ev") == "link" and on_pairs is not None:
            tested += 1
            on_pairs(tested, coverage.pairs)

    links, not_run = _attempts(nodes, transport, specs, Window(workers), python, heard)
    again: dict[str, set[str]] = {}
    for link in links:
        if link.status != OK:
            again.setdefault(link.source, set()).add(link.target)
    retried: list[MeshLink] = []
    if again:
        alone = {
            source: {**spec, "targets": [t for t in spec["targets"] if t["name"] in again[source]]}
            for source, spec in specs.items()
            if source in again
        }
        sources = [n for n in nodes if n.name in alone]
        retried, _ = _attempts(sources, transport, alone, Window(1), python, None)
    names = tuple(n.name for n in nodes)
    return SshMesh(names, tuple(links), not_run, coverage, tuple(retried))


def _attempts(
    nodes: list[Node],
    transport: Transport,
    specs: dict[str, dict[str, Any]],
    window: Window,
    python: str | None,
    heard: Callable[[str, dict[str, Any]], None] | None,
) -> tuple[list[MeshLink], dict[str, str]]:
    """One mesh agent per node in ``specs``, every login they try within ``window``."""
    scheduler = Scheduler(
        {s: [t["name"] for t in spec["targets"]] for s, spec in specs.items()}, window
    )
    pairs = sum(len(spec["targets"]) for spec in specs.values())
    agents = run_agents(
        launcher_for(transport),
        nodes,
        agent_source(),
        "mesh-agent",
        lambda node: specs[node.name],
        scheduler,
        python=python,
        deadline=stage_deadline(pairs, min(START, window.ceiling)),
        workers=window.ceiling,
        on_event=heard,
    )
    links: list[MeshLink] = []
    not_run: dict[str, str] = {}
    for source, agent in agents.items():
        reported = [link_of(source, e) for e in agent.events if e.get("ev") == "link"]
        links += [link for link in reported if link is not None]
        if not agent.finished:
            not_run[source] = agent.error or "the mesh agent ended before trying every peer"
    return links, not_run
