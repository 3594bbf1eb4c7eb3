"""Run a program on a node and return its output, under a deadline, never raising."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from doctor.core.model import NodeFailure
from doctor.nodes.inventory import Node


@dataclass(frozen=True)
class ExecResult:
    rc: int
    stdout: bytes
    stderr: bytes
    seconds: float


class Transport(Protocol):
    def execute(
        self, node: Node, argv: list[str], stdin: bytes, timeout: float
    ) -> ExecResult | NodeFailure:
        """Run ``argv`` on ``node`` with ``stdin``; a node problem is a NodeFailure, not a raise."""
        ...


@runtime_checkable
class BatchTransport(Protocol):
    """A launcher that runs one command on many nodes at once (srun), not one call per node."""

    def execute_all(
        self, nodes: Sequence[Node], argv: list[str], stdin: bytes, timeout: float
    ) -> dict[str, ExecResult | NodeFailure]:
        """Run ``argv`` on every node; every node gets a result or a NodeFailure, never a raise."""
        ...


@dataclass(frozen=True)
class SshOptions:
    connect_timeout: float = 10.0
    keepalive: int = 5
    accept_new_host_keys: bool = False
    # known_hosts files read (the first one also receives accepted new keys); empty: OpenSSH's
    # defaults, ~/.ssh/known_hosts and /etc/ssh/ssh_known_hosts.
    known_hosts: tuple[str, ...] = ()
    identity_files: tuple[str, ...] = ()
    user: str | None = None
