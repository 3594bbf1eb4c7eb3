"""The SSH mesh stage: from every node, ``ssh -o BatchMode=yes`` to its peers, as mpirun does.

All pairs up to ALL_PAIRS_UP_TO nodes, a fixed fan-in sample beyond (doctor/stages/pairs.py). An
SSH login costs both ends a key exchange: all pairs at 16 nodes is 15 logins out of and 15 into
every node, about a second of each node's CPU; sampled, each node makes and takes 5.

The controller schedules every login of the cluster (Scheduler): at most PER_SOURCE at once from
a node, PER_TARGET at once into one (under sshd's MaxStartups, 10), and TOTAL at once in all. On
a real cluster the last bound rarely binds; where nodes share CPUs (containers on one host, the
test bed) it keeps the doctor's own load from timing out the logins it is measuring.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable
from importlib.resources import files
from typing import Any

from doctor.facts.coverage import Coverage
from doctor.facts.mesh import MeshLink, SshMesh, link_of
from doctor.inventory import Node
from doctor.stages.agents import Said, run_agents
from doctor.stages.pairs import Sampling, choose
from doctor.transport import Transport
from doctor.transport.launchers import launcher_for

ALL_PAIRS_UP_TO = 16
PER_SOURCE = 8
PER_TARGET = 8
TOTAL = 32
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


def stage_deadline(pairs: int) -> float:
    """Room for every login to take its ConnectTimeout, TOTAL at a time, and the last its grace."""
    rounds = -(-pairs // TOTAL)
    return rounds * CONNECT_TIMEOUT + CONNECT_TIMEOUT + 2 * GRACE


class Scheduler:
    """Hands out the logins (``try <i>``) within the per-source, per-target and total bounds,
    and ``end`` to each agent with nothing left to try."""

    def __init__(self, targets: dict[str, list[str]]) -> None:
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
        elif event.get("ev") == "ended":  # the agent is gone: its logins will never report
            for index in list(self.trying[node]):
                self._release(node, index)
            self.queues[node].clear()
            self.ended.add(node)
        return self._fill()

    def _release(self, source: str, index: int) -> None:
        self.trying[source].discard(index)
        self.from_source[source] -= 1
        self.into_target[self.targets[source][index]] -= 1

    def _fill(self) -> Said:
        said: dict[str, list[str]] = {}
        busy = sum(self.from_source.values())
        progress = True
        while progress and busy < TOTAL:
            progress = False
            for source in self.ready:  # one login per source per pass: fair to every node
                queue = self.queues[source]
                if busy >= TOTAL or self.from_source[source] >= PER_SOURCE:
                    continue
                pick = next((p for p in queue if self.into_target[p[1]] < PER_TARGET), None)
                if pick is None:
                    continue
                queue.remove(pick)
                self.trying[source].add(pick[0])
                self.from_source[source] += 1
                self.into_target[pick[1]] += 1
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
    mode: Sampling = Sampling.auto,
    seed: int = 0,
    python: str | None = None,
    on_pairs: Callable[[int, int], None] | None = None,
) -> SshMesh:
    """Run the agent on every node; each tries its peers among ``nodes``, as scheduled.

    A stage that overruns its deadline keeps every link tested before it; the untested ones are
    left out of the matrix (not failures of the nodes it could not get to), and the sources that
    did not finish say why in ``not_run``. ``on_pairs(tested, total)`` hears of each link.
    """
    coverage = choose([n.name for n in nodes], mode, ALL_PAIRS_UP_TO, seed)
    specs = {n.name: mesh_spec(n, nodes, coverage) for n in nodes}
    scheduler = Scheduler({s: [t["name"] for t in spec["targets"]] for s, spec in specs.items()})
    tested = 0

    def heard(source: str, event: dict[str, Any]) -> None:
        nonlocal tested
        if event.get("ev") == "link" and on_pairs is not None:
            tested += 1
            on_pairs(tested, coverage.pairs)

    agents = run_agents(
        launcher_for(transport),
        nodes,
        agent_source(),
        "mesh-agent",
        lambda node: specs[node.name],
        scheduler,
        python=python,
        deadline=stage_deadline(coverage.pairs),
        on_event=heard,
    )
    links: list[MeshLink] = []
    not_run: dict[str, str] = {}
    for source, agent in agents.items():
        reported = [link_of(source, e) for e in agent.events if e.get("ev") == "link"]
        links += [link for link in reported if link is not None]
        if not agent.finished:
            not_run[source] = agent.error or "the mesh agent ended before trying every peer"
    return SshMesh(tuple(n.name for n in nodes), tuple(links), not_run, coverage)
