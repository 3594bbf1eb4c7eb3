"""Run a program on a node and return its output, under a deadline, never raising."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from doctor.facts.cluster import NodeFailure
from doctor.inventory import Node


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
