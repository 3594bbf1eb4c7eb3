"""Run one small agent on many nodes at once: streamed, behind a ready barrier, under a deadline.

Agents are started within a congestion window (doctor/stages/window.py): each start holds a place
until its agent says it is ready, and that time sizes the window, so a loaded machine is not
asked to start more Pythons at once than it can.

Every agent is shipped like the probe (its source on stdin, then stdin stays open: the agent
ends itself when the controller goes away) and answers in JSON lines as it works, so whatever it
did before the stage's deadline is kept. Each agent first says ``{"ev": "ready"}`` and waits;
once every agent is ready (or the rest are given up), a Conductor decides what each one is told
and when: all of them ``go`` at once (reachability: no connect before every listener is up), or
one attempt at a time within per-source, per-target and total bounds (the SSH mesh).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from doctor.nodes.inventory import Node
from doctor.nodes.transport.launch import Event, Launcher, Worker, boot_args, start
from doctor.stages.collect import FIND_PYTHON
from doctor.stages.window import Window

POLL = 0.05
# The start of every agent (the barrier) ends at most this many times ``ready_within`` after the
# stage began: with the window small (a loaded machine) the last agents start late.
STARTING = 2
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
    workers: int,
    ready_within: float = 20.0,
    on_event: Callable[[str, dict[str, Any]], None] | None = None,
) -> dict[str, Agent]:
    """Start the agent on every node (at most ``workers`` at once, fewer while starts are slow),
    conduct them once all are ready (each gets ``ready_within`` from its own start), collect
    until done or ``deadline`` seconds after that; every agent is killed before this returns."""
    window = Window(workers)
    started = time.monotonic()
    events: queue.Queue[Event] = queue.Queue()
    agents = {n.name: Agent(n.name) for n in nodes}
    keys = {n.name: i for i, n in enumerate(nodes)}
    running: dict[int, Worker] = {}
    holding: dict[int, float] = {}  # agents started and not ready yet -> when their start began
    lock = threading.Lock()
    no_more = threading.Event()  # the barrier is over: what has not started will not

    def launch(key: int, node: Node) -> None:
        argv = agent_argv(python, name, source, spec_for(node))
        worker = start(key, launcher, node, argv, source, events)
        with lock:
            given_up = key not in holding
            if isinstance(worker, str):
                agents[node.name].error = agents[node.name].error or worker
                settle(key)
                return
            running[key] = worker
        if given_up:  # its start took longer than it was given: its stream ends here
            worker.process.kill()

    def launch_all() -> None:
        """Each start in its own thread (a start waits on its node), as the window allows."""
        threads = []
        for key, node in enumerate(nodes):
            began = window.take(no_more)
            if began is None:
                agents[node.name].error = f"not started within {STARTING * ready_within:g}s"
                continue
            with lock:
                holding[key] = began
            threads.append(threading.Thread(target=launch, args=(key, node)))
            threads[-1].start()
        for thread in threads:
            thread.join()

    def settle(key: int, gave_up: bool = False) -> None:
        """The agent said something (it is up) or its stream ended, or it was given up on: its
        place in the window is free, and how long it took sizes the window."""
        began = holding.pop(key, None)
        if began is not None:
            window.give_back(began, None if gave_up else time.monotonic() - began)

    def tell(said: Said) -> None:
        for node, lines in said.items():
            if lines and keys[node] in running:
                running[keys[node]].process.send("".join(f"{x}\n" for x in lines).encode())

    def give_up(now: float) -> None:
        """Kill the agents not ready within ``ready_within`` of their own start: their peers are
        not judged on them."""
        with lock:
            late = [k for k, began in holding.items() if now - began > ready_within]
            for key in late:
                agents[nodes[key].name].error = f"not ready within {ready_within:g}s"
                settle(key, gave_up=True)
        for key in late:
            if key in running:
                running[key].process.kill()

    launching = threading.Thread(target=launch_all, daemon=True)
    launching.start()
    ended: set[int] = set()
    begun_at: float | None = None
    try:
        while begun_at is None or len(ended) < len(running):
            now = time.monotonic()
            if begun_at is not None and now - begun_at > deadline:
                for key in set(running) - ended:
                    agents[nodes[key].name].error = f"stopped at the stage deadline ({deadline:g}s)"
                break
            if begun_at is None:
                give_up(now)
                if now - started > STARTING * ready_within:
                    no_more.set()
                with lock:
                    starting = launching.is_alive() or bool(holding)
                if not starting:
                    launching.join()
                    ready = [nodes[k].name for k in running if agents[nodes[k].name].ready]
                    ready = [r for r in ready if keys[r] not in ended]
                    tell(conductor.begin(ready))
                    begun_at = time.monotonic()
            try:
                event = events.get(timeout=POLL)
            except queue.Empty:
                continue
            agent = agents[nodes[event.key].name]
            with lock:
                if event.key not in running:  # it spoke before its start returned: soon
                    events.put(event)
                    time.sleep(POLL / 10)
                    continue
                settle(event.key)
            if event.data is None:
                ended.add(event.key)
                code = running[event.key].process.exit_code()
                if code not in (0, None) and not agent.error:
                    tail = _tail(running[event.key])
                    agent.error = f"exit status {code}" + (f": {tail}" if tail else "")
                if begun_at is not None:
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
            if begun_at is not None:
                tell(conductor.heard(agent.node, event.data))
    finally:
        no_more.set()
        launching.join()
        for worker in running.values():
            worker.process.kill()
    return agents
