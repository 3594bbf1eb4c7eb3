"""ClusterFacts: the facts of every reachable node plus the results of cross-node stages."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from doctor.core.model import Missing, NodeFailure
from doctor.core.nodeset import is_address
from doctor.facts.allreduce import AllreduceFacts
from doctor.facts.hang.outcome import JobOutcome
from doctor.facts.hang.stacks import StacksFacts
from doctor.facts.network.mesh import SshMesh
from doctor.facts.network.reach import Reachability
from doctor.nodes.inventory import Node

if TYPE_CHECKING:  # only named here: `doctor stacks` judges with no node's facts parsed
    from doctor.facts.node import NodeFacts


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
    # A running job's ranks, where each one is (doctor stacks, doctor run's hang watch).
    stacks: StacksFacts | Missing = field(
        default_factory=lambda: Missing("no running job was looked at")
    )
    # How a job doctor run launched ended (set after the launch, on a copy of the gate's facts).
    job: JobOutcome | Missing = field(default_factory=lambda: Missing("no job was launched"))

    @property
    def names(self) -> list[str]:
        """Every node in inventory order, reachable or not (and those only looked at, not
        probed: `doctor stacks`)."""
        named = [*self.inventory, *self.nodes, *self.failures]
        return list(dict.fromkeys(named))

    @cached_property
    def address_owners(self) -> dict[str, str]:
        """Each address that one node alone holds -> that node: the address the inventory gives
        and every global address of its interfaces. An address several nodes hold (docker0's
        172.17.0.1, loopback) names none of them."""
        held: dict[str, set[str]] = {}
        for name, node in self.inventory.items():
            held.setdefault(node.address or "", set()).add(name)
        for name, facts in self.nodes.items():
            if not isinstance(facts.net, Missing):
                for a in facts.net.ifaddrs:
                    if a.scope == "global":
                        held.setdefault(a.address, set()).add(name)
        return {a: next(iter(n)) for a, n in held.items() if len(n) == 1 and is_address(a)}


def nccl_logs(cluster: ClusterFacts) -> Iterator[tuple[str, dict[str, Any], dict[str, str]]]:
    """Every NCCL log the facts hold, given or the allreduce's ranks': (where from, the log as
    doctor/facts/nccl/log.py writes it, the log's host -> the doctor's node where known)."""
    for name, facts in cluster.nodes.items():
        log = None if isinstance(facts.nccl, Missing) else facts.nccl.log
        if log is not None:
            hosts = [u["host"] for u in log["nodes"]]
            yield "log", log, ({hosts[0]: name} if len(hosts) == 1 else {})
    allreduce = cluster.allreduce
    run = allreduce.runs[0] if isinstance(allreduce, AllreduceFacts) and allreduce.runs else None
    if run is not None and run.nccl:
        voice = next((r.nccl_voice for r in run.ranks if r.nccl_voice), {})
        asked = ", ".join([*(f"{x} on" for x in voice.get("on", ())), *voice.get("off", ())])
        where = f"allreduce {run.label}" + (f" ({asked})" if asked else "")
        yield where, run.nccl, {r.host: r.node for r in run.ranks if r.host}
