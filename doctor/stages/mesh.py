"""The SSH mesh stage: from every node, ``ssh -o BatchMode=yes`` to every other node."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from importlib.resources import files

from doctor.collect import probe_argv
from doctor.facts.mesh import MeshLink, SshMesh, parse_agent_output
from doctor.inventory import Node
from doctor.model import NodeFailure
from doctor.transport import Transport

# Per source, at most this many ssh clients at once: with the rotated order every sshd then sees
# about this many unauthenticated connections, under OpenSSH's MaxStartups default (10).
PARALLEL = 8
# Seconds an ssh may run past its ConnectTimeout (authentication on a loaded node) before the
# agent kills it and reports a timeout.
GRACE = 10.0


def mesh_spec(source: Node, nodes: list[Node], connect_timeout: int) -> dict[str, object]:
    """What ``source`` should try: every other node, starting with the one after it (rotation)."""
    i = nodes.index(source)
    peers = [n for n in nodes[i + 1 :] + nodes[:i] if n.name != source.name]
    targets = [
        # The name the launcher would use; a non-default port or user as the inventory gives it.
        {"name": n.name, "host": n.name, "port": n.port if n.port != 22 else None, "user": n.user}
        for n in peers
    ]
    return {
        "targets": targets,
        "connect_timeout": connect_timeout,
        "grace": GRACE,
        "parallel": PARALLEL,
    }


def stage_deadline(peers: int, connect_timeout: int) -> float:
    rounds = -(-peers // PARALLEL)
    return rounds * (connect_timeout + GRACE) + GRACE


def run_mesh(
    nodes: list[Node],
    sources: list[Node],
    transport: Transport,
    *,
    connect_timeout: int = 5,
    python: str | None = None,
    workers: int = 32,
) -> SshMesh:
    """Run the agent on every reachable ``source``; each tries every other node in ``nodes``."""
    agent = files("doctor.stages").joinpath("mesh_agent.py").read_bytes()
    deadline = stage_deadline(len(nodes) - 1, connect_timeout)

    def one(source: Node) -> list[MeshLink] | str:
        argv = probe_argv(python, mesh_spec(source, nodes, connect_timeout))
        result = transport.execute(source, argv, agent, deadline)
        if isinstance(result, NodeFailure):
            return result.summary
        if result.rc != 0:
            tail = result.stderr.decode("utf-8", "replace").strip().splitlines()
            return f"mesh agent failed: {tail[-1] if tail else f'exit status {result.rc}'}"
        return parse_agent_output(source.name, result.stdout.decode("utf-8", "replace"))

    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(sources)))) as pool:
        outcomes = list(pool.map(one, sources))
    links: list[MeshLink] = []
    not_run: dict[str, str] = {}
    for source, outcome in zip(sources, outcomes, strict=True):
        if isinstance(outcome, str):
            not_run[source.name] = outcome
        else:
            links.extend(outcome)
    return SshMesh(tuple(n.name for n in nodes), tuple(links), not_run)
