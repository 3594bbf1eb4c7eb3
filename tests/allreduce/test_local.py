"""Real Gloo ranks on this machine over loopback: phases, verification, deadlines, Ctrl-C."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from doctor.core.model import Finding, Severity
from doctor.facts.allreduce import AllreduceFacts, Deadlines, Plan, Rank, RunResult
from doctor.nodes.inventory import Node
from doctor.nodes.transport.launch import LocalLauncher, LocalProcess, Process
from doctor.stages.allreduce.liveness import SILENT_BEATS
from doctor.stages.allreduce.run import run_plan
from doctor.stages.allreduce.stage import Job as Request
from tests.allreduce.stagekit import judge, run_stage

SIZES = (1024, 4096, 65536)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def local_plan(n: int, **kw: object) -> Plan:
    ranks = tuple(Rank(i, Node(f"node{i + 1}")) for i in range(n))
    return Plan(
        ranks=ranks,
        port=free_port(),
        python=sys.executable,
        sizes=SIZES,
        link_bytes=65536,
        **kw,  # type: ignore[arg-type]
    )


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except (ProcessLookupError, FileNotFoundError):
        return False
    # A zombie is dead; only its parent has not reaped it yet.
    return state != "Z"


NODE3_SLOW = ("allreduce.slow_start", Severity.WARN, ("node3",))


def only_finding(plan: Plan, run: RunResult) -> Finding:
    """The one finding on a three-rank local run."""
    (finding,) = judge(AllreduceFacts("gloo", 3, "node1", plan.port, plan.python, "", runs=(run,)))
    return finding


def survivors(pids: list[int], within: float = 5.0) -> list[int]:
    """The pids still alive after ``within`` seconds.

    SIGKILL to a process group is asynchronous: the killer waits for its own child, not for a
    grandchild (the hung shell's ``sleep``), which dies when the kernel next schedules it.
    """
    deadline = time.monotonic() + within
    while (left := [p for p in pids if alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


class DelayedLauncher(LocalLauncher):
    """Holds one node's rank in a shell that sleeps (a hung node), recording the pids it made."""

    def __init__(self, slow: str, pidfile: Path, interrupt_after: float | None = None) -> None:
        self.slow, self.pidfile, self.interrupt_after = slow, pidfile, interrupt_after
        self.timer: threading.Timer | None = None

    def start(self, node: Node, argv: list[str], stdin: bytes) -> Process | str:
        if node.name == self.slow:
            if self.interrupt_after is not None:  # Ctrl-C, once every rank has been started
                self.timer = threading.Timer(
                    self.interrupt_after, os.kill, (os.getpid(), signal.SIGINT)
                )
                self.timer.start()
            pids = self.pidfile
            script = f'echo $$ > {pids}; sleep 60 & echo $! >> {pids}; wait $!; exec "$@"'
            argv = ["sh", "-c", script, "sh", *argv]
        return super().start(node, argv, stdin)


def test_two_ranks_verify_exactly_and_sweep() -> None:
    run = run_plan(local_plan(2), LocalLauncher())
    assert run.status == "passed", run.headline()
    assert run.verified
    assert [r.phase for r in run.ranks] == ["done", "done"]
    assert all(r.verify["elems"] == 1 << 16 and r.verify["wrong"] == 0 for r in run.ranks)
    rows = run.sweep_rows()
    assert [r["bytes"] for r in rows] == list(SIZES)
    for row in rows:
        assert row["time_s"] > 0
        assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"])  # 2(n-1)/n = 1 for n = 2
    doc = run.to_json()
    assert doc["status"] == "passed" and doc["verified"] is True
    assert {r["phase"] for r in doc["ranks"]} == {"done"}
    # One OpenMP thread per rank, as torchrun gives each: ranks sharing CPUs spin no others.
    assert [r.env.get("OMP_NUM_THREADS") for r in run.ranks] == ["1", "1"]
    assert not survivors([r.pid for r in run.ranks if r.pid])


def test_the_environment_may_give_the_ranks_more_openmp_threads() -> None:
    run = run_plan(local_plan(2, env={"OMP_NUM_THREADS": "2"}), LocalLauncher())
    assert run.status == "passed", run.headline()
    assert [r.env.get("OMP_NUM_THREADS") for r in run.ranks] == ["2", "2"]


def test_a_hung_node_is_killed_at_its_deadline_and_named(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    plan = local_plan(3, deadlines=Deadlines(launch=3, rendezvous=3, init=3, settle=1))
    started = time.monotonic()
    run = run_plan(plan, DelayedLauncher("node2", pidfile))
    took = time.monotonic() - started
    assert run.status in ("timeout", "failed")
    assert took < 3 + 3 + 2 + 4  # launch deadline + grace, with room for a slow machine
    assert [r.rank for r in run.behind()] == [1]
    assert run.sentence(run.ranks[1]).startswith("rank 1 (node2) never started")
    assert run.ranks[0].phase in ("launch", "rendezvous", "init")  # waiting for rank 1
    pids = [int(p) for p in pidfile.read_text().split()]
    assert len(pids) == 2
    assert not survivors(pids), "the hung node's shell or its sleep survived"
    assert not survivors([r.pid for r in run.ranks if r.pid])


def test_ctrl_c_kills_every_rank_and_says_where_each_was(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    plan = local_plan(3, deadlines=Deadlines(launch=60, rendezvous=60, init=60))
    launcher = DelayedLauncher("node3", pidfile, interrupt_after=3.0)
    try:
        run = run_plan(plan, launcher)
    finally:
        if launcher.timer:
            launcher.timer.cancel()
    assert run.status == "interrupted"
    # Where each rank was depends on how fast torch imports here; that it is known does not.
    assert all(r.phase in ("launch", "rendezvous", "init") for r in run.ranks[:2])
    assert run.headline() == "as configured: interrupted: rank 2 (node3) never started"
    pids = [int(p) for p in pidfile.read_text().split()] + [r.pid for r in run.ranks if r.pid]
    assert len(pids) == 4
    assert not survivors(pids)


def test_a_taken_port_stops_the_stage_before_any_rank_starts() -> None:
    with socket.socket() as taken:
        taken.bind(("", 0))
        taken.listen()
        port = taken.getsockname()[1]
        request = Request(
            nodes=(Node("node1"), Node("node2")), port=port, python=sys.executable, sizes=SIZES
        )
        stage = run_stage(request, LocalLauncher())
    assert stage.runs == []
    (finding,) = stage.findings
    assert finding.code == "allreduce.not_started"
    assert f"port {port} is already in use on node1" in finding.summary
    assert stage.section()["status"] == "not_started"


def test_a_node_without_torch_never_starts() -> None:
    class NoSitePackages(LocalLauncher):
        def start(self, node: Node, argv: list[str], stdin: bytes) -> Process | str:
            if node.name == "node2":
                argv = [argv[0], "-S", *argv[1:]]
            return super().start(node, argv, stdin)

    plan = local_plan(2, deadlines=Deadlines(rendezvous=5, settle=0.5))
    run = run_plan(plan, NoSitePackages())
    assert run.status == "failed"
    facts = AllreduceFacts("gloo", 2, "node1", plan.port, plan.python, "", runs=(run,))
    (finding,) = judge(facts)
    assert finding.fix is not None and "--python" in finding.fix.commands[0]
    assert run.sentence(run.ranks[1]).startswith(
        "rank 1 (node2) never started: torch is not importable: ModuleNotFoundError"
    )


def test_a_rank_that_ends_before_it_is_recorded_is_not_an_internal_error(monkeypatch) -> None:
    # The fault matrix: node3 had no Python, its worker's output ended before launch() recorded
    # the worker, and the end-of-output event raised KeyError (exit 3, no report). The delay
    # makes that order certain.
    import doctor.stages.allreduce.run as run_module

    real_start = run_module.start

    def late_start(key, launcher, node, argv, source, events):  # type: ignore[no-untyped-def]
        worker = real_start(key, launcher, node, argv, source, events)
        time.sleep(0.5 if key == 1 else 0)
        return worker

    class NoPythonOnNode2(LocalLauncher):
        def start(self, node: Node, argv: list[str], stdin: bytes) -> Process | str:
            if node.name == "node2":
                argv = ["/bin/sh", "-c", "exit 127"]  # the node has no such Python
            return super().start(node, argv, stdin)

    monkeypatch.setattr(run_module, "start", late_start)
    plan = local_plan(2, deadlines=Deadlines(launch=20, settle=0.5))
    started = time.monotonic()
    run = run_plan(plan, NoPythonOnNode2())
    assert run.status in ("failed", "not_started")
    assert run.ranks[1].exit_code not in (None, 0)
    assert [r.rank for r in run.behind()] == [1]
    assert time.monotonic() - started < 15


class SlowTorch(LocalLauncher):
    """Ranks on ``slow`` nodes import a torch that takes a minute to load (a shared filesystem
    under load): it shadows the real one on their PYTHONPATH."""

    def __init__(self, shadow: Path, slow: set[str]) -> None:
        self.shadow, self.slow = shadow, slow

    def start(self, node: Node, argv: list[str], stdin: bytes) -> Process | str:
        if node.name in self.slow:
            argv = ["env", f"PYTHONPATH={self.shadow}", *argv]
        return super().start(node, argv, stdin)


def slow_torch(tmp_path: Path) -> Path:
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("import time\ntime.sleep(60)\n")
    return tmp_path


def test_every_rank_slow_to_import_torch_is_a_slow_start_that_blames_no_node(tmp_path) -> None:
    plan = local_plan(3, deadlines=Deadlines(launch=2, settle=0.5))
    started = time.monotonic()
    run = run_plan(plan, SlowTorch(slow_torch(tmp_path), {"node1", "node2", "node3"}))
    assert time.monotonic() - started < 2 + 2 + 5
    assert run.status == "timeout" and run.slow_start
    finding = only_finding(plan, run)
    assert (finding.code, finding.nodes) == ("allreduce.slow_start", ())
    assert "--launch-timeout" in finding.fix.commands[0]  # type: ignore[union-attr]
    assert not survivors([r.pid for r in run.ranks if r.pid])


def test_one_rank_slow_to_import_torch_is_a_warning_that_names_it(tmp_path) -> None:
    plan = local_plan(3, deadlines=Deadlines(launch=8, settle=0.5))
    run = run_plan(plan, SlowTorch(slow_torch(tmp_path), {"node3"}))
    assert run.status == "timeout" and run.slow_start
    assert [r.rank for r in run.behind()] == [2]
    assert run.sentence(run.ranks[2]) == (
        "rank 2 (node3) started but had not imported torch within 8s"
    )
    # The others imported torch and waited for it: no rank had tried the rendezvous.
    assert [r.phase for r in run.ranks[:2]] == ["launch", "launch"]
    assert all(r.ready_s is not None and r.ready_s < 8 for r in run.ranks[:2])
    finding = only_finding(plan, run)
    assert (finding.code, finding.severity, finding.nodes) == NODE3_SLOW
    assert not survivors([r.pid for r in run.ranks if r.pid])


def test_rank_zero_slow_to_import_torch_holds_the_others_until_the_launch_deadline(
    tmp_path: Path,
) -> None:
    # Rank 0 holds the rendezvous store: the others must not time out reaching it (the store
    # FAIL of issue 38) while it imports torch. The launch deadline, not the rendezvous's 1 s,
    # bounds their wait.
    plan = local_plan(3, deadlines=Deadlines(launch=8, rendezvous=1, settle=0.5))
    started = time.monotonic()
    run = run_plan(plan, SlowTorch(slow_torch(tmp_path), {"node1"}))
    assert 8 <= time.monotonic() - started < 8 + 2 + 5
    assert run.status == "timeout" and run.slow_start, run.headline()
    assert [r.rank for r in run.behind()] == [0]
    assert not any(r.error for r in run.ranks)
    finding = only_finding(plan, run)
    assert (finding.code, finding.nodes) == ("allreduce.slow_start", ("node1",))
    assert not survivors([r.pid for r in run.ranks if r.pid])


class StopsAfterItsFirstLine(LocalLauncher):
    """node3's rank is stopped for good once its first line is out, its output left open, as a
    transport that tells no exit (srun's) shows a rank whose node's processes all died; with
    ``pulse_too`` False only its main process stops (its import holding the interpreter's lock
    for long): its pulse beats on."""

    def __init__(self, pulse_too: bool) -> None:
        self.pulse_too = pulse_too

    def start(self, node: Node, argv: list[str], stdin: bytes) -> Process | str:
        process = super().start(node, argv, stdin)
        if node.name != "node3" or not isinstance(process, LocalProcess):
            return process
        return Stopped(process.proc, self.pulse_too)


class Stopped(LocalProcess):
    def __init__(self, proc: subprocess.Popen[bytes], pulse_too: bool) -> None:
        super().__init__(proc)
        self.pulse_too = pulse_too

    def stdout_lines(self) -> Iterator[bytes]:
        for n, line in enumerate(super().stdout_lines()):
            yield line
            if n == 0:
                stop = os.killpg if self.pulse_too else os.kill
                stop(self.proc.pid, signal.SIGSTOP)


def test_a_rank_gone_without_an_exit_while_importing_torch_fails_naming_its_node() -> None:
    plan = local_plan(3, deadlines=Deadlines(launch=30, settle=0.5))
    started = time.monotonic()
    run = run_plan(plan, StopsAfterItsFirstLine(pulse_too=True))
    # Judged once silent for SILENT_BEATS beats while the others beat on, not at the deadline.
    assert SILENT_BEATS <= time.monotonic() - started < SILENT_BEATS + 8
    assert run.status == "failed" and not run.slow_start, run.headline()
    assert run.ranks[2].gone and run.ranks[2].exit_code is None
    assert [r.rank for r in run.behind()] == [2]
    finding = only_finding(plan, run)
    assert (finding.code, finding.severity, finding.nodes) == (
        "allreduce.failed",
        Severity.FAIL,
        ("node3",),
    )
    assert "heartbeats kept coming" in finding.summary
    assert finding.fix is not None and "node3" in finding.fix.commands[0]
    assert not survivors([r.pid for r in run.ranks if r.pid])


def test_a_rank_whose_pulse_beats_on_stays_a_slow_start_past_the_silence() -> None:
    plan = local_plan(3, deadlines=Deadlines(launch=SILENT_BEATS + 4, settle=0.5))
    run = run_plan(plan, StopsAfterItsFirstLine(pulse_too=False))
    assert run.status == "timeout" and run.slow_start, run.headline()
    assert not run.ranks[2].gone
    finding = only_finding(plan, run)
    assert (finding.code, finding.severity, finding.nodes) == NODE3_SLOW
    assert not survivors([r.pid for r in run.ranks if r.pid])
