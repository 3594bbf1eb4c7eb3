"""The worker as shipped: Python 3.8 syntax, stdlib + torch only, and its lifeline."""

from __future__ import annotations

import ast
import os
import queue
import signal
import sys
import time

import pytest

from doctor.facts.allreduce import Plan, Rank
from doctor.nodes.inventory import Node
from doctor.nodes.transport.launch import Event, LocalLauncher, LocalProcess, Worker, start
from doctor.stages.allreduce.run import worker_argv, worker_source, worker_spec


def said(events: queue.Queue[Event], timeout: float = 30) -> dict[str, object] | None:
    """The worker's next line that is not a heartbeat (None: its output ended)."""
    ends = time.monotonic() + timeout
    while True:
        event = events.get(timeout=max(0.01, ends - time.monotonic()))
        if event.data is None or event.data.get("ev") != "beat":
            return event.data


def started_rank(rank: int, **extra: object) -> tuple[Worker, queue.Queue[Event]]:
    """One rank of a 2-rank plan whose rendezvous never comes, started here."""
    plan = Plan(ranks=(Rank(0, Node("a")), Rank(1, Node("b"))), port=1, python=sys.executable)
    spec = {**worker_spec(plan, plan.ranks[rank]), **extra}
    source = worker_source()
    events: queue.Queue[Event] = queue.Queue()
    worker = start(
        rank, LocalLauncher(), Node("b"), worker_argv(sys.executable, source, spec), source, events
    )
    assert not isinstance(worker, str) and isinstance(worker.process, LocalProcess)
    return worker, events


def test_worker_is_python_3_8_and_imports_only_stdlib_and_torch() -> None:
    tree = ast.parse(worker_source(), feature_version=(3, 8))
    defined: set[str] = set()
    imported = set()
    for node in tree.body:
        if isinstance(node, ast.If) and "globals()" in ast.unparse(node.test):
            # The tree's own imports, for tests: shipped, a part above defines the name first.
            guarded = ast.literal_eval(node.test.left)  # type: ignore[attr-defined]
            assert guarded in defined, ast.unparse(node.test)
            continue
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            defined.add(node.name)
        for inner in ast.walk(node):
            if isinstance(inner, ast.Import):
                imported.update(a.name.split(".")[0] for a in inner.names)
            elif isinstance(inner, ast.ImportFrom):
                imported.add((inner.module or "").split(".")[0])
    third_party = {m for m in imported if m not in sys.stdlib_module_names}
    assert third_party == {"torch"}


def test_closing_the_lifeline_kills_a_worker_stuck_in_rendezvous_and_its_pulse() -> None:
    # A lone rank 1 waits for a rendezvous server that never comes, as on a dead first node.
    worker, events = started_rank(1)
    assert isinstance(worker.process, LocalProcess)
    proc = worker.process.proc
    worker.process.send(b'{"master_addr": "127.0.0.1"}\n')  # the word to go
    try:
        seen = []
        while "rendezvous" not in seen:
            line = said(events)
            assert line is not None, worker.stderr_text()
            seen.append(line.get("phase"))
        worker.process.close_stdin()  # what a dropped SSH channel does to a remote worker
        started = time.monotonic()
        assert proc.wait(timeout=10) == -9
        # Its output ends with it: its pulse, which shares the channel, went too.
        while events.get(timeout=5).data is not None:
            pass
        assert time.monotonic() - started < 5
    finally:
        worker.process.kill()


def test_a_rank_says_it_is_ready_once_imported_and_meets_no_one_before_the_word() -> None:
    worker, events = started_rank(1)
    try:
        seen = [said(events) for _ in range(2)]
        assert [e and (e["ev"], e.get("phase")) for e in seen] == [
            ("phase", "launch"),
            ("ready", None),
        ]
        with pytest.raises(queue.Empty):  # no rendezvous before the word, however long
            said(events, timeout=2)
        worker.process.send(b'{"master_addr": "127.0.0.1"}\n')
        after = said(events, timeout=10)
        assert after is not None and after["phase"] == "rendezvous"
    finally:
        worker.process.kill()


def test_a_rank_beats_from_its_start_even_while_its_main_thread_cannot_run() -> None:
    worker, events = started_rank(1)
    assert isinstance(worker.process, LocalProcess)
    pid = worker.process.proc.pid
    try:
        kinds = []
        while "ready" not in kinds:
            event = events.get(timeout=30)
            assert event.data is not None, worker.stderr_text()
            kinds.append(event.data["ev"])
        assert "beat" in kinds[: kinds.index("ready")]  # while it imported torch
        os.kill(pid, signal.SIGSTOP)  # the main process only, as a lock held in an import
        beats = []
        while len(beats) < 3:
            event = events.get(timeout=5)
            assert event.data is not None
            if event.data["ev"] == "beat":
                beats.append(event.at)
        assert 1.5 < beats[-1] - beats[0] < 4  # one a second, from the pulse alone
    finally:
        worker.process.kill()


def test_rank_zero_reports_the_interface_address_and_port_before_importing_torch() -> None:
    worker, events = started_rank(0, report_address={"iface": "lo", "port": 0})
    try:
        seen = [said(events) for _ in range(2)]
    finally:
        worker.process.kill()
    assert seen[0] is not None and seen[0]["phase"] == "launch"
    line = seen[1]
    assert line is not None
    assert (line["ev"], line["addr"], line["port_free"]) == ("address", "127.0.0.1", True)


def test_nccl_is_asked_for_what_its_version_has(monkeypatch: pytest.MonkeyPatch) -> None:
    from doctor.stages.allreduce import worker
    from doctor.stages.allreduce.run import NCCL_DEBUG_ENV

    for key, value in NCCL_DEBUG_ENV.items():
        monkeypatch.setenv(key, value)
    for key in ("NCCL_RUN_DIAGNOSTICS", "NCCL_RUN_RAS_DIAGNOSTICS"):
        monkeypatch.delenv(key, raising=False)
    old = worker.ask_nccl_to_speak((2, 21, 5))
    assert old == {
        "version": "2.21.5",
        "on": [],
        "off": [
            "NCCL 2.21.5 has no RAS (2.24+)",
            "NCCL 2.21.5 has no init-time diagnostics (2.31+)",
        ],
    }
    assert "RAS" not in os.environ["NCCL_DEBUG_SUBSYS"] and "NCCL_RUN_DIAGNOSTICS" not in os.environ
    new = worker.ask_nccl_to_speak((2, 32, 3))
    assert new["on"] == ["RAS", "diagnostics"] and not new["off"]
    assert os.environ["NCCL_DEBUG_SUBSYS"] == "INIT,BOOTSTRAP,ENV,NET,RAS"
    assert os.environ["NCCL_RUN_DIAGNOSTICS"] == os.environ["NCCL_RUN_RAS_DIAGNOSTICS"] == "1"
    assert worker.ask_nccl_to_speak(None)["off"] == [
        "RAS and diagnostics: torch does not say its NCCL version"
    ]


def test_the_rank_keeps_what_nccl_was_asked() -> None:
    from doctor.facts.allreduce_rank import RankState

    state = RankState(0, "n1")
    voice = {"version": "2.32.3", "on": ["RAS", "diagnostics"], "off": []}
    state.apply({"ev": "phase", "phase": "init", "nccl": voice}, 1.0)
    assert state.nccl_voice == voice and state.phase == "init"
