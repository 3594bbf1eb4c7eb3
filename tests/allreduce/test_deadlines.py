"""--launch-timeout: what a user gives the ranks' start beyond its default, their process group's
set-up gets too (issue 38: on 128 nodes of this machine's 2 cores the start was given 240 s, and
51 ranks then missed the process group's fixed 20 s)."""

from __future__ import annotations

from doctor.facts.allreduce import Deadlines
from doctor.nodes.inventory import Node
from doctor.pipeline.request import AllreduceSettings
from doctor.pipeline.steps import job_for
from tests import factkit as fk


def _deadlines(**settings: float) -> Deadlines:
    nodes = [fk.node("node1"), fk.node("node2")]
    inventory = [Node(n.node, address=f"10.0.0.{i}") for i, n in enumerate(nodes, 1)]
    job = job_for(AllreduceSettings(**settings), inventory, {n.node: n for n in nodes}, "python3")
    return job.deadlines


def test_the_default_start_keeps_every_deadline() -> None:
    assert _deadlines() == Deadlines()


def test_a_longer_start_gives_the_process_groups_set_up_as_much_more() -> None:
    longer = _deadlines(launch_timeout=240.0)
    assert (longer.launch, longer.init) == (240.0, Deadlines.init + 210.0)
    assert longer.verify == Deadlines.verify  # the collectives themselves are not the start's


def test_a_shorter_start_shortens_nothing_else() -> None:
    shorter = _deadlines(launch_timeout=12.0)
    assert (shorter.launch, shorter.init) == (12.0, Deadlines.init)
