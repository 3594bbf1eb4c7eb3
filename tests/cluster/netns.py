"""Real network namespaces for tests: created by name, removed by name, never by pattern.

Addresses come from 198.18.0.0/15 (RFC 2544 benchmarking), so test hosts never look like a real
network and no traffic leaves this machine.
"""

from __future__ import annotations

import itertools
import os
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

_counter = itertools.count()


def unique(tag: str) -> str:
    """A short name unique to this process (Linux interface names must fit in 15 bytes)."""
    return f"{tag}{os.getpid() % 100000}{next(_counter)}"[:15]


def sh(*argv: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, check=check, capture_output=True, text=True, timeout=timeout)


class Netns:
    """One network namespace; ``run`` executes inside it (with its own /sys/class/net)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.wire: str | None = None  # companion namespace holding the far ends of our NICs
        sh("ip", "netns", "add", name)
        self.ip("link", "set", "lo", "up")

    def ip(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return sh("ip", "-n", self.name, *args, check=check)

    def exec_argv(self, argv: Sequence[str]) -> list[str]:
        return ["ip", "netns", "exec", self.name, *argv]

    def run(
        self,
        argv: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        input: str | None = None,
        timeout: float = 60,
        check: bool = False,
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.exec_argv(argv),
            env=env,
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=check,
        )

    def add_nic(self, name: str, *addrs: str, up: bool = True) -> None:
        """A NIC with carrier: one end of a veth pair whose far end sits in a companion namespace.

        (This kernel has no dummy driver; and a far end left in the same namespace would be a
        second interface that NCCL's selection would see.)
        """
        if self.wire is None:
            self.wire = f"{self.name}w"
            sh("ip", "netns", "add", self.wire)
        far = f"w{next(_counter)}"
        self.ip("link", "add", name, "type", "veth", "peer", "name", far, "netns", self.wire)
        sh("ip", "-n", self.wire, "link", "set", far, "up")
        for addr in addrs:
            self.ip("addr", "add", addr, "dev", name)
        if up:
            self.ip("link", "set", name, "up")

    def add_veth_pair(self, a: str, b: str) -> None:
        """A veth pair inside the namespace; both ends get only automatic fe80:: addresses."""
        self.ip("link", "add", a, "type", "veth", "peer", "name", b)
        self.ip("link", "set", a, "up")
        self.ip("link", "set", b, "up")

    def add_bridge(self, name: str, *addrs: str) -> None:
        self.ip("link", "add", name, "type", "bridge")
        for addr in addrs:
            self.ip("addr", "add", addr, "dev", name)
        self.ip("link", "set", name, "up")

    def set_hosts(self, text: str) -> None:
        """This node's own /etc/hosts: `ip netns exec` bind-mounts /etc/netns/<name>/hosts."""
        folder = f"/etc/netns/{self.name}"
        os.makedirs(folder, exist_ok=True)
        with open(f"{folder}/hosts", "w") as handle:
            handle.write(text)

    def delete(self) -> None:
        sh("ip", "netns", "delete", self.name, check=False)
        sh("rm", "-rf", "--", f"/etc/netns/{self.name}", check=False)
        if self.wire:
            sh("ip", "netns", "delete", self.wire, check=False)


@contextmanager
def netns(tag: str = "cdt") -> Iterator[Netns]:
    """A fresh namespace, deleted afterwards even when the test fails."""
    ns = Netns(unique(tag))
    try:
        yield ns
    finally:
        ns.delete()
