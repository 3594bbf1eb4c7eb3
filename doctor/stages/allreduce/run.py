"""Run one allreduce across the plan's ranks, under per-phase deadlines; kill every rank after."""

from __future__ import annotations

import json
import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from importlib.resources import files
from typing import Any

from doctor.facts.allreduce import Plan, Rank, RunResult
from doctor.facts.allreduce_rank import RankState
from doctor.nodes.transport.launch import Event, Launcher, Worker, boot_args, start
from doctor.stages.allreduce.liveness import BEAT_S, Pulse

POLL = 0.05
# Environment variables every rank reports at launch, so "as configured" is seen, not assumed.
REPORTED_ENV = (
    "GLOO_SOCKET_IFNAME",
    "NCCL_SOCKET_IFNAME",
    "NCCL_IB_HCA",
    "NCCL_NET",
    "NCCL_SOCKET_FAMILY",
    "NCCL_DEBUG",
    "NCCL_HOSTID",
    "MASTER_ADDR",
    "MASTER_PORT",
    "OMP_NUM_THREADS",  # 1 unless set (the worker's default, as torchrun's)
)
NCCL_DEBUG_ENV = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,BOOTSTRAP,ENV,NET"}
# Past a phase's own deadline the worker usually reports its own timeout; wait this much for it.
GRACE = 2.0


# The worker as one file: its channel to the controller, what it measures, then its phases; each
# part finds the ones above it defined.
WORKER_PARTS = ("channel.py", "measure.py", "worker.py")


def worker_source() -> bytes:
    folder = files("doctor.stages.allreduce")
    return b"\n".join(folder.joinpath(part).read_bytes() for part in WORKER_PARTS)


def worker_argv(python: str, source: bytes, spec: dict[str, Any]) -> list[str]:
    return [python, *boot_args("allreduce-worker", source, spec)]


def worker_spec(plan: Plan, rank: Rank) -> dict[str, object]:
    """The JSON argument of one rank's worker: who it is, where to meet, what to measure."""
    env = dict(plan.env)
    if plan.backend == "nccl":
        env.update(NCCL_DEBUG_ENV)
    return {
        "mode": "rank",
        "rank": rank.rank,
        "local_rank": rank.local_rank,
        "world_size": plan.world_size,
        "backend": plan.backend,
        "master_port": plan.port,
        "env": env,
        "report_env": list(REPORTED_ENV),
        "beat_s": BEAT_S,
        "rendezvous_timeout_s": plan.deadlines.rendezvous,
        "collective_timeout_s": plan.deadlines.init,
        # The word comes once every rank has imported torch, within the launch deadline of the
        # run's start, or the controller ends the run; past this a rank gives up on its own.
        "go_within_s": 2 * plan.deadlines.launch + GRACE,
        "sweep_budget_s": plan.deadlines.sweep * 0.8 if plan.sizes else plan.sweep_budget,
        "verify_elems": plan.verify_elems,
        "sizes": list(plan.sizes) if plan.sizes else None,
        "link_bytes": min(plan.link_bytes, max(plan.sizes)) if plan.sizes else None,
    }


