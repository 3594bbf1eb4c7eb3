"""ClusterFacts: the facts of every reachable node plus the results of cross-node stages."""

from __future__ import annotations

from dataclasses import dataclass, field

from doctor.facts.allreduce import AllreduceFacts
from doctor.facts.mesh import SshMesh
from doctor.facts.node import NodeFacts
from doctor.facts.reach import Reachability
from doctor.inventory import Node
from doctor.model import Missing, NodeFailure


@dataclass(frozen=True)
class ClusterFacts:
    """Everything the checks judge, built once by the pipeline and never changed after."""

    nodes: dict[str, NodeFacts]
    failures: dict[str, NodeFailure] = field(default_factory=dict)
    # How the user named each node (address, slots), when known.
    inventory: dict[str, Node] = field(default_factory=dict)
    # A known-good node's facts (--baseline FILE); when set, drift is judged against it
    # instead of the majority.
    baseline: NodeFacts | None = None
    # The rendezvous name every node must resolve (MASTER_ADDR), when known.
    master_addr: str | None = None
    ssh_mesh: SshMesh | Missing = field(default_factory=lambda: Missing("SSH mesh not run"))
    reachability: Reachability | Missing = field(
        default_factory=lambda: Missing("reachability not tested")
    )
    allreduce: AllreduceFacts | Missing = field(
        default_factory=lambda: Missing("allreduce not run")
    )

    @property
    def names(self) -> list[str]:
        """Every node in inventory order, reachable or not."""
        return list(self.nodes) + [n for n in self.failures if n not in self.nodes]
