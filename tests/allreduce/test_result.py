"""Folding worker lines into rank states, and judging a run: pure, no processes."""

from __future__ import annotations

import pytest

from checks.allreduce import verdict
from doctor.core.model import Severity
from doctor.facts.allreduce import AllreduceFacts, Plan, Rank, RunResult
from doctor.facts.allreduce_rank import RankState
from doctor.nodes.inventory import Node
from doctor.stages.allreduce.stage import with_logs
from tests.allreduce.stagekit import judge


def plan(n: int) -> Plan:
    return Plan(ranks=tuple(Rank(i, Node(f"node{i + 1}")) for i in range(n)), port=29500)


def state(rank: int, *events: dict[str, object]) -> RankState:
    s = RankState(rank, f"node{rank + 1}")
    for at, event in enumerate(events):
        s.apply(event, float(at))
    return s


def phases(*names: str) -> list[dict[str, object]]:
    return [{"ev": "phase", "phase": p} for p in names]


def test_phase_lines_fold_into_the_last_phase_and_the_launch_details() -> None:
    s = state(
        0,
        {"ev": "phase", "phase": "launch", "host": "node1", "pid": 42, "env": {"A": "1"}},
        *phases("rendezvous", "init"),
        {"ev": "fail", "phase": "init", "error": "RuntimeError: boom"},
    )
    assert (s.phase, s.host, s.pid, s.env) == ("init", "node1", 42, {"A": "1"})
    assert s.failed and s.failed_phase == "init" and not s.done


def test_unknown_phase_names_are_ignored() -> None:
    s = state(0, *phases("launch", "warp-drive"))
    assert s.phase == "launch"


def test_the_rank_that_got_least_far_is_named_with_the_rendezvous() -> None:
    ranks = [
        state(0, *phases("launch", "rendezvous", "init")),
        state(1, *phases("launch", "rendezvous", "init")),
        state(2, *phases("launch", "rendezvous")),
    ]
    run = RunResult("as configured", plan(3), "timeout", ranks, 9.0)
    assert [r.rank for r in run.behind()] == [2]
    assert run.headline() == (
        "as configured: timeout: rank 2 (node3) never joined the rendezvous at node1:29500"
    )


def test_a_rank_that_never_printed_is_reported_with_its_exit_and_stderr() -> None:
    silent = RankState(1, "node2", exit_code=127, stderr="sh: python9: not found\n")
    run = RunResult("as configured", plan(2), "failed", [state(0, *phases("launch")), silent], 1)
    assert (
        run.sentence(silent)
        == "rank 1 (node2) never started: exit status 127, sh: python9: not found"
    )


def sweep_state(rank: int, rows: list[tuple[int, float]]) -> RankState:
    return state(rank, *({"ev": "sweep", "bytes": b, "time_s": t} for b, t in rows))


def test_sweep_rows_use_the_slowest_rank_and_nccl_tests_bus_bandwidth() -> None:
    ranks = [
        sweep_state(0, [(1 << 20, 0.001), (4 << 20, 0.004)]),
        sweep_state(1, [(1 << 20, 0.002), (4 << 20, 0.004)]),
        sweep_state(2, [(1 << 20, 0.001), (4 << 20, 0.008)]),
        sweep_state(3, [(1 << 20, 0.001)]),  # never finished 4 MiB: that size is dropped
    ]
    rows = RunResult("r", plan(4), "passed", ranks, 1).sweep_rows()
    assert [r["bytes"] for r in rows] == [1 << 20]
    (row,) = rows
    assert row["slowest_rank"] == 1 and row["time_s"] == 0.002
    assert row["algbw_gbps"] == pytest.approx((1 << 20) / 0.002 / 1e9)
    assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"] * 2 * 3 / 4)


def links(
    n: int,
    slow: dict[tuple[int, int], float],
    size: int = 1 << 20,
    waited: dict[tuple[int, int], float] | None = None,
) -> list[RankState]:
    """Ring links both ways, reported by their senders; 1 ms each unless ``slow`` says otherwise;
    ``waited``: how long the link's ends waited for a CPU meanwhile (0 unless it says)."""
    ranks = []
    for src in range(n):
        events = []
        for dst in ((src + 1) % n, (src - 1) % n):
            t = slow.get((src, dst), 0.001)
            wait = (waited or {}).get((src, dst), 0.0)
            events.append(
                {"ev": "link", "src": src, "dst": dst, "bytes": size, "time_s": t, "waited_s": wait}
            )
        ranks.append(state(src, *events))
    return ranks


