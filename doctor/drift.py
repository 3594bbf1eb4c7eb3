"""Drift across nodes: the one helper every cross-node consistency check uses."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator

from doctor.facts.cluster import ClusterFacts
from doctor.facts.node import NodeFacts
from doctor.model import Finding, Fix, Missing, Severity
from doctor.nodeset import Split, compact, split_by_value


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
