"""Run one small agent on many nodes at once: streamed, behind a ready barrier, under a deadline.

Every agent is shipped like the probe (its source on stdin, then stdin stays open: the agent
ends itself when the controller goes away) and answers in JSON lines as it works, so whatever it
did before the stage's deadline is kept. Each agent first says ``{"ev": "ready"}`` and waits;
once every agent is ready (or the rest are given up), a Conductor decides what each one is told
and when: all of them ``go`` at once (reachability: no connect before every listener is up), or
one attempt at a time within per-source, per-target and total bounds (the SSH mesh).
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from doctor.collect import FIND_PYTHON
from doctor.inventory import Node
from doctor.transport.launch import Event, Launcher, Worker, boot_args, start

STARTS = 32  # agents being started at once (each start is one session on its node)
POLL = 0.05
Said = dict[str, list[str]]  # node -> lines to write to its agent


class Conductor(Protocol):
    def begin(self, ready: list[str]) -> Said:
        """Every agent is ready (or given up): what to tell the ready ones first."""
        ...

    def heard(self, node: str, event: dict[str, Any]) -> Said:
        """What to tell agents after ``node``'s agent said ``event``; ``{"ev": "ended"}`` when
        its output ends (it exited, or its session died)."""
        ...


class Go:
    """Everyone at once (the barrier), then everyone stops listening once every agent that went
    has said ``connected``: a sender that runs late still finds its peers' listeners up."""

    def __init__(self) -> None:
        self.went: list[str] = []
        self.sending: set[str] = set()

    def begin(self, ready: list[str]) -> Said:
        self.went, self.sending = ready, set(ready)
        return {name: ["go"] for name in ready}

    def heard(self, node: str, event: dict[str, Any]) -> Said:
        if event.get("ev") not in ("connected", "done", "ended") or node not in self.sending:
            return {}
        self.sending.discard(node)
        return {} if self.sending else {name: ["stop"] for name in self.went}


@dataclass
class Agent:
    """One node's agent: what it said, and why it did not finish when it did not."""

    node: str
    events: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""  # could not start, exited badly, not ready, stopped at the deadline
    ready: bool = False
    finished: bool = False


def agent_argv(python: str | None, name: str, source: bytes, spec: dict[str, Any]) -> list[str]:
    """With no interpreter named, a small sh loop finds one on the node (as for the probe)."""
    args = boot_args(name, source, spec)
    return [python, *args] if python else ["sh", "-c", FIND_PYTHON, "sh", *args]


def _tail(worker: Worker) -> str:
    lines = worker.stderr_text().strip().splitlines()
    return lines[-1][:300] if lines else ""


def run_agents(
    launcher: Launcher,
    nodes: list[Node],
    source: bytes,
    name: str,
    spec_for: Callable[[Node], dict[str, Any]],
    conductor: Conductor,
    *,
    python: str | None,
    deadline: float,
    ready_within: float = 20.0,
    on_event: Callable[[str, dict[str, Any]], None] | None = None,
) -> dict[str, Agent]:
    """Start the agent on every node, conduct them, collect until done or the deadline; every
    agent is killed before this returns."""
    started = time.monotonic()
    events: queue.Queue[Event] = queue.Queue()
    agents = {n.name: Agent(n.name) for n in nodes}
    keys = {n.name: i for i, n in enumerate(nodes)}
    workers: dict[int, Worker] = {}

    def launch(key: int, node: Node) -> None:
        argv = agent_argv(python, name, source, spec_for(node))
        worker = start(key, launcher, node, argv, source, events)
        if isinstance(worker, str):
            agents[node.name].error = worker
        else:
            workers[key] = worker

    def tell(said: Said) -> None:
        for node, lines in said.items():
            if lines and keys[node] in workers:
                workers[keys[node]].process.send("".join(f"{x}\n" for x in lines).encode())

    with ThreadPoolExecutor(max_workers=max(1, min(STARTS, len(nodes)))) as pool:
        list(pool.map(launch, range(len(nodes)), nodes))
    open_streams = set(workers)
    begun = False
    try:
        while open_streams:
            now = time.monotonic()
            if now - started > deadline:
                for key in open_streams:
                    agents[nodes[key].name].error = f"stopped at the stage deadline ({deadline:g}s)"
                break
            if not begun:
                waiting = [k for k in open_streams if not agents[nodes[k].name].ready]
                if not waiting or now - started > ready_within:
                    for key in waiting:  # never ready: its peers are not judged on it
                        agents[nodes[key].name].error = f"not ready within {ready_within:g}s"
                        workers[key].process.kill()
                    ready = [nodes[k].name for k in open_streams if k not in waiting]
                    tell(conductor.begin(ready))
                    begun = True
            try:
                event = events.get(timeout=POLL)
            except queue.Empty:
                continue
            agent = agents[nodes[event.key].name]
            if event.data is None:
                open_streams.discard(event.key)
                code = workers[event.key].process.exit_code()
                if code not in (0, None) and not agent.error:
                    tail = _tail(workers[event.key])
                    agent.error = f"exit status {code}" + (f": {tail}" if tail else "")
                if begun:
                    tell(conductor.heard(agent.node, {"ev": "ended"}))
                continue
            if event.data.get("ev") == "ready":
                agent.ready = True
                continue
            if event.data.get("ev") == "done":
                agent.finished = True
            agent.events.append(event.data)
            if on_event is not None:
                on_event(agent.node, event.data)
            if begun:
                tell(conductor.heard(agent.node, event.data))
    finally:
        for worker in workers.values():
            worker.process.kill()
    return agents