def test_a_node_shaped_both_ways_is_named() -> None:
    slow = {(2, 0): 1.0, (2, 1): 1.0, (0, 2): 1.0, (1, 2): 1.0}
    found = RunResult("r", plan(3), "passed", links(3, slow), 1).slow_node()
    assert found is not None and found[0] == "node3"


def test_a_node_shaped_only_on_egress_is_named() -> None:
    found = RunResult("r", plan(3), "passed", links(3, {(2, 0): 1.0, (2, 1): 1.0}), 1).slow_node()
    assert found is not None and found[0] == "node3"


def test_even_links_or_two_nodes_name_nobody() -> None:
    assert RunResult("r", plan(3), "passed", links(3, {}), 1).slow_node() is None
    assert RunResult("r", plan(2), "passed", links(2, {(1, 0): 1.0}), 1).slow_node() is None


def test_small_transfers_name_nobody() -> None:
    slow = {(2, 0): 1.0, (2, 1): 1.0}
    ranks = links(3, slow, size=4096)
    assert RunResult("r", plan(3), "passed", ranks, 1).slow_node() is None


def test_each_link_is_judged_by_its_best_measurement() -> None:
    ranks = links(3, {(2, 0): 1.0, (2, 1): 1.0})
    hiccup = links(3, {(2, 0): 1.0, (2, 1): 1.0, (0, 1): 5.0})  # node1->node2 stalled once
    for r, again in zip(ranks, hiccup, strict=True):
        r.links.extend(again.links)
    found = RunResult("r", plan(3), "passed", ranks, 1).slow_node()
    assert found is not None and found[0] == "node3"


def test_a_rank_whose_node_died_is_named_not_the_ranks_stopped_after_it() -> None:
    # The fault matrix: node3 lost power while every rank was importing torch; the controller
    # then stopped the other two, which had done nothing wrong.
    ranks = [state(0, *phases("launch")), state(1, *phases("launch")), state(2, *phases("launch"))]
    ranks[2].exit_code = -1
    run = RunResult("as configured", plan(3), "failed", ranks, 3.0)
    assert [r.rank for r in run.behind()] == [2]
    assert run.headline().startswith("as configured: failed: rank 2 (node3) never started")


def test_a_node_starved_of_cpu_not_of_link_is_not_named() -> None:
    # node3's transfers took 10 ms, 8 of them waiting for a CPU (a loaded machine): not its link.
    slow = {(2, 0): 0.01, (2, 1): 0.01}
    ranks = links(3, slow, waited={(2, 0): 0.008, (2, 1): 0.008})
    assert RunResult("r", plan(3), "passed", ranks, 1).slow_node() is None
    # Whatever is left of a node's timings decides; a node left with none one way is not judged.
    rows = RunResult("r", plan(3), "passed", ranks, 1).link_rows()
    assert sorted(r["cpu_bound"] for r in rows) == [False] * 4 + [True] * 2


def test_a_shaped_link_that_waited_a_little_is_still_named() -> None:
    slow = {(2, 0): 1.0, (2, 1): 1.0}
    ranks = links(3, slow, waited={(2, 0): 0.05, (2, 1): 0.05})
    found = RunResult("r", plan(3), "passed", ranks, 1).slow_node()
    assert found is not None and found[0] == "node3"


def test_fast_links_that_waited_for_a_cpu_still_set_the_typical_speed() -> None:
    # CI on 2 cores: the healthy links took 1 ms, most of it waiting for a CPU; node3's 10 Mbit/s
    # link took 1 s and barely waited. The healthy links still say how fast the network is.
    slow = {(2, 0): 1.0, (2, 1): 1.0}
    healthy = {(0, 1): 0.0008, (1, 0): 0.0008, (0, 2): 0.0008, (1, 2): 0.0008}
    ranks = links(3, slow, waited={**healthy, (2, 0): 0.01, (2, 1): 0.01})
    found = RunResult("r", plan(3), "passed", ranks, 1).slow_node()
    assert found is not None and found[0] == "node3"


def timed_out(*ranks: RankState) -> AllreduceFacts:
    run = RunResult("as configured", plan(len(ranks)), "timeout", list(ranks), 32.0)
    return AllreduceFacts("gloo", len(ranks), "node1", 29500, "python3", "node1:29500", runs=(run,))


READY = {"ev": "ready"}  # the worker imported torch and waits for the word to go


