"""Group testing's stage side, pure: when a run across every node calls for a search, how one
group's run reads as a trial, a group's plan, and the findings the allreduce check makes of a
search (naming only the nodes it pinned)."""

from __future__ import annotations

from checks.allreduce import CODES
from doctor.core.model import Severity
from doctor.facts.allreduce import AllreduceFacts, Plan, Rank, RunResult
from doctor.facts.allreduce_rank import RankState
from doctor.nodes.inventory import Node
from doctor.stages.allreduce.groups import group_plan, search_mode, slow_links, trial
from doctor.stages.allreduce.search import search
from tests.allreduce.stagekit import judge
from tests.allreduce.test_search import TEN_MBIT, Fleet, names

LINK = 256 << 10


def plan(n: int) -> Plan:
    return Plan(ranks=tuple(Rank(i, Node(f"node{i + 1}")) for i in range(n)), port=29500)


def done(rank: int, n: int, gbps: dict[int, float] | None = None) -> RankState:
    """A rank that passed, with its ring links' timings (both ways) at ``gbps`` (default 1)."""
    s = RankState(rank, f"node{rank + 1}", phase="done")
    s.verify = {"wrong": 0, "elems": 16}
    s.sweep = [{"bytes": 1 << 20, "time_s": 0.01}]
    for dst in ((rank + 1) % n, (rank - 1) % n):
        speed = min((gbps or {}).get(rank, 1.0), (gbps or {}).get(dst, 1.0))
        s.links.append({"src": rank, "dst": dst, "bytes": LINK, "time_s": LINK / speed / 1e9})
    return s


def passed(n: int, gbps: dict[int, float] | None = None) -> RunResult:
    return RunResult("as configured", plan(n), "passed", [done(i, n, gbps) for i in range(n)], 1.0)


def failed(n: int) -> RunResult:
    ranks = [done(i, n) for i in range(n - 1)]
    ranks.append(
        RankState(n - 1, f"node{n}", error="ssh: connect timed out", failed_phase="launch")
    )
    return RunResult("as configured", plan(n), "failed", ranks, 3.0)


def test_a_failed_run_calls_for_a_fail_search_unless_the_recommendation_passes() -> None:
    assert search_mode((failed(8),)) == "fail"
    recommended = passed(8)
    recommended.label = "as recommended"
    assert search_mode((failed(8), recommended)) is None


def test_a_run_with_a_far_slower_link_calls_for_a_slow_search() -> None:
    slow = passed(8, {4: TEN_MBIT})
    assert {(r["src"], r["dst"]) for r in slow_links(slow)} == {
        ("node5", "node4"),
        ("node5", "node6"),
        ("node4", "node5"),
        ("node6", "node5"),
    }
    assert search_mode((slow,)) == "slow"
    # Half as fast is noise on a loaded machine, not a search.
    assert search_mode((passed(8, {4: 0.5}),)) is None
    assert search_mode((passed(8),)) is None


def test_a_slow_link_that_waited_for_a_cpu_is_not_a_search() -> None:
    slow = passed(8, {4: TEN_MBIT})
    for r in slow.ranks:
        for link in r.links:
            link["waited_s"] = link["time_s"]
    assert slow_links(slow) == [] and search_mode((slow,)) is None


def test_a_slow_start_proves_nothing_and_searches_nothing() -> None:
    ranks = [RankState(i, f"node{i + 1}", phase="launch") for i in range(8)]
    run = RunResult("as configured", plan(8), "timeout", ranks, 30.0)
    assert run.slow_start
    assert search_mode((run,)) is None
    assert trial(run).passed is None


def test_a_group_run_reads_as_a_trial() -> None:
    good = trial(passed(4))
    assert good.passed is True and good.busbw_gbps is not None
    assert abs(good.busbw_gbps - (1 << 20) / 0.01 / 1e9 * 2 * 3 / 4) < 1e-9
    bad = trial(failed(4))
    assert bad.passed is False and "rank 3 (node4)" in bad.headline
    # Rank 0 had not answered yet, and did not fail: nothing proved.
    silent = RunResult("group", plan(4), "not_started", [RankState(0, "node1")], 30.0)
    assert trial(silent).passed is None


def test_a_group_plan_renumbers_its_ranks_and_sends_one_size() -> None:
    sub = group_plan(plan(8), ("node3", "node7"))
    assert [(r.rank, r.node.name) for r in sub.ranks] == [(0, "node3"), (1, "node7")]
    assert sub.sizes == (1 << 20,) and sub.master.name == "node3" and sub.port == 29500


def test_a_larger_group_sends_more_so_its_steps_carry_as_much() -> None:
    # 2(n-1) meetings a ring: latency grows with the group, a slow link's share does not.
    sizes = {
        n: group_plan(plan(n), tuple(f"node{i + 1}" for i in range(n))).sizes
        for n in (8, 16, 32, 64)
    }
    assert sizes == {8: (1 << 20,), 16: (2 << 20,), 32: (4 << 20,), 64: (4 << 20,)}


def judged(found: object) -> list:
    facts = AllreduceFacts("gloo", 8, "node1", 29500, "python3", "node1:29500")
    facts = AllreduceFacts(**{**facts.__dict__, "runs": (passed(8),), "search": found})
    return [f for f in judge(facts) if f.code in CODES]


def test_a_node_found_failing_is_named_alone_with_how_long_it_took() -> None:
    found = search(names(8), Fleet(bad=["node6"]))
    (finding,) = judged(found)
    assert finding.code == "allreduce.bad_node" and finding.severity is Severity.FAIL
    assert finding.nodes == ("node6",)
    assert f"group testing of 8 nodes: {found.rounds} rounds, {len(found.tests)} tests" in (
        finding.summary
    )
    assert "known good" in finding.summary and "rank 1 never started" in finding.summary
    assert all("node6" in line for line in finding.evidence)
    assert finding.fix is not None and finding.fix.commands[0].endswith(",node6")


def test_a_node_found_slow_is_named_alone_with_its_speed() -> None:
    found = search(names(8), Fleet(slow=["node2"]), mode="slow")
    (finding,) = judged(found)
    assert finding.code == "allreduce.slow_member" and finding.nodes == ("node2",)
    assert "Mbit/s" in finding.summary and finding.severity is Severity.FAIL


def test_a_bad_pair_is_one_finding_naming_both() -> None:
    found = search(names(8), Fleet(pairs=[("node2", "node7")]))
    (finding,) = judged(found)
    assert finding.code == "allreduce.bad_pair" and finding.nodes == ("node2", "node7")


def test_a_search_that_pins_nothing_names_no_node() -> None:
    found = search(names(8), Fleet(bad=names(8)))
    (finding,) = judged(found)
    assert finding.code == "allreduce.search_unresolved" and finding.nodes == ()
    assert finding.severity is Severity.INFO and "every group failed alike" in finding.summary


def test_the_section_carries_the_search() -> None:
    found = search(names(8), Fleet(bad=["node1"]))
    facts = AllreduceFacts("gloo", 8, "node1", 29500, "python3", "node1:29500", search=found)
    section = facts.section()["search"]
    assert section["bad_nodes"] == ["node1"] and section["rounds"] == found.rounds
    assert not facts.interrupted
