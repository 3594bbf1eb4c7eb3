"""The hang verdicts on what a real GPU said: two NCCL ranks on one H200 and on one H100
(tests/fixtures/gpu/h200, h100: hang-*), their py-spy stacks, Flight Recorder dumps and RAS
answers, as the stacks agent hands them over (doctor/facts/hang/flight_dump.py turns a dump into
plain values). One rank misbehaves in each."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from checks.hang import hang
from doctor.facts.cluster import ClusterFacts
from doctor.facts.hang.flight_dump import read_dump
from doctor.facts.hang.shape import hang_view
from doctor.facts.hang.stacks import StacksFacts, parse_node

GPU = Path(__file__).parents[1] / "fixtures" / "gpu"
H200 = GPU / "h200"
PIDS = {
    "h200": {"sleep": (935, 936), "op": (1002, 1003), "size": (1074, 1075), "kill": (1144, 1145)},
    "h100": {"sleep": (857, 858), "op": (925, 926), "size": (997, 998), "kill": (1068, 1069)},
}
# tests/hang/job.py's lines when each was captured: the allreduce, the sleep, the broadcast.
LINES = {"h200": (50, 71, 81), "h100": (67, 88, 98)}
GPUS = pytest.mark.parametrize("gpu", ["h200", "h100"])


def _flight(path: Path) -> dict[str, Any] | None:
    return read_dump(path.read_bytes()) if path.exists() else None


def answer(mode: str, ras_form: str = "json", gpu: str = "h200") -> dict[str, Any]:
    """The agent's answer for the one node (the capture's ranks, as the agent reports them)."""
    here = GPU / gpu / f"hang-{mode}"
    processes = []
    for rank, pid in enumerate(PIDS[gpu][mode]):
        stack = here / f"pyspy-rank{rank}.json"
        if not stack.exists():
            continue  # the killed rank: no process any more
        env = {"RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1"}
        processes.append(
            {
                "pid": pid,
                "role": "rank",
                "argv": ["python3", "tests/hang/job.py", "--mode", mode],
                "env": env | {"MASTER_PORT": "29610"},
                "stack": {"threads": json.loads(stack.read_text())},
                "fr": _flight(here / f"fr_{rank}"),
                "nccl": True,
            }
        )
    body = (here / f"ras-status.{'json' if ras_form == 'json' else 'txt'}").read_text()
    ras = {"format": ras_form, "body": body.split("----\n", 1)[1]}
    return {"node": "vm", "machine": "x86_64", "tool": {"how": "node"}, "processes": processes,
            "ras": ras}  # fmt: skip


def facts(mode: str, ras_form: str = "json", gpu: str = "h200") -> StacksFacts:
    return StacksFacts({"vm": parse_node("vm", answer(mode, ras_form, gpu))})


@GPUS
@pytest.mark.parametrize("ras_form", ["json", "text"])
def test_a_sleeping_rank_is_named_by_flight_recorder_and_ras(ras_form: str, gpu: str) -> None:
    view = hang_view(facts("sleep", ras_form, gpu), "rendezvous 127.0.0.1:29610")
    assert view.shape() == "outside"
    (odd,) = view.odd
    assert odd.process.rank == 1 and f"job.py:{LINES[gpu][1]}" in odd.position.describe()
    assert "up to collective #3, the others wait in #4 (Flight Recorder)" in odd.why
    assert "launched 3 AllReduce operations, the others up to 4 (NCCL RAS)" in odd.why
    (waiting,) = view.waiting
    assert [r.rank for r in waiting.ranks] == [0] and waiting.position.op == "all_reduce"


@GPUS
def test_a_broadcast_against_an_allreduce_is_a_mismatch_with_both_call_sites(gpu: str) -> None:
    view = hang_view(facts("op", gpu=gpu), "rendezvous 127.0.0.1:29610")
    assert view.shape() == "mismatch" and view.mismatch is not None
    assert view.mismatch.what == "op" and view.mismatch.source == "Flight Recorder"
    sides = {label: [r.rank for r in ranks] for label, ranks in view.mismatch.sides.items()}
    allreduce, _, broadcast = LINES[gpu]
    assert sides == {
        f"all_reduce at job.py:{allreduce} allreduce": [0],
        f"broadcast at job.py:{broadcast} <module>": [1],
    }


@GPUS
def test_different_sizes_are_a_mismatch_that_only_flight_recorder_sees(gpu: str) -> None:
    view = hang_view(facts("size", gpu=gpu), "rendezvous 127.0.0.1:29610")
    assert view.ras is not None and view.ras.lags == []  # RAS: the counts agree
    assert view.mismatch is not None and view.mismatch.what == "sizes"
    line = LINES[gpu][0]
    assert sorted(view.mismatch.sides) == [
        f"all_reduce [[1024]] at job.py:{line} allreduce",
        f"all_reduce [[2048]] at job.py:{line} allreduce",
    ]


@GPUS
@pytest.mark.parametrize("ras_form", ["json", "text"])
def test_a_killed_rank_is_gone_and_the_other_waits(ras_form: str, gpu: str) -> None:
    view = hang_view(facts("kill", ras_form, gpu), "rendezvous 127.0.0.1:29610")
    assert view.shape() == "gone"
    (gone,) = view.gone
    assert gone.rank == 1
    (waiting,) = view.waiting
    assert [r.rank for r in waiting.ranks] == [0]


@GPUS
def test_the_check_names_only_the_odd_rank(gpu: str) -> None:
    cluster = ClusterFacts(nodes={}, stacks=facts("sleep", gpu=gpu))
    (finding,) = list(hang.fn(cluster))
    assert finding.code == "hang.outside_collective" and finding.nodes == ("vm",)
    assert finding.data["ranks"] == [1]


def agent(mode: str) -> StacksFacts:
    """The stacks agent's own answer on the H200 (no Flight Recorder entries: see the README)."""
    doc = json.loads((H200 / "doctor" / f"agent-{mode}.json").read_text())
    return StacksFacts({"vm": parse_node("vm", doc)})


