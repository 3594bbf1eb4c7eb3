"""The job runner on this machine (every "node" local): prefixes, whole logs, the grace after a
failure, the time limit, and the keeper ending what the command left running."""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import time
from pathlib import Path

import pytest

from checks.job import job as job_check
from doctor.facts.cluster import ClusterFacts
from doctor.facts.hang.outcome import FailedNode, JobOutcome
from doctor.job.explain import job_explanation
from doctor.job.spread import Launch, run_job
from doctor.nodes.inventory import local_node
from doctor.nodes.transport.launch import LocalLauncher


def node(name: str):  # type: ignore[no-untyped-def]
    return dataclasses.replace(local_node(), name=name)


def alive(pid: int) -> bool:
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    return False


def test_output_prefixed_logs_whole_and_env_set(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    launches = [
        Launch(node("a"), ["sh", "-c", 'echo "a says $X"; echo oops >&2'], {"X": "1"}),
        Launch(node("b"), ["sh", "-c", "printf 'no newline'"]),
    ]
    result = run_job(launches, LocalLauncher(), sys.executable, tmp_path)
    out, err = capfd.readouterr()
    assert result.exit_code() == 0
    assert "[a] a says 1\n" in out and "[b] no newline\n" in out and "[a] oops\n" in err
    # stdout and stderr are two streams: their order in the log is the order they arrived
    assert sorted((tmp_path / "a.log").read_text().splitlines()) == ["a says 1", "oops"]


def test_a_failing_node_ends_the_others_after_the_grace(tmp_path: Path) -> None:
    launches = [
        Launch(node("bad"), ["sh", "-c", "echo 'ValueError: no' >&2; exit 3"]),
        Launch(node("slow"), ["sleep", "60"]),
    ]
    began = time.monotonic()
    result = run_job(launches, LocalLauncher(), sys.executable, tmp_path, grace=1)
    assert time.monotonic() - began < 40  # the sleeps are 60 s: ended, not waited for
    assert result.exit_code() == 3  # the failed node's, not the one the doctor ended
    assert result.stopped == ["slow"] and [r.name for r in result.failed()] == ["bad"]
    explained = job_explanation(result, {})
    assert explained["failed"][0]["node"] == "bad"


def test_a_peer_named_by_address_is_named_by_node(tmp_path: Path) -> None:
    # Gloo's own line (from a real log), the peer at an address the gate knows node2 holds.
    line = (
        "[rank0]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/"
        "pair.cc:553] Connection closed by peer [198.18.0.2]:16608. This is typically caused "
        "by a remote worker crashing."
    )
    launches = [Launch(node("node1"), ["sh", "-c", f"echo '{line}' >&2; exit 1"])]
    result = run_job(launches, LocalLauncher(), sys.executable, tmp_path)
    explained = job_explanation(result, {"198.18.0.2": "node2"})
    [lost] = [f for f in explained["findings"] if f["code"] == "gloo.peer_lost"]
    assert lost["summary"].startswith("a Gloo peer went away (node2, 198.18.0.2)")
    # The peer is the suspect; node1 only reported losing it, and is no culprit of the job.
    assert lost["nodes"] == ["node2"] and lost["seen_on"] == ["node1"]
    assert lost["data"]["reported_by"]["nodes"] == ["node1"]
    assert explained["culprits"] == ["node2"]


def test_the_culprits_are_the_nodes_the_cause_names_not_every_failed_one(tmp_path: Path) -> None:
    """Both nodes' commands fail: b's rank ran out of GPU memory (its own line, PyTorch's
    wording in tests/fixtures/logs/format/cuda-oom.log), a's only lost its peer at b's address.
    The job's culprit is b; a is a failed node, never a culprit (--failed-hosts, job.failed)."""
    lost = (
        "[rank0]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/"
        "pair.cc:553] Connection closed by peer [198.18.0.2]:16608."
    )
    oom = "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
    launches = [
        Launch(node("a"), ["sh", "-c", f"sleep 1; echo '{lost}' >&2; exit 1"]),
        Launch(node("b"), ["sh", "-c", f"echo '{oom}' >&2; exit 1"]),
    ]
    result = run_job(launches, LocalLauncher(), sys.executable, tmp_path, grace=5)
    explained = job_explanation(result, {"198.18.0.2": "b"})
    assert {f["node"] for f in explained["failed"]} == {"a", "b"}
    assert explained["culprits"] == ["b"]
    by_code = {f["code"]: f for f in explained["findings"]}
    assert by_code["cuda.oom"]["nodes"] == ["b"] and by_code["cuda.oom"]["seen_on"] == ["b"]
    assert by_code["gloo.peer_lost"]["data"]["reported_by"]["nodes"] == ["a"]
    outcome = JobOutcome(
        1,
        tuple(FailedNode(f["node"], f["exit_code"], f["error"]) for f in explained["failed"]),
        tuple(explained["findings"]),
        tuple(explained["culprits"]),
    )
    (finding,) = list(job_check.fn(ClusterFacts({}, job=outcome)))
    assert finding.code == "job.failed" and finding.nodes == ("b",)


def test_a_command_that_cannot_start_is_named(tmp_path: Path) -> None:
    result = run_job(
        [Launch(node("a"), ["/nonexistent/prog"])], LocalLauncher(), sys.executable, tmp_path
    )
    assert result.exit_code() == 127
    assert "cannot run /nonexistent/prog" in (tmp_path / "a.log").read_text()


def test_the_time_limit_ends_everything_including_what_left_the_session(tmp_path: Path) -> None:
    # A grandchild in a session of its own (as torchrun starts its workers), writing its pid.
    pidfile = tmp_path / "escaped.pid"
    script = (
        "import os,subprocess,sys,time;"
        "p=subprocess.Popen(['sleep','60'],start_new_session=True);"
        f"open({str(pidfile)!r},'w').write(str(p.pid));time.sleep(60)"
    )
    launches = [Launch(node("a"), [sys.executable, "-c", script])]
    began = time.monotonic()
    result = run_job(launches, LocalLauncher(), sys.executable, tmp_path / "logs", timeout=2)
    assert time.monotonic() - began < 40  # the sleeps are 60 s: ended, not waited for
    assert result.timed_out and result.exit_code() == 124
    escaped = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while alive(escaped) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(escaped), "the keeper must end a process that left the command's session"


def test_the_files_the_doctor_had_the_job_make_go_with_it(tmp_path: Path) -> None:
    """What Flight Recorder's arming makes (a pipe, a dump) is removed when the job ends; the
    job's own files stay."""
    made = tmp_path / "made"
    made.mkdir()
    argv = [
        "sh",
        "-c",
        f"mkfifo {made}/doctor-pipe-0.pipe; echo x > {made}/doctor-fr-0; echo y > {made}/own",
    ]
    launch = Launch(node("a"), argv, remove=(f"{made}/doctor-*",))
    assert run_job([launch], LocalLauncher(), sys.executable, tmp_path).exit_code() == 0
    assert sorted(p.name for p in made.iterdir()) == ["own"]


def test_a_quiet_job_is_looked_at_and_a_moving_one_left_to_run(tmp_path: Path) -> None:
    """The watch is called after hang_after seconds without output, not before, and again only
    after another quiet spell; 'stop' ends the job as hung (exit 124)."""
    said: list[float] = []

    def watch(quiet: float, why: str) -> str:
        assert why == ""  # silence, not a timeout line
        said.append(quiet)
        return "moving" if len(said) == 1 else "stop"

    launch = Launch(node("a"), ["sh", "-c", "echo started; sleep 60"])
    began = time.monotonic()
    result = run_job([launch], LocalLauncher(), sys.executable, tmp_path, watch=watch, hang_after=1)
    assert time.monotonic() - began < 20
    assert len(said) == 2 and all(q >= 1 for q in said)
    assert result.hung and result.exit_code() == 124 and result.stopped == ["a"]


def test_a_timeout_line_is_looked_at_at_once_and_once(tmp_path: Path) -> None:
    """A rank's watchdog line starts the look before hang_after (the watchdog ends the ranks
    soon after it): at once, naming the line, and not again for the other ranks' lines."""
    said: list[tuple[float, str]] = []

    def watch(quiet: float, why: str) -> str:
        said.append((quiet, why))
        return "report"

    line = (
        "[rank1]:[E1127 10:00:00.000000 11 ProcessGroupNCCL.cpp:1] [PG ID 0 PG GUID 0 Rank 1] "
        "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE)"
    )
    script = f"echo started; sleep 1; echo '{line}' >&2; echo '{line}' >&2; sleep 4"
    launch = Launch(node("a"), ["sh", "-c", script])
    began = time.monotonic()
    result = run_job(
        [launch], LocalLauncher(), sys.executable, tmp_path, watch=watch, hang_after=300
    )
    assert time.monotonic() - began < 20 and result.exit_code() == 0
    assert len(said) == 1, said
    assert said[0][1].startswith("a rank printed: ") and "Watchdog caught" in said[0][1]
