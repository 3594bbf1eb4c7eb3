"""Probe every node and run the cross-node stages over one set of connections."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from doctor.capture import Capture
from doctor.collect import gather, to_cluster
from doctor.facts.cluster import ClusterFacts
from doctor.facts.mesh import SshMesh
from doctor.facts.reach import Reachability
from doctor.inventory import Node
from doctor.model import NodeFailure
from doctor.stages.mesh import run_mesh
from doctor.stages.reach import run_reach
from doctor.transport import BatchTransport, SshOptions, Transport
from doctor.transport.local import LocalTransport


@dataclass(frozen=True)
class RemoteOptions:
    ssh: SshOptions = field(default_factory=SshOptions)
    python: str | None = None  # the nodes' interpreter; None: discover python3 on each node
    workers: int = 32
    mesh: bool = True
    reach: bool = True
    mesh_connect_timeout: int = 5
    master_addr: str | None = None  # None: $MASTER_ADDR, else the first node


@contextmanager
def transport_for(nodes: list[Node], ssh: SshOptions) -> Iterator[Transport]:
    """This machine alone runs without SSH; otherwise one SSH connection per node, closed after."""
    if all(n.local for n in nodes):
        yield LocalTransport()
        return
    from doctor.transport.ssh import SshTransport  # paramiko (0.2 s) only when a node is remote

    with SshTransport(ssh) as transport:
        yield transport


def master_addr(nodes: list[Node], given: str | None) -> str:
    return given or os.environ.get("MASTER_ADDR") or nodes[0].name


def gather_cluster(
    nodes: list[Node],
    transport: Transport | BatchTransport,
    spec: dict[str, Any],
    options: RemoteOptions,
    on_done: Callable[[str, Capture | NodeFailure], None] | None = None,
) -> ClusterFacts:
    """Probe every node (each also resolves every node's name and MASTER_ADDR) and, with several
    nodes, run the SSH mesh at the same time over the same connections; then test TCP
    reachability on the interfaces the probe found."""
    remote = not all(n.local for n in nodes)
    # The mesh and reachability stages run one command per node; a batch transport (srun: one
    # step for all nodes) has no such call, so through srun only the probe runs.
    per_node = None if isinstance(transport, BatchTransport) else transport
    master = master_addr(nodes, options.master_addr) if remote else None
    if master is not None:
        spec = {**spec, "resolve": sorted({*(n.name for n in nodes), master})}
    with ThreadPoolExecutor(max_workers=2) as pool:
        mesh = None
        if per_node is not None and remote and options.mesh and len(nodes) > 1:
            mesh = pool.submit(
                run_mesh,
                nodes,
                nodes,
                per_node,
                connect_timeout=options.mesh_connect_timeout,
                python=options.python,
                workers=options.workers,
            )
        results = gather(
            nodes, transport, spec, python=options.python, workers=options.workers, on_done=on_done
        )
        cluster = to_cluster(results)
        cluster.inventory = {n.name: n for n in nodes}
        cluster.master_addr = master
        if mesh is not None:
            done = mesh.result()
            # An unreachable node is reported once, by node.reach, not again as a mesh source.
            not_run = {k: v for k, v in done.not_run.items() if k not in cluster.failures}
            cluster.ssh_mesh = SshMesh(done.nodes, done.links, not_run)
    if per_node is not None and remote and options.reach and len(cluster.nodes) > 1:
        cluster.reachability = run_reach(
            cluster, nodes, per_node, python=options.python, workers=options.workers
        )
    if isinstance(cluster.reachability, Reachability):
        # Recommendations may then use only what peers were seen to reach.
        for name, ifaces in cluster.reachability.proven().items():
            cluster.nodes[name] = replace(cluster.nodes[name], proven_ifaces=frozenset(ifaces))
    return cluster


def stage_sections(cluster: ClusterFacts) -> dict[str, Any]:
    """The report sections of the stages that ran."""
    sections: dict[str, Any] = {}
    if isinstance(cluster.ssh_mesh, SshMesh):
        sections["ssh_mesh"] = cluster.ssh_mesh.to_section()
    if isinstance(cluster.reachability, Reachability):
        sections["reachability"] = cluster.reachability.to_section()
    return sections