def test_the_agents_answer_on_the_gpu_names_the_sleeping_rank_by_ras() -> None:
    facts = agent("sleep")
    (view,) = [hang_view(facts, job) for job in facts.jobs()]
    (odd,) = view.odd
    assert odd.process.rank == 1 and odd.position.doing == "sleeping"  # wchan: hrtimer_nanosleep
    assert "(NCCL RAS)" in odd.why


def test_ras_alone_names_a_broadcast_against_an_allreduce() -> None:
    facts = agent("op")
    (view,) = [hang_view(facts, job) for job in facts.jobs()]
    assert view.mismatch is not None and view.mismatch.source == "NCCL RAS"
    sides = {label: [r.rank for r in ranks] for label, ranks in view.mismatch.sides.items()}
    assert sides == {"Broadcast #1 (NCCL RAS)": [1], "AllReduce #4 (NCCL RAS)": [0]}


def test_a_rank_waiting_on_nccl_spins_and_is_not_called_moving() -> None:
    """Rank 0 waits in .item() for the allreduce: its CPU time grows by a core a second, its
    I/O by RAS's chatter only; neither is progress."""
    facts = agent("sleep")
    rank0 = next(r for r in facts.ranks() if r.rank == 0)
    assert rank0.first and rank0.last and rank0.last.cpu_ticks - rank0.first.cpu_ticks > 100
    (view,) = [hang_view(facts, job) for job in facts.jobs()]
    assert view.moving == ()


def test_the_killed_rank_is_placed_on_the_node_ras_saw_it_on() -> None:
    """RAS lost rank 1 "on 192.0.2.2": the H200's eth0 (its probe capture says so). The agent
    that took this answer did not yet report the node's addresses; the one that does places it."""
    doc = json.loads((H200 / "doctor" / "agent-kill.json").read_text())
    facts = StacksFacts({"vm": parse_node("vm", doc)})
    (before,) = hang_view(facts, facts.jobs()[0]).gone
    assert (before.rank, before.node) == (1, None)
    assert "no process holds rank 1 of 2; NCCL RAS lost it (process 762 on 192.0.2.2)" in before.why
    probe = json.loads((H200 / "probe.json").read_text())
    assert "192.0.2.2" in json.dumps(probe)
    facts = StacksFacts({"vm": parse_node("vm", doc | {"addresses": ["192.0.2.2"]})})
    (gone,) = hang_view(facts, facts.jobs()[0]).gone
    assert (gone.rank, gone.node) == (1, "vm")