def test_most_ranks_still_importing_torch_is_a_slow_start_that_blames_no_node() -> None:
    facts = timed_out(
        state(0, *phases("launch"), READY),
        state(1, *phases("launch")),
        state(2, *phases("launch")),
        RankState(3, "node4"),  # its process had not printed yet
    )
    (finding,) = verdict(facts)
    assert (finding.code, finding.severity, finding.nodes) == (
        "allreduce.slow_start",
        Severity.WARN,
        (),
    )
    assert finding.summary == (
        "as configured: not run: 3 of 4 ranks were still starting (import torch) after 30s; "
        "the other 1 had in at most 1.0s (median 1.0s)"
    )
    assert finding.evidence[0] == "rank 1 (node2) started but had not imported torch within 30s"
    assert finding.evidence[2] == "rank 3 (node4) never started within 30s"
    assert finding.fix is not None and "--launch-timeout 120" in finding.fix.commands[0]


def test_a_few_ranks_slow_to_import_torch_are_a_warning_that_names_them() -> None:
    facts = timed_out(
        state(0, *phases("launch"), READY),
        state(1, *phases("launch"), READY),
        state(2, *phases("launch"), READY),
        state(3, *phases("launch")),
    )
    (finding,) = verdict(facts)
    assert (finding.code, finding.severity, finding.nodes) == (
        "allreduce.slow_start",
        Severity.WARN,
        ("node4",),
    )
    assert finding.fix is not None and finding.fix.text.startswith("node4 started far slower")
    run = facts.runs[0]
    assert [r.rank for r in run.behind()] == [3]
    assert run.sentence(run.ranks[0]) == (
        "rank 0 (node1) imported torch in 1.0s and waited for the others"
    )
    assert [r["start_s"] for r in run.to_json()["ranks"]] == [1.0, 1.0, 1.0, None]


def test_rank_zero_slow_to_start_is_the_cause_and_its_store_not_a_finding() -> None:
    # The other ranks could not reach a store that rank 0 had not set up yet: that is rank 0's
    # slow start, never the store's address (the fix would send the user to MASTER_ADDR).
    unreached = {
        "ev": "fail",
        "phase": "rendezvous",
        "error": "DistNetworkError: The client socket has timed out after 15000ms while "
        "trying to connect to (198.18.10.1, 29500).",
    }
    ranks = [
        state(0, *phases("launch", "rendezvous")),
        state(1, *phases("launch"), READY, *phases("rendezvous"), unreached),
        state(2, *phases("launch"), READY, *phases("rendezvous")),
    ]
    run = with_logs(RunResult("as configured", plan(3), "failed", ranks, 20.0), "gloo")
    assert not run.store_up and [r.rank for r in run.behind()] == [0]
    facts = AllreduceFacts("gloo", 3, "node1", 29500, "python3", "node1:29500", runs=(run,))
    codes = {f.code: f.nodes for f in judge(facts)}
    assert codes == {"allreduce.failed": ("node1",)}
    # Once the store listened, the same words from a rank are the store's unreachable address.
    ranks[0].apply({"ev": "phase", "phase": "init"}, 5.0)
    run = with_logs(RunResult("as configured", plan(3), "failed", ranks, 20.0), "gloo")
    facts = AllreduceFacts("gloo", 3, "node1", 29500, "python3", "node1:29500", runs=(run,))
    codes = {f.code: f.nodes for f in judge(facts)}
    assert codes["allreduce.failed"] == ("node2",) and "torch.store.connect_timeout" in codes


def test_a_rank_that_failed_at_launch_is_not_counted_as_slow() -> None:
    no_torch = {"ev": "fail", "phase": "launch", "error": "torch is not importable: No module"}
    facts = timed_out(
        state(0, *phases("launch")),
        state(1, *phases("launch"), no_torch),
        state(2, *phases("launch"), no_torch),
    )
    (finding,) = verdict(facts)
    assert finding.code == "allreduce.timeout" and finding.nodes == ("node2", "node3")


def test_a_rank_gone_while_importing_torch_is_named_for_that() -> None:
    ranks = [state(0, *phases("launch"), READY), state(1, *phases("launch"), READY)]
    ranks.append(state(2, *phases("launch")))
    ranks[2].error, ranks[2].failed_phase, ranks[2].gone = "silent: gone", "launch", True
    run = RunResult("as configured", plan(3), "failed", ranks, 12.0)
    assert not run.slow_start and [r.rank for r in run.behind()] == [2]
    assert run.sentence(ranks[2]) == (
        "rank 2 (node3) started, then went while it imported torch: silent: gone"
    )
    (finding,) = verdict(AllreduceFacts("gloo", 3, "node1", 29500, "python3", "", runs=(run,)))
    assert (finding.code, finding.nodes) == ("allreduce.failed", ("node3",))
    assert finding.fix is not None and "scontrol show node node3" in finding.fix.commands[1]
