"""A small real cluster for the allreduce tests: network namespaces on one bridge.

Each node has its own network namespace, ``eth0`` on 198.18.0.<i>/24, its own /etc/hosts
(``ip netns exec`` bind-mounts /etc/netns/<ns>/hosts) and its own hostname (``unshare --uts``).
Everything is created under names unique to this test process and removed by those names.
"""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from doctor.inventory import Node
from tests.cluster.netns import Netns, sh, unique


@dataclass
class TestNode:
    name: str
    ns: Netns
    host_veth: str
    addr: str

    @property
    def node(self) -> Node:
        return Node(self.name, address=self.addr)

    def pids(self) -> list[int]:
        """Every process inside this node's network namespace (its process table)."""
        out = sh("ip", "netns", "pids", self.ns.name, check=False).stdout
        return [int(p) for p in out.split()]

    def shape(self, rate: str) -> None:
        """Limit both directions of this node's link with a token bucket."""
        for argv in (
            ("ip", "netns", "exec", self.ns.name, "tc", "qdisc", "add", "dev", "eth0"),
            ("tc", "qdisc", "add", "dev", self.host_veth),
        ):
            sh(*argv, "root", "tbf", "rate", rate, "burst", "32kbit", "latency", "400ms")

    def write_hosts(self, text: str) -> None:
        folder = f"/etc/netns/{self.ns.name}"
        os.makedirs(folder, exist_ok=True)
        with open(f"{folder}/hosts", "w") as handle:
            handle.write(text)


@dataclass
class Cluster:
    nodes: list[TestNode]
    bridge: str

    def hosts_file(self, own: TestNode, *, loopback_self: bool) -> str:
        lines = ["127.0.0.1 localhost"]
        for n in self.nodes:
            addr = "127.0.1.1" if (loopback_self and n is own) else n.addr
            lines.append(f"{addr} {n.name}")
        return "\n".join(lines) + "\n"

    def resolve_self_to_loopback(self) -> None:
        """The Debian default: each node's own name maps to 127.0.1.1 (Gloo's trap)."""
        for n in self.nodes:
            n.write_hosts(self.hosts_file(n, loopback_self=True))

    def leftover(self) -> dict[str, list[int]]:
        return {n.name: n.pids() for n in self.nodes if n.pids()}


class NetnsLauncher:
    """Runs a rank inside its node's namespace, under the node's own hostname."""

    def __init__(self, cluster: Cluster) -> None:
        self.by_name = {n.name: n for n in cluster.nodes}

    def wrap(self, node: Node, argv: list[str]) -> list[str]:
        test_node = self.by_name[node.name]
        return [
            *test_node.ns.exec_argv(["unshare", "--uts", "sh", "-c"]),
            'hostname "$1" && shift && exec "$@"',
            "sh",
            node.name,
            *argv,
        ]


@contextmanager
def cluster(size: int = 3) -> Iterator[Cluster]:
    """``size`` nodes named node1.. on one bridge; torn down by name even when a test fails."""
    tag = unique("ar")
    bridge = f"{tag}br"[:15]
    nodes: list[TestNode] = []
    sh("ip", "link", "add", bridge, "type", "bridge")
    try:
        sh("ip", "link", "set", bridge, "up")
        for i in range(1, size + 1):
            ns = Netns(f"{tag}n{i}")
            host_veth = f"{tag}h{i}"[:15]
            node = TestNode(f"node{i}", ns, host_veth, f"198.18.0.{i}")
            nodes.append(node)
            sh(
                "ip",
                "link",
                "add",
                host_veth,
                "type",
                "veth",
                "peer",
                "name",
                "eth0",
                "netns",
                ns.name,
            )
            sh("ip", "link", "set", host_veth, "master", bridge, "up")
            ns.ip("addr", "add", f"{node.addr}/24", "dev", "eth0")
            ns.ip("link", "set", "eth0", "up")
        built = Cluster(nodes, bridge)
        for n in nodes:
            n.write_hosts(built.hosts_file(n, loopback_self=False))
        yield built
    finally:
        for n in nodes:
            for pid in n.pids():  # only processes inside namespaces this test created
                os.kill(pid, signal.SIGKILL)
            n.ns.delete()
            shutil.rmtree(f"/etc/netns/{n.ns.name}", ignore_errors=True)
            sh("ip", "link", "delete", n.host_veth, check=False)
        sh("ip", "link", "delete", bridge, check=False)
