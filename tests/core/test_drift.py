from __future__ import annotations

import dataclasses

from doctor.core.model import Missing
from doctor.facts.node import NodeFacts
from doctor.judge.drift import drift_findings, need_drift
from doctor.plugin import Skip
from tests.factkit import cluster, real

CAPTURE = "cpu-torch-wheel"  # a real capture of a CPU machine


def kernel(facts: NodeFacts) -> str | Missing:
    return facts.system.kernel if not isinstance(facts.system, Missing) else facts.system


def with_kernel(name: str, version: str) -> NodeFacts:
    base = real(CAPTURE, name)
    assert not isinstance(base.system, Missing)
    return dataclasses.replace(base, system=dataclasses.replace(base.system, kernel=version))


def test_minority_is_named_against_the_majority() -> None:
    c = cluster(
        with_kernel("node1", "6.1"), with_kernel("node2", "6.1"), with_kernel("node3", "5.15")
    )
    [f] = drift_findings(c, kernel, code="t.kernel", what="kernel")
    assert f.nodes == ("node3",)
    assert "5.15 instead of 6.1" in f.summary
    assert "the majority: node[1-2]" in f.evidence[1]


def test_baseline_wins_over_majority() -> None:
    c = cluster(
        with_kernel("node1", "6.1"),
        with_kernel("node2", "6.1"),
        with_kernel("node3", "5.15"),
        baseline=with_kernel("golden", "5.15"),
    )
    [f] = drift_findings(c, kernel, code="t.kernel", what="kernel")
    assert f.nodes == ("node1", "node2") and "the baseline" in f.evidence[1]


def test_missing_values_are_left_out_not_counted() -> None:
    c = cluster(with_kernel("a", "6.1"), real(CAPTURE, "b", system=Missing("x")))
    assert list(drift_findings(c, kernel, code="t.kernel", what="kernel")) == []


def test_nothing_to_compare_is_a_skip_with_the_reason() -> None:
    def why(c: object, nothing: object = None) -> str | None:
        try:
            need_drift(c, "a kernel", (kernel, nothing))  # type: ignore[arg-type]
        except Skip as skip:
            return skip.reason
        return None

    one = with_kernel("node1", "6.1")
    assert why(cluster(one)) == "one node: nothing to compare across nodes"
    assert why(cluster(one, baseline=with_kernel("golden", "6.1"))) is None
    assert why(cluster(one, with_kernel("node2", "6.1"))) is None
    blank = real(CAPTURE, "node3", system=Missing("x"))
    assert why(cluster(one, blank)) == "only node1 has a kernel: nothing to compare it with"
    assert why(cluster(one, with_kernel("node2", "6.1")), "6.1") == "no node has a kernel"
