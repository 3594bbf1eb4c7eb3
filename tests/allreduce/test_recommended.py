"""When the allreduce is tried again as recommended: only where that can tell something."""

from __future__ import annotations

from doctor.facts.allreduce import Plan, Rank, RunResult
from doctor.facts.allreduce_rank import RankState
from doctor.nodes.inventory import Node
from doctor.stages.allreduce.stage import Job, try_recommended

NODES = (Node("n1"), Node("n2"))
ADVICE = {"GLOO_SOCKET_IFNAME": "eth0"}


def run(status: str, wrong: int | None, phase: str = "init") -> RunResult:
    """Both ranks stopped in ``phase`` (a wrong interface hangs init), or verified the sum."""
    verify = {} if wrong is None else {"wrong": wrong, "elems": 1024}
    ranks = [
        RankState(i, n.name, phase, host=n.name, env={"GLOO_SOCKET_IFNAME": None}, verify=verify)
        for i, n in enumerate(NODES)
    ]
    plan = Plan(ranks=tuple(Rank(i, n) for i, n in enumerate(NODES)))
    return RunResult("as configured", plan, status, ranks, 1.0)


def test_a_run_that_failed_before_the_sum_was_verified_is_tried_as_recommended() -> None:
    job = Job(NODES, recommendation=ADVICE, recommendation_changes=False)
    assert try_recommended(run("timeout", None), job)
    assert try_recommended(run("failed", 3), job)  # a wrong sum is no proof either


def test_a_run_that_verified_and_then_overran_is_not_run_again() -> None:
    # A slow link in the sweep: the interfaces are proven, a second variant would only take as
    # long again (a 1 Mbit/s link with forced sizes ran past 150 s this way).
    job = Job(NODES, recommendation=ADVICE, recommendation_changes=False)
    assert not try_recommended(run("timeout", 0), job)
    # ...unless the recommendation changes what the libraries choose: then it is worth knowing.
    assert try_recommended(run("timeout", 0), Job(NODES, recommendation=ADVICE))


def test_nothing_to_try_when_interrupted_or_already_as_recommended() -> None:
    job = Job(NODES, recommendation=ADVICE)
    assert not try_recommended(run("interrupted", None), job)
    assert not try_recommended(run("failed", None), Job(NODES, recommendation={}))


def test_a_run_whose_ranks_were_still_importing_torch_is_not_run_again() -> None:
    # Every rank would be as slow to start again: the second run would only double the wait.
    job = Job(NODES, recommendation=ADVICE)
    assert not try_recommended(run("timeout", None, phase="launch"), job)
    assert try_recommended(run("timeout", None, phase="rendezvous"), job)


def test_a_run_that_lost_a_rank_is_not_run_again() -> None:
    # Its process or its node went (srun told no exit, its heartbeats stopped): no variable
    # brings it back, and the second run only waited for it again (about 8 s).
    job = Job(NODES, recommendation=ADVICE)
    lost = run("failed", None)
    lost.ranks[1].gone = True
    assert not try_recommended(lost, job)
