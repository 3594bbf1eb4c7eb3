"""Namespace nodes on one bridge for the SLURM tests (until the shared node harness lands)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.cluster.netns import Netns, sh, unique


@dataclass(frozen=True)
class Bed:
    controller: str  # this machine's address on the bridge
    nodes: list[tuple[str, Netns, str]]  # (hostname, namespace, address)


@contextmanager
def bed(count: int) -> Iterator[Bed]:
    """``count`` namespaces on a fresh bridge in their own 198.19.x.0/24; all removed after."""
    subnet = f"198.19.{os.getpid() % 250}"
    with ExitStack() as stack:
        bridge = unique("sbr")
        sh("ip", "link", "add", bridge, "type", "bridge")
        stack.callback(sh, "ip", "link", "delete", bridge, check=False)
        sh("ip", "addr", "add", f"{subnet}.254/24", "dev", bridge)
        sh("ip", "link", "set", bridge, "up")
        names = [f"node{i}" for i in range(1, count + 1)]
        hosts = "127.0.0.1 localhost\n" + "".join(
            f"{subnet}.{i} {name}\n" for i, name in enumerate(names, 1)
        )
        nodes = []
        for i, name in enumerate(names, 1):
            ns = Netns(unique("sn"))
            stack.callback(ns.delete)
            etc = Path("/etc/netns") / ns.name
            etc.mkdir(parents=True, exist_ok=True)
            stack.callback(sh, "rm", "-rf", "--", str(etc), check=False)
            (etc / "hosts").write_text(hosts)
            host_end = unique("sh")
            sh("ip", "link", "add", host_end, "type", "veth", "peer", "name", "eth0", "netns", ns.name)
            stack.callback(sh, "ip", "link", "delete", host_end, check=False)
            sh("ip", "link", "set", host_end, "master", bridge, "up")
            ns.ip("addr", "add", f"{subnet}.{i}/24", "dev", "eth0")
            ns.ip("link", "set", "eth0", "up")
            nodes.append((name, ns, f"{subnet}.{i}"))
        yield Bed(f"{subnet}.254", nodes)
