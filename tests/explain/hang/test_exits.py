"""The launchers' word on the rank that ended first (doctor/explain/hang/exits.py), on what real
launchers printed: torchrun's ChildFailedError on an H100 (tests/fixtures/gpu/h100/ended-*),
Open MPI's and Slurm's reports on this machine and the test bed (tests/fixtures/logs/hang/exits).
A kill or crash names its rank; a rank that only waited (the watchdog's SIGABRT, exit code 1 after
its collective failed, the launcher's SIGTERM) is never named."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from doctor.explain.hang.exits import Exit, read_exits
from doctor.explain.scan import explain
from doctor.render.explain import explain_json

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
EXITS = FIXTURES / "logs" / "hang" / "exits"
H100 = FIXTURES / "gpu" / "h100"


def exits(path: Path) -> list[Exit]:
    return read_exits(path.read_text().splitlines())


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (H100 / "ended-kill/torchrun.log", [Exit(2, "", 1388, "SIGKILL", "torchrun")]),
        (EXITS / "mpirun-kill.log", [Exit(2, "vm", 0, "SIGKILL", "mpirun")]),
        (EXITS / "srun-kill.log", [Exit(3, "node2", 0, "SIGKILL", "srun")]),
        (EXITS / "srun-kill-on-bad-exit.log", [Exit(3, "node2", 0, "SIGKILL", "srun")]),
        (EXITS / "srun-segv.log", [Exit(3, "node2", 0, "SIGSEGV", "srun")]),
        (EXITS / "mpirun-3-nodes.log", [Exit(3, "node2", 6146, "SIGKILL", "mpirun")]),
        # torch 2.13 writes "exitcode  : -9 (pid: 5776)  (SIGKILL)"; node1's and node3's root
        # causes exited with code 1 (their allreduce failed): not counted.
        (EXITS / "torchrun-3-nodes/node1.log", []),
        (EXITS / "torchrun-3-nodes/node2.log", [Exit(3, "node2", 5776, "SIGKILL", "torchrun")]),
        # The root cause is a rank that timed out waiting (SIGABRT): nobody was killed.
        (H100 / "ended-sleep/torchrun.log", []),
        (H100 / "ended-op/torchrun.log", []),
    ],
)
def test_each_launchers_report_names_the_killed_rank_only(path: Path, expected: list[Exit]) -> None:
    assert exits(path) == expected


def hang(*paths: Path) -> list[dict[str, Any]]:
    files = [f for p in paths for f in (sorted(p.iterdir()) if p.is_dir() else [p])]
    doc = explain_json(explain([str(f) for f in files]))
    return [f for f in doc["findings"] if f["check"] == "hang"]


@pytest.mark.parametrize(
    ("path", "rank", "node", "reported"),
    [
        (H100 / "ended-kill/torchrun.log", 2, [], [1, 3]),
        (EXITS / "mpirun-kill.log", 2, ["vm"], [0, 1, 3]),
        (EXITS / "srun-kill.log", 3, ["node2"], [0, 1, 2, 4, 5]),
        (EXITS / "srun-kill-on-bad-exit.log", 3, ["node2"], [2, 4]),
        (EXITS / "mpirun-3-nodes.log", 3, ["node2"], [0, 1, 2, 4, 5]),
        (EXITS / "torchrun-3-nodes", 3, ["node2"], [0, 1, 2, 4, 5]),
    ],
)
def test_the_killed_rank_is_gone_and_no_waiter_is_named(
    path: Path, rank: int, node: list[str], reported: list[int]
) -> None:
    """Before: 'every rank waits in the same collective: the network is at fault' (mpirun,
    srun) or 'stalled' naming none (torchrun)."""
    (found,) = hang(path)
    assert found["code"] == "hang.rank_gone" and found["data"]["ranks"] == [rank]
    assert found["nodes"] == node and found["data"]["reported_by"]["ranks"] == reported
    assert "ended by SIG" in found["summary"]


def test_a_segfaulted_rank_is_gone_and_its_dump_blames_no_other_rank() -> None:
    found = {f["code"]: f for f in hang(EXITS / "srun-segv.log")}
    assert found["hang.rank_gone"]["data"]["ranks"] == [3]
    assert "SIGSEGV" in found["hang.rank_gone"]["summary"]
    for other in found.values():  # faulthandler's dump has no rank: it names none
        assert set(other["data"]["ranks"]) <= {3}


def test_a_rank_killed_after_its_own_timeout_only_waited(tmp_path: Path) -> None:
    """The H100's sleeping rank, its job's report edited so the rank that timed out first (rank
    1, SIGABRT) reads as SIGKILLed: it holds a watchdog timeout, so it waited; rank 2 is still
    the one named."""
    text = (H100 / "ended-sleep/torchrun.log").read_text()
    text = text.replace("exitcode  : -6 (pid: 1156)", "exitcode  : -9 (pid: 1156)")
    (tmp_path / "job.log").write_text(text)
    (found,) = hang(tmp_path / "job.log")
    assert found["code"] == "hang.outside_collective" and found["data"]["ranks"] == [2]


def test_a_killed_rank_alone_is_a_failed_job_not_a_hang(tmp_path: Path) -> None:
    report = [line for line in exits_text() if "noticed that process rank" in line]
    (tmp_path / "tail.log").write_text("\n".join(report) + "\n")
    assert hang(tmp_path / "tail.log") == []


def exits_text() -> list[str]:
    return (EXITS / "mpirun-kill.log").read_text().splitlines()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=80), max_size=30))
def test_garbage_never_raises_and_names_only_numbers_it_saw(lines: list[str]) -> None:
    for found in read_exits(["Root Cause (first observed failure):", *lines]):
        assert found.signal.startswith("SIG") and found.rank >= 0


def test_two_agents_printing_at_once_under_srun_labels_stay_apart() -> None:
    """node1's and node2's root-cause entries (the bed's real ones) interleaved line by line, as
    `srun -l` delivers two agents writing at once: each read under its own label."""
    blocks = []
    for task, node in ((1, "node2"), (0, "node1")):  # the later writer's fields last
        text = (EXITS / "torchrun-3-nodes" / f"{node}.log").read_text().splitlines()
        start = next(i for i, line in enumerate(text) if "first observed failure" in line)
        blocks.append([f"{task}: {line}" for line in text[start : start + 9]])
    mixed = [line for pair in zip(*blocks, strict=True) for line in pair]
    assert read_exits(mixed) == [Exit(3, "node2", 5776, "SIGKILL", "torchrun")]


def test_several_ranks_killed_at_once_name_none(tmp_path: Path) -> None:
    """A time limit or scancel kills every task: srun says Killed for each. The bed's real
    report, rank 2 said killed too: no rank is named by the exits."""
    text = (EXITS / "srun-kill.log").read_text()
    text = text.replace("task 2: Exited with exit code 1", "task 2: Killed")
    (tmp_path / "job.log").write_text(text)
    assert len(exits(tmp_path / "job.log")) == 2
    for found in hang(tmp_path / "job.log"):
        assert found["code"] != "hang.rank_gone" and 3 not in found["data"]["ranks"]


def test_a_range_of_a_billion_tasks_is_cut_at_once() -> None:
    """Read whole, such a range would hold gigabytes of numbers."""
    found = read_exits(["srun: error: node1: tasks 0-999999999,5-7: Killed"])
    assert [e.rank for e in found] == list(range(4096))


def segv_log(tmp_path: Path, *, srun: bool, label: str = "") -> Path:
    """The bed's real srun job whose task 3 segfaulted (faulthandler's dump among the others'
    tracebacks), with srun's own lines or without, the dump's lines labelled or not."""
    lines = []
    dump = False
    for line in (EXITS / "srun-segv.log").read_text().splitlines():
        if line.startswith("srun: ") and not srun:
            continue
        dump = dump or line.startswith("Fatal Python error")
        lines.append(label + line if dump and line else line)
        dump = dump and not line.startswith("Extension modules")
    (tmp_path / "job.log").write_text("\n".join(lines) + "\n")
    return tmp_path / "job.log"


def test_a_crash_srun_saw_and_faulthandler_dumped_is_one_gone_rank(tmp_path: Path) -> None:
    """Before: rank 3 gone, and beside it 'a process holds the job ... outside any collective'
    (faulthandler's dump, unranked): the same rank twice."""
    (found,) = hang(segv_log(tmp_path, srun=True))
    assert found["code"] == "hang.rank_gone" and found["data"]["ranks"] == [3]
    assert found["nodes"] == ["node2"] and "crashed (Segmentation fault) at" in found["summary"]


def test_a_labelled_crash_dump_alone_is_the_gone_rank(tmp_path: Path) -> None:
    (found,) = hang(segv_log(tmp_path, srun=False, label="[rank3]:"))
    assert found["code"] == "hang.rank_gone" and found["data"]["ranks"] == [3]
    assert found["data"]["reported_by"]["ranks"] == [0, 1, 2, 4, 5]


def test_an_unranked_crash_dump_alone_says_it_crashed(tmp_path: Path) -> None:
    (found,) = hang(segv_log(tmp_path, srun=False))
    assert found["code"] == "hang.outside_collective" and found["data"]["ranks"] == []
    assert "crashed (Segmentation fault)" in found["summary"]
