"""The srun answer framing: real srun output, interleaving, cut-off and garbled answers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from doctor.nodes.transport import ExecResult
from doctor.nodes.transport.srun import (
    SrunTransport,
    in_allocation,
    launch_failures,
    lost_indices,
    node_indices,
    split_frames,
    srun_said,
    task_source,
)
from doctor.nodes.transport.srun_task import frame

FIXTURES = Path(__file__).parent / "fixtures"


def test_real_srun_output_of_three_nodes() -> None:
    # Recorded on the namespace test bed: srun --input=all over node[1-3], the probe on stdin.
    got = split_frames((FIXTURES / "srun_3_nodes.stdout").read_bytes())
    assert sorted(got) == ["node1", "node2", "node3"]
    hostnames = set()
    for result in got.values():
        assert isinstance(result, ExecResult) and result.rc == 0
        hostnames.add(json.loads(result.stdout)["values"]["hostname"]["value"])
    assert hostnames == {"node1", "node2", "node3"}


@given(
    outs=st.lists(st.binary(max_size=3000), min_size=1, max_size=4),
    seed=st.randoms(use_true_random=False),
)
def test_any_interleaving_of_whole_lines_reassembles(outs: list[bytes], seed) -> None:
    streams = [frame(f"n{i}", i, 0.5, out, b"e" * i) for i, out in enumerate(outs)]
    merged: list[str] = ["srun: a stray line", "garbage @cd1"]
    cursors = [0] * len(streams)
    while any(c < len(s) for c, s in zip(cursors, streams, strict=True)):
        i = seed.choice([k for k, s in enumerate(streams) if cursors[k] < len(s)])
        merged.append(streams[i][cursors[i]])
        cursors[i] += 1
    got = split_frames("\n".join(merged).encode())
    assert got == {f"n{i}": ExecResult(i, out, b"e" * i, 0.5) for i, out in enumerate(outs)}


def test_cut_off_and_garbled_answers_are_named_not_misread() -> None:
    lines = frame("n1", 0, 0.1, os.urandom(5000), b"")
    assert split_frames("\n".join(lines[:-1]).encode()) == {"n1": "its answer was cut off"}
    dropped = lines[:2] + lines[3:]  # one chunk of the output lost
    assert "garbled" in str(split_frames("\n".join(dropped).encode())["n1"])


def test_lines_stay_short() -> None:
    # Slurm moves step output in pieces of about 1 KiB; a longer line could be cut and interleaved.
    assert max(len(line) for line in frame("node0001", 0, 1.0, os.urandom(20000), b"")) < 1000


def test_dead_node_is_named_from_srun_stderr() -> None:
    # Recorded: node2's slurmd stopped; srun aborts the step and kills the tasks on node1/node3.
    stderr = (FIXTURES / "srun_dead_node2.stderr").read_text()
    assert launch_failures(stderr) == {"node2"}
    assert "failed on node node2" in srun_said(stderr, "node2")
    assert srun_said(stderr, "node1").endswith("node1: task 0: Killed")
    # Names match whole: node1 is not node10, nor is ode2 node2.
    assert srun_said(stderr.replace("node1", "node10"), "node1") == ""
    assert srun_said(stderr, "ode2") == ""


def test_a_node_lost_mid_run_is_named_by_its_step_index() -> None:
    # Recorded: everything on node3 killed while its probe ran; srun lost node3's step I/O (it
    # names it only as "node 2") and aborted the step, killing the tasks on node1 and node2
    # before any of their output got out.
    stderr = (FIXTURES / "srun_lost_node3.stderr").read_text()
    assert list(lost_indices(stderr)) == [2]
    assert node_indices(b"", stderr) == {0: "node1", 1: "node2"}
    pending = ["node1", "node2", "node3"]
    dead = SrunTransport._culprits(pending, b"", stderr)
    assert list(dead) == ["node3"]
    assert dead["node3"].code == "node.probe_failed"
    assert "io error with slurmstepd on node 2" in dead["node3"].detail
    # Two nodes no line names: which one srun lost is not guessed.
    assert SrunTransport._culprits([*pending, "node4"], b"", stderr) == {}
    # A task's first frame names its index even where srun's lines do not.
    framed_first = b"@cd1 node3 at 2\n"
    assert node_indices(framed_first) == {2: "node3"}
    unnamed = stderr.replace("node1: task 0", "x").replace("node2: task 1", "y")
    assert list(SrunTransport._culprits([*pending, "node4"], framed_first, unnamed)) == ["node3"]


def test_in_allocation() -> None:
    alloc = {"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "node[1-3]"}
    assert in_allocation(alloc)
    assert not in_allocation({})
    assert not in_allocation({"SLURM_JOB_ID": "7"})
    # A task of a step (srun doctor ...) must not start steps of its own.
    assert not in_allocation({**alloc, "SLURM_STEP_ID": "0"})


def test_task_runs_the_command_with_stdin_and_frames_it() -> None:
    argv = [sys.executable, "-c", task_source(), "sh", "-c", "cat; echo oops >&2; exit 3"]
    env = {**os.environ, "SLURMD_NODENAME": "gpu7"}
    proc = subprocess.run(argv, input=b"probe source", capture_output=True, env=env, timeout=30)
    got = split_frames(proc.stdout)["gpu7"]
    assert isinstance(got, ExecResult)
    assert (got.rc, got.stdout, got.stderr) == (3, b"probe source", b"oops\n")
    # Its first line, before the command runs, gives its index in the step.
    env["SLURM_NODEID"] = "5"
    proc = subprocess.run(argv, input=b"", capture_output=True, env=env, timeout=30)
    assert proc.stdout.startswith(b"@cd1 gpu7 at 5\n") and node_indices(proc.stdout) == {5: "gpu7"}


def test_task_reports_a_missing_command() -> None:
    argv = [sys.executable, "-c", task_source(), "/nonexistent/python3", "-"]
    env = {**os.environ, "SLURMD_NODENAME": "gpu7"}
    proc = subprocess.run(argv, input=b"", capture_output=True, env=env, timeout=30)
    got = split_frames(proc.stdout)["gpu7"]
    assert isinstance(got, ExecResult) and got.rc == 127
    assert b"cannot run /nonexistent/python3" in got.stderr
