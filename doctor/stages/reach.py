"""The reachability stage: short TCP connects between nodes on every candidate interface."""

from __future__ import annotations

import random
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from importlib.resources import files
from typing import Any

from doctor.collect import probe_argv
from doctor.facts.node import NodeFacts
from doctor.facts.reach import Reachability, judge, parse_agent_json
from doctor.inventory import Node
from doctor.model import Missing, NodeFailure
from doctor.nic.plan import reach_address
from doctor.transport import Transport

ALL_PAIRS_UP_TO = 32  # nodes; beyond, each node tries a ring neighbour pair and a few random peers
RANDOM_PEERS = 3
CONNECT_TIMEOUT = 2.0


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


def peers_of(nodes: list[str], seed: int = 0) -> dict[str, list[str]]:
    """All pairs for small clusters; a ring both ways plus random peers for large ones."""
    if len(nodes) <= ALL_PAIRS_UP_TO:
        return {n: [p for p in nodes if p != n] for n in nodes}
    rng = random.Random(seed)
    out = {}
    for i, n in enumerate(nodes):
        chosen = {nodes[(i + 1) % len(nodes)], nodes[i - 1]}
        others = [p for p in nodes if p != n and p not in chosen]
        chosen.update(rng.sample(others, min(RANDOM_PEERS, len(others))))
        out[n] = [p for p in nodes if p in chosen]
    return out


def reach_specs(
    ifaces: dict[str, dict[str, str]], port: int, deadline: float
) -> dict[str, dict[str, Any]]:
    names = list(ifaces)
    peers = peers_of(names)
    specs = {}
    for name in names:
        targets = [
            {"node": p, "iface": i, "address": a} for p in peers[name] for i, a in ifaces[p].items()
        ]
        expect = sum(len(ifaces[name]) for p in names if name in peers[p])
        specs[name] = {
            "source": name,
            "port": port,
            "listen": sorted(set(ifaces[name].values())),
            "targets": targets,
            "expect": expect,
            "connect_timeout": CONNECT_TIMEOUT,
            "deadline": deadline,
        }
    return specs


def run_reach(
    probed: Mapping[str, NodeFacts],
    nodes: list[Node],
    transport: Transport,
    *,
    port: int | None = None,
    python: str | None = None,
    deadline: float = 10.0,
    workers: int = 32,
) -> Reachability | Missing:
    """Run the agent on every probed node with candidates; judge what each listener saw."""
    ifaces = {n: i for n, i in candidates(probed).items() if i}
    if len(ifaces) < 2:
        return Missing("fewer than two nodes with a routable interface address")
    port = port or random.Random().randrange(40000, 60000)
    specs = reach_specs(ifaces, port, deadline)
    agent = files("doctor.stages").joinpath("reach_agent.py").read_bytes()
    by_name = {n.name: n for n in nodes}

    def one(name: str) -> dict[str, Any] | str:
        result = transport.execute(
            by_name[name], probe_argv(python, specs[name]), agent, deadline + 5
        )
        if isinstance(result, NodeFailure):
            return result.summary
        if result.rc != 0:
            tail = result.stderr.decode("utf-8", "replace").strip().splitlines()
            return f"reach agent failed: {tail[-1] if tail else f'exit status {result.rc}'}"
        return parse_agent_json(result.stdout.decode("utf-8", "replace"))

    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(ifaces)))) as pool:
        answers = dict(zip(ifaces, pool.map(one, ifaces), strict=True))
    outputs = {n: a for n, a in answers.items() if isinstance(a, dict)}
    not_run = {n: a for n, a in answers.items() if isinstance(a, str)}
    names = tuple(n.name for n in nodes if n.name in ifaces)
    return Reachability(names, ifaces, tuple(judge(outputs, ifaces)), port, not_run)
