"""The hang model on its own (doctor/facts/hang/): which rank is behind by Flight Recorder's
status, the shapes text can give (every rank at its first collective, one rank's text only), and
the findings' contract (data.ranks: the cause only). The dumps here are written in Flight
Recorder's format (pg_status, entries: torch/csrc/distributed/c10d/FlightRecorder.hpp), as the
stacks agent hands them over; the real H200 dumps are in tests/hang/test_gpu_captures.py."""

from __future__ import annotations

from typing import Any

from checks.hang import verdict
from doctor.facts.hang.shape import hang_view
from doctor.facts.hang.stacks import JobProcess, NodeStacks, StacksFacts, Told


def dump(enqueued: int, completed: int, waits: list[tuple[int, str, int]]) -> dict[str, Any]:
    entries = [
        {
            "process_group": ["0", "default_pg"],
            "collective_seq_id": seq,
            "profiling_name": f"nccl:{op}",
            "input_sizes": [[size]],
            "state": "scheduled",
            "frames": [],
        }
        for seq, op, size in waits
    ]
    status = {"last_enqueued_collective": enqueued, "last_completed_collective": completed}
    return {"pg_status": {"0": status}, "entries": entries}


def rank(number: int, flight: dict[str, Any], node: str = "n1", pid: int = 0) -> JobProcess:
    return JobProcess(node, pid, "rank", (), {"RANK": str(number)}, flight=flight)


def written(*ranks: JobProcess, told: tuple[Told, ...] = ()) -> StacksFacts:
    nodes: dict[str, list[JobProcess]] = {}
    for r in ranks:
        nodes.setdefault(r.node, []).append(r)
    answer = {n: NodeStacks(n, processes=tuple(p)) for n, p in nodes.items()}
    return StacksFacts(answer, live=False, told=told)


def test_a_rank_that_queued_less_far_ahead_is_not_behind() -> None:
    """Collectives queue ahead asynchronously: ranks 0-2 wait in #100 having queued up to 103,
    101 and 105; rank 3 completed #98 and queued #99 only: it alone is behind."""
    ahead = [(100, "all_reduce", 1024)]
    facts = written(
        rank(0, dump(103, 99, ahead)),
        rank(1, dump(101, 99, ahead)),
        rank(2, dump(105, 99, ahead)),
        rank(3, dump(99, 98, [(99, "all_reduce", 1024)])),
    )
    view = hang_view(facts, "job")
    assert [o.process.rank for o in view.odd] == [3]
    assert "enqueued up to collective #99, the others wait in #100 (Flight" in view.odd[0].why
    (found,) = [f for f in verdict(facts) if f.code == "hang.outside_collective"]
    assert found.data["ranks"] == [3] and found.data["reported_by"]["ranks"] == [0, 1, 2]


def test_one_rank_far_behind_in_seq_is_named_and_only_it() -> None:
    """The watchdog's SeqNum alone: three ranks time out in BROADCAST #1211, one in #7."""
    late = [(1211, "broadcast", 10)]
    facts = written(
        rank(0, dump(1211, 1210, late), "a"),
        rank(1, dump(1211, 1210, late), "a"),
        rank(2, dump(1211, 1210, late), "a"),
        rank(5, dump(7, 6, [(7, "broadcast", 10)]), "b"),
    )
    findings = list(verdict(facts))
    assert [f.code for f in findings] == ["hang.outside_collective"]
    assert findings[0].data["ranks"] == [5] and findings[0].nodes == ("b",)
    assert "broadcast #1211" in findings[0].summary


def test_every_rank_at_its_first_collective_blames_the_path_not_a_rank() -> None:
    first = [(1, "all_reduce", 1)]
    facts = written(rank(0, dump(1, 0, first), "a"), rank(1, dump(1, 0, first), "b"))
    (found,) = verdict(facts)
    assert found.code == "hang.first_collective" and found.data["ranks"] == []
    assert found.data["reported_by"]["ranks"] == [0, 1] and "path between a,b is" in found.summary
    assert any(c.startswith("doctor preflight -H a,b") for c in found.fix.commands)


def test_one_ranks_text_names_no_cause() -> None:
    (found,) = verdict(written(rank(4, dump(9, 8, [(9, "all_reduce", 5)]))))
    assert found.code == "hang.one_rank" and found.data["ranks"] == []
    assert found.data["reported_by"]["ranks"] == [4] and "cannot say" in found.summary


def test_ranks_at_one_seq_with_other_sizes_are_a_mismatch() -> None:
    facts = written(
        rank(0, dump(4, 3, [(4, "all_reduce", 1024)])),
        rank(1, dump(4, 3, [(4, "all_reduce", 2048)])),
        rank(2, dump(4, 3, [(4, "all_reduce", 1024)])),
    )
    (found,) = verdict(facts)
    assert found.code == "hang.mismatch" and found.data["ranks"] == [1]


def test_a_tools_verdict_names_a_rank_whose_text_is_absent() -> None:
    waits = [(5, "all_reduce", 8)]
    facts = written(
        rank(0, dump(5, 4, waits)),
        rank(1, dump(5, 4, waits)),
        told=(Told(2, "node3", 4242, "all_reduce #5 of process group 0", "torchfrtrace"),),
    )
    (found,) = verdict(facts)
    assert found.code == "hang.outside_collective" and found.data["ranks"] == [2]
    assert found.nodes == ("node3",) and "torchfrtrace" in found.summary
    assert found.data["pids"] == [{"rank": 2, "node": "node3", "pid": 4242}]


def test_text_that_shows_some_ranks_makes_no_other_rank_gone() -> None:
    waits = [(5, "all_reduce", 8)]
    world = {"RANK": "0", "WORLD_SIZE": "8"}
    facts = written(JobProcess("a", 1, "rank", (), world, flight=dump(5, 4, waits)))
    assert hang_view(facts, "job").gone == ()


def test_a_process_in_uninterruptible_io_is_the_one_named() -> None:
    """A paste of stacks and a ps table: three ranks wait in a barrier (their stacks), the fourth
    has no stack, only its ps line in state D (a filesystem freeze): it is the odd one."""
    from doctor.facts.hang.stacks import Frame, Sample, Thread

    barrier = (
        Frame("barrier", "/usr/lib/python3/site-packages/torch/distributed/distributed_c10d.py", 4),
        Frame("<module>", "train.py", 9),
    )
    waiting = [
        JobProcess(
            "n1",
            100 + r,
            "rank",
            (),
            {"RANK": str(r)},
            threads=(Thread("MainThread", 100 + r, True, barrier),),
        )
        for r in range(3)
    ]
    frozen = JobProcess(
        "n2", 200, "rank", (), {"RANK": "3"}, last=Sample("D", 0, None, "rpc_wait_bit_killable")
    )
    (found,) = verdict(written(*waiting, frozen))
    assert found.code == "hang.outside_collective" and found.data["ranks"] == [3]
    assert "uninterruptible I/O (state D)" in found.summary and found.nodes == ("n2",)
