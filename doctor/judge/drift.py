"""Drift across nodes: the one helper every cross-node consistency check uses."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator

from doctor.core.model import Finding, Fix, Missing, Severity
from doctor.core.nodeset import Split, compact, split_by_value
from doctor.facts.cluster import ClusterFacts
from doctor.facts.node import NodeFacts
from doctor.plugin import Skip

# One value compared across nodes, and the value of a node that has none of the thing compared
# (an empty list joined as "none", 0 GPUs): nodes that all have nothing cannot differ in it.
Compared = tuple[Callable[[NodeFacts], Hashable | Missing], Hashable]
BASELINE = "--baseline"  # the baseline's place among the nodes compared (no node's name)


def values_by_node(
    cluster: ClusterFacts, value_of: Callable[[NodeFacts], Hashable | Missing]
) -> dict[str, Hashable]:
    """The value on each node where it could be read (nodes where it is Missing are left out)."""
    out: dict[str, Hashable] = {}
    for name, facts in cluster.nodes.items():
        value = value_of(facts)
        if not isinstance(value, Missing):
            out[name] = value
    return out


def find_drift(
    cluster: ClusterFacts, value_of: Callable[[NodeFacts], Hashable | Missing]
) -> Split[Hashable] | None:
    """Group nodes by value against the baseline node (if given) or the majority."""
    baseline = None
    if cluster.baseline is not None:
        value = value_of(cluster.baseline)
        baseline = None if isinstance(value, Missing) else value
    return split_by_value(values_by_node(cluster, value_of), baseline)


def need_drift(cluster: ClusterFacts, subject: str, *compared: Compared) -> None:
    """Skip the calling check unless one of the values can differ between nodes: two nodes (the
    baseline counts as one) have it, and one of them has something. A comparison of one node,
    or of nodes that all have none of the thing, would pass having judged nothing."""
    having: set[str] = set()
    for value_of, nothing in compared:
        found = values_by_node(cluster, value_of)
        base = value_of(cluster.baseline) if cluster.baseline is not None else None
        if base is not None and not isinstance(base, Missing):
            found[BASELINE] = base
        something = {n for n, v in found.items() if v != nothing}
        if len(found) >= 2 and something:
            return
        having |= something - {BASELINE}
    if len(cluster.nodes) + (cluster.baseline is not None) < 2:
        raise Skip("one node: nothing to compare across nodes")
    if not having:
        raise Skip(f"no node has {subject}")
    raise Skip(f"only {compact(having)} has {subject}: nothing to compare it with")


def drift_findings(
    cluster: ClusterFacts,
    value_of: Callable[[NodeFacts], Hashable | Missing],
    *,
    code: str,
    what: str,
    severity: Severity = Severity.FAIL,
    fix: Fix | None = None,
) -> Iterator[Finding]:
    """One finding per minority value: '<what> differs: node[3] has X, node[1-2,4] have Y'."""
    split = find_drift(cluster, value_of)
    if split is None:
        return
    source = "the baseline" if cluster.baseline is not None else "the majority"
    ref = f"{split.reference} ({source}"
    ref += f": {compact(split.reference_nodes)})" if split.reference_nodes else ")"
    for value, nodes in split.others.items():
        yield Finding(
            code,
            severity,
            f"{what} differs on {compact(nodes)}: {value} instead of {split.reference}",
            nodes=nodes,
            evidence=(f"{compact(nodes)}: {value}", f"expected {ref}"),
            fix=fix,
            data={"value": str(value), "expected": str(split.reference)},
        )