def run_plan(
    plan: Plan, launcher: Launcher, label: str = "as configured", iface: str | None = None
) -> RunResult:
    """Start every rank at once, follow their phases, stop at the first deadline or failure.

    Rank 0 first says where the rendezvous can listen (its address on ``iface``, whether the
    port is free) while every rank imports torch; the word to go (or not) goes to all of them
    once every rank has imported torch. The launch deadline bounds that whole start, from the
    run's start; each later phase's deadline starts when the rank enters it, every rank there.
    """
    started = time.monotonic()
    source = worker_source()
    events: queue.Queue[Event] = queue.Queue()
    states = [RankState(r.rank, r.node.name, entered=started, began=started) for r in plan.ranks]
    workers: dict[int, Worker] = {}
    open_streams: set[int] = set()
    # Ranks whose output ended: a worker that dies at once (no Python on its node) can end
    # before launch() has recorded it, so the two meet under the lock whichever comes first.
    ended: set[int] = set()
    lock = threading.Lock()
    word: list[bytes] = []  # once decided: the line every rank, started or still starting, gets
    pulse = Pulse()  # when each rank was last heard from (under the lock)

    def launch(r: Rank) -> None:
        spec = worker_spec(plan, r)
        if r.rank == 0:
            spec["report_address"] = {"iface": iface, "port": plan.port}
        worker = start(
            r.rank, launcher, r.node, worker_argv(plan.python, source, spec), source, events
        )
        with lock:
            if isinstance(worker, str):
                states[r.rank].error, states[r.rank].failed_phase = worker, "launch"
                return
            workers[r.rank] = worker
            pulse.started(r.rank, time.monotonic())
            if r.rank in ended:
                states[r.rank].exit_code = worker.process.exit_code()
            else:
                open_streams.add(r.rank)
            if word:
                worker.process.send(word[0])

    def say(message: dict[str, str]) -> None:
        with lock:
            word.append((json.dumps(message) + "\n").encode())
            for worker in workers.values():
                worker.process.send(word[0])

    status, address, reason, port_taken = "passed", None, "", False
    first_failure: float | None = None
    said_at: float | None = None  # when the word to go went out
    # In parallel: one slow SSH connect must not hold back the other nodes' ranks.
    pool = ThreadPoolExecutor(max_workers=min(32, len(plan.ranks)))
    looked = started  # when the deadlines and the ranks' pulses were last looked at
    try:
        futures = [pool.submit(launch, r) for r in plan.ranks]
        while open_streams or not all(f.done() for f in futures):
            try:
                event = events.get(timeout=POLL)
            except queue.Empty:
                event = None
            if event is not None and event.data is not None:
                beat = event.data.get("ev") == "beat"
                with lock:
                    pulse.hear(event.key, event.at, beat)
                if beat and time.monotonic() - looked < POLL:
                    continue  # a beat changes nothing else: look at most every POLL for them
            if event is None:
                pass
            elif event.data is None:
                with lock:
                    ended.add(event.key)
                    open_streams.discard(event.key)
                    if event.key in workers:
                        states[event.key].exit_code = workers[event.key].process.exit_code()
                    if not states[event.key].done and not states[event.key].failed:
                        # Its output ended while the run went on, and the transport knows no
                        # exit status (srun's): the process is gone, not slow to start.
                        gone(states[event.key], "its output ended before it was done")
            elif event.data.get("ev") == "address" and address is None:
                if event.data.get("port_free"):
                    address = event.data.get("addr") or plan.master.address or "127.0.0.1"
                else:
                    status, port_taken = "not_started", True
                    reason = f"port {plan.port} is already in use on {plan.master.name}"
                    break
            else:
                states[event.key].apply(event.data, event.at)
            now = looked = time.monotonic()
            with lock:
                watched = [
                    k
                    for k in workers
                    if k not in ended and not states[k].failed and not states[k].done
                ]
                silent_ranks = pulse.gone(now, watched)
                # Only where the start waits for them alone, or its deadline is past (liveness.py
                # says why: while the others import torch, a loaded machine starves sessions).
                waits_for = all(states[k].ready for k in watched if k not in silent_ranks)
                if not (waits_for or now - started > plan.deadlines.launch):
                    silent_ranks = []
                for key in silent_ranks:
                    silent = pulse.silent_for(key, now)
                    gone(
                        states[key],
                        f"silent for {silent:.0f}s while the other ranks' heartbeats kept "
                        "coming, no exit status",
                    )
            if address is None and states[0].failed:
                status, reason = "not_started", _no_address(states[0], workers.get(0), plan)
                break
            if not word and address is not None and all(s.ready for s in states):
                said_at = now
                say({"master_addr": address})
            if first_failure is None and any(s.failed for s in states):
                first_failure = now
            if first_failure is not None and now - first_failure > plan.deadlines.settle:
                break
            if any(overdue(s, now, started, said_at, plan) for s in states):
                status = "timeout"
                break
    except KeyboardInterrupt:
        # Ctrl-C: still kill every rank and say where each one was.
        status = "interrupted"
    finally:
        if not word:
            say({"abort": reason or "stopped"})
        pool.shutdown(wait=True, cancel_futures=True)
        while not events.empty():  # lines that arrived before the end still tell the phase
            event = events.get()
            if event.data is not None and event.data.get("ev") != "address":
                states[event.key].apply(event.data, event.at)
        for worker in workers.values():
            worker.process.kill()
        for key, worker in workers.items():
            states[key].stderr = worker.stderr_text()
    result = RunResult(
        label, plan, status, states, time.monotonic() - started, reason, address=address
    )
    result.port_taken = port_taken
    if status == "passed" and not (all(s.done for s in states) and result.verified):
        result.status = "failed"
    return result


def overdue(s: RankState, now: float, started: float, said_at: float | None, plan: Plan) -> bool:
    """Whether a rank overran its phase's deadline (and the grace to report its own timeout).

    Starting (the process, then ``import torch``) is timed from the run's start: the launch
    deadline holds for the whole start. A rank that has imported torch waits for the others
    without a clock of its own until the word to go; each later phase from its entry.
    """
    if s.failed or s.done:
        return False
    if s.phase in ("", "launch"):
        if not s.ready:
            return now - started > plan.deadlines.launch + GRACE
        return said_at is not None and now - said_at > plan.deadlines.rendezvous + GRACE
    return now - s.entered > plan.deadlines.of(s.phase) + GRACE


def gone(s: RankState, why: str) -> None:
    """The rank's process, or its node, is gone: a failure of its phase, not a slow rank."""
    s.error = f"{why}: its process or its node is gone"
    s.failed_phase = s.phase or "launch"
    s.gone = True


def _no_address(rank0: RankState, worker: Worker | None, plan: Plan) -> str:
    """Why rank 0 ended before it said where the rendezvous can listen."""
    if rank0.error:
        return rank0.error
    tail = worker.stderr_text().strip().splitlines() if worker else []
    if tail:
        return tail[-1][:300]
    return f"{plan.master.name}'s rank ended before it answered (exit status {rank0.exit_code})"
