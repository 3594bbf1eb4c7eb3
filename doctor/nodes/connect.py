"""Inventory and transport: turn what the user named into nodes and a way to run on them."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import replace

from doctor.core.errors import UsageError
from doctor.nodes.inventory import Node, build_inventory, local_node
from doctor.nodes.targets import Launcher, Targets
from doctor.nodes.transport import BatchTransport, SshOptions, Transport
from doctor.nodes.transport.exec import ExecPrefix, ExecTransport
from doctor.nodes.transport.local import LocalTransport
from doctor.nodes.transport.srun import in_allocation, slurm_nodes

# The concurrency budget: nodes probed at once (and connected ahead of the probe), and the
# ceiling of every stage's window (agents started, logins made at once), which grows to it only
# while the logins stay fast.
WORKERS = 32


def ssh_options(targets: Targets) -> SshOptions:
    return SshOptions(
        connect_timeout=targets.connect_timeout,
        accept_new_host_keys=targets.accept_new,
        known_hosts=tuple(targets.known_hosts or ()),
        identity_files=tuple(targets.identity or ()),
    )


@contextmanager
def transport_for(nodes: list[Node], ssh: SshOptions) -> Iterator[Transport]:
    """This machine alone runs without SSH; otherwise one SSH connection per node, begun at
    once in the background and closed after."""
    if all(n.local for n in nodes):
        yield LocalTransport()
        return
    from doctor.nodes.transport.ssh import (
        SshTransport,  # paramiko (0.2 s) only when a node is remote
    )

    room_for(len(nodes))
    with SshTransport(ssh) as transport:
        transport.open(nodes, WORKERS)
        yield transport


def room_for(nodes: int) -> None:
    """This process's own soft limit on open files raised toward its hard limit where the
    nodes' connections and agents would need more: measured, about 1.5 a node (195 at 128 nodes),
    and a login node's soft limit is often 1,024 (a preflight of 1,024 nodes needs about 1,550).
    The limit of this process only: no node is changed."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 256 + 2 * nodes
    if soft == resource.RLIM_INFINITY or soft >= want:
        return
    raised = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if raised > soft:  # where it is not allowed, the connections past it fail, each named
        with suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))


def _exec_nodes(targets: Targets) -> list[Node]:
    """The nodes named for --exec, as given (pods, containers): no ssh_config applies."""
    if not (targets.hosts or targets.hostfile):
        raise UsageError("--exec reaches the nodes you name: give them with -H or --hostfile")
    nodes = build_inventory(hosts=targets.hosts, hostfile=targets.hostfile)
    # Not this machine, whatever the name: every step runs through the prefix.
    return [replace(n, address=n.address or n.name) for n in nodes]


# The nodes a command reaches, and the transport that reaches them.
Reached = tuple[list[Node], Transport | BatchTransport]


@contextmanager
def connect(targets: Targets) -> Iterator[Reached]:
    """The nodes and their transport: this machine, SSH to the named hosts, a command prefix
    (--exec: kubectl, docker), or one srun step for a SLURM allocation (auto inside one, when no
    hosts are named)."""
    srun = targets.launcher is Launcher.srun or targets.slurm_nodes or targets.partition
    named = bool(targets.hosts or targets.hostfile or targets.slurm)
    if targets.local:
        if srun:
            raise UsageError("--local checks only this node: drop --launcher srun/--slurm-nodes")
        if named:
            raise UsageError("--local checks only this node: drop -H/--hostfile/--slurm")
        yield [local_node()], LocalTransport()
        return
    if targets.exec is not None:
        yield _exec_nodes(targets), ExecTransport(ExecPrefix.parse(targets.exec))
        return
    if not named and (srun or (targets.launcher is Launcher.auto and in_allocation(os.environ))):
        # The scheduler is the transport: one srun step reaches every node of the allocation.
        yield slurm_nodes(targets.slurm_nodes, targets.partition, os.environ)
        return
    nodes = build_inventory(
        hosts=targets.hosts,
        hostfile=targets.hostfile,
        slurm=targets.slurm,
        ssh_config=targets.ssh_config,
        ssh_port=targets.ssh_port,
    )
    with transport_for(nodes, ssh_options(targets)) as transport:
        yield nodes, transport
