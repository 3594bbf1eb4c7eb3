"""ClusterFacts: the facts of every reachable node plus the results of cross-node stages."""

from __future__ import annotations

from dataclasses import dataclass, field

from doctor.facts.node import NodeFacts


@dataclass(frozen=True)
class NodeFailure:
    """A node whose facts could not be had: unreachable, no Python, probe broke, ..."""

    node: str
    code: str  # e.g. "transport.refused", "probe.no_python"
    summary: str
    detail: str = ""


@dataclass
class ClusterFacts:
    nodes: dict[str, NodeFacts]
    failures: dict[str, NodeFailure] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        """Every node in inventory order, reachable or not."""
        return list(self.nodes) + [n for n in self.failures if n not in self.nodes]
