"""The nodes to check."""

from __future__ import annotations

import socket
from dataclasses import dataclass


@dataclass(frozen=True)
class Node:
    """One node as the user named it; ``address`` is what we connect to (None: this machine)."""

    name: str
    address: str | None = None
    port: int = 22
    user: str | None = None
    slots: int | None = None

    @property
    def local(self) -> bool:
        return self.address is None


def local_node() -> Node:
    return Node(name=socket.gethostname())
