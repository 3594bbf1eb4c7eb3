from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from doctor.core.model import Finding, Missing, Severity, Status
from doctor.facts.cluster import ClusterFacts
from doctor.facts.node import NodeFacts
from doctor.judge.report import merge_findings
from doctor.judge.runner import run_checks
from doctor.nodes.inventory import Node
from doctor.plugin import cluster_check, need, node_check
from tests.factkit import cluster, real

CAPTURE = "cpu-torch-wheel"  # a real capture of a CPU machine


@node_check("t.boom", "raises", codes={})
def boom(facts: NodeFacts) -> Iterator[Finding]:
    raise RuntimeError("parser bug")
    yield


@node_check("t.needs", "needs limits", needs=("limits",), codes={"t.x": "x"})
def needs_limits(facts: NodeFacts) -> Iterator[Finding]:
    yield Finding("t.x", Severity.WARN, "limits seen")


@node_check("t.need_call", "calls need()", codes={"t.y": "y"})
def need_call(facts: NodeFacts) -> Iterator[Finding]:
    need(facts.system, "system")
    yield Finding("t.y", Severity.FAIL, "system seen")


@node_check("t.undeclared", "emits an undeclared code", codes={"t.ok": "ok"})
def undeclared(facts: NodeFacts) -> Iterator[Finding]:
    yield Finding("t.other", Severity.INFO, "oops")


@cluster_check("t.cluster", "names nodes", codes={"t.c": "c"})
def cluster_wide(c: ClusterFacts) -> Iterator[Finding]:
    yield Finding("t.c", Severity.INFO, "seen", nodes=tuple(c.nodes))


def test_a_raising_check_is_a_crash_outcome_not_a_crash() -> None:
    [outcome] = run_checks([boom], cluster(real(CAPTURE, "a")))
    assert outcome.status is Status.CRASH
    assert "RuntimeError: parser bug" in outcome.reason


def test_missing_needed_area_skips_with_the_reason() -> None:
    gone = Missing("statvfs(/dev/shm) failed", "unreadable")
    outcomes = run_checks(
        [needs_limits], cluster(real(CAPTURE, "a"), real(CAPTURE, "b", limits=gone))
    )
    by_node = {o.node: o for o in outcomes}
    assert by_node["a"].status is Status.WARN
    assert by_node["b"].status is Status.SKIP
    assert "statvfs(/dev/shm) failed" in by_node["b"].reason


def test_need_inside_a_check_skips() -> None:
    [outcome] = run_checks([need_call], cluster(real(CAPTURE, "a", system=Missing("no uname"))))
    assert outcome.status is Status.SKIP and outcome.reason == "system: no uname"


def test_undeclared_code_is_refused() -> None:
    [outcome] = run_checks([undeclared], cluster(real(CAPTURE, "a")))
    assert outcome.status is Status.CRASH and "t.other" in outcome.reason


def test_node_findings_get_check_and_node_and_merge_across_nodes() -> None:
    outcomes = run_checks(
        [needs_limits, cluster_wide], cluster(real(CAPTURE, "n1"), real(CAPTURE, "n2"))
    )
    merged = merge_findings(outcomes)
    warn = next(f for f in merged if f.code == "t.x")
    assert warn.check == "t.needs" and warn.nodes == ("n1", "n2")
    assert [f.severity for f in merged] == sorted((f.severity for f in merged), reverse=True)


def test_different_summaries_stay_separate() -> None:
    outcomes = run_checks([needs_limits], cluster(real(CAPTURE, "n1"), real(CAPTURE, "n2")))
    changed = dataclasses.replace(
        outcomes[1],
        findings=(dataclasses.replace(outcomes[1].findings[0], summary="other"),),
    )
    assert len(merge_findings([outcomes[0], changed])) == 2


@node_check("t.peer", "names a peer by address", codes={"t.peer": "a peer"})
def names_a_peer(facts: NodeFacts) -> Iterator[Finding]:
    # node1's own address stays as it is; node2's is named; docker0's, held by both, names none.
    yield Finding("t.peer", Severity.WARN, "from 192.0.2.2 to 198.18.0.2 (172.17.0.1)")


def test_a_peer_named_by_address_is_named_by_node() -> None:
    one, two = real("debian12-bare", "node1"), real("debian12-bare", "node2")
    c = dataclasses.replace(
        cluster(one, two),
        inventory={"node1": Node("node1", "192.0.2.2"), "node2": Node("node2", "198.18.0.2")},
    )
    # Both captures hold 192.0.2.2 on eth0: held by two nodes, it is nobody's.
    assert c.address_owners == {"198.18.0.2": "node2"}
    summaries = {o.node: o.findings[0].summary for o in run_checks([names_a_peer], c)}
    assert summaries == {
        "node1": "from 192.0.2.2 to node2 (198.18.0.2) (172.17.0.1)",
        "node2": "from 192.0.2.2 to 198.18.0.2 (172.17.0.1)",
    }
