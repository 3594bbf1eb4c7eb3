"""What the capture scripts share: a bridged set of namespaces, and saving a capture."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from tests.cluster.netns import Netns, sh, unique

OUT = Path(__file__).resolve().parents[2] / "fixtures" / "logs" / "real"


def save(script: str, name: str, header: str, text: str) -> None:
    """Write a capture under tests/fixtures/logs/real with a header naming how it was made."""
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / name).write_text(
        f"# captured by tests/explain/capture/{Path(script).name}: {header}\n{text}"
    )
    print(f"saved {name}")


class Nodes:
    """Namespaces whose eth0 (198.18.<subnet>.<i>/24) hang off one bridge; close() removes all."""

    def __init__(self, tag: str, subnet: int, count: int) -> None:
        self.bridge = unique(f"{tag}br")
        self.links: list[str] = []
        self.nodes: list[Netns] = []
        sh("ip", "link", "add", self.bridge, "type", "bridge")
        sh("ip", "link", "set", self.bridge, "up")
        try:
            for i in range(1, count + 1):
                ns = Netns(unique(f"{tag}{i}"))
                self.nodes.append(ns)
                host_end = unique(f"{tag}h{i}")
                sh("ip", "link", "add", host_end, "type", "veth", "peer", "name", "eth0",
                   "netns", ns.name)  # fmt: skip
                self.links.append(host_end)
                sh("ip", "link", "set", host_end, "master", self.bridge, "up")
                ns.ip("addr", "add", f"198.18.{subnet}.{i}/24", "dev", "eth0")
                ns.ip("link", "set", "eth0", "up")
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        for link in self.links:
            sh("ip", "link", "delete", link, check=False)
        for ns in self.nodes:
            ns.delete()
        sh("ip", "link", "delete", self.bridge, check=False)
