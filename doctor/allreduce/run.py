"""Run one allreduce across the plan's ranks, under per-phase deadlines; kill every rank after."""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from importlib.resources import files
from typing import Any

from doctor.facts.allreduce import Plan, Rank, RankState, RunResult
from doctor.inventory import Node
from doctor.transport.launch import Event, Launcher, Worker, boot_args, start

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
)
NCCL_DEBUG_ENV = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,BOOTSTRAP,ENV,NET"}
# Past a phase's own deadline the worker usually reports its own timeout; wait this much for it.
GRACE = 2.0


def worker_source() -> bytes:
    return files("doctor.allreduce").joinpath("worker.py").read_bytes()


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
        "master_addr": plan.master_addr,
        "master_port": plan.port,
        "env": env,
        "report_env": list(REPORTED_ENV),
        "rendezvous_timeout_s": plan.deadlines.rendezvous,
        "collective_timeout_s": plan.deadlines.init,
        "sweep_budget_s": plan.deadlines.sweep * 0.8,
        "verify_elems": plan.verify_elems,
        "sizes": list(plan.sizes),
        "link_bytes": min(plan.link_bytes, max(plan.sizes, default=plan.link_bytes)),
    }


def rendezvous_address(
    launcher: Launcher, node: Node, iface: str | None, port: int, python: str, timeout: float
) -> tuple[str | None, bool, str]:
    """Ask ``node`` for its IPv4 address on ``iface`` and whether ``port`` is free there.

    Returns (address or None, port free, error text or "").
    """
    source = worker_source()
    argv = worker_argv(python, source, {"mode": "address", "iface": iface, "port": port})
    events: queue.Queue[Event] = queue.Queue()
    worker = start(0, launcher, node, argv, source, events)
    if isinstance(worker, str):
        return None, False, worker
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                event = events.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return None, False, f"no answer from {node.name} within {timeout:g}s"
            if event.data is None:
                break
            if event.data.get("ev") == "address":
                return event.data.get("addr"), bool(event.data.get("port_free")), ""
    finally:
        worker.process.kill()
    tail = worker.stderr_text().strip().splitlines()
    return None, False, tail[-1] if tail else f"exit status {worker.process.exit_code()}"


def run_plan(plan: Plan, launcher: Launcher, label: str = "as configured") -> RunResult:
    """Start every rank at once, follow their phases, stop at the first deadline or failure."""
    started = time.monotonic()
    source = worker_source()
    events: queue.Queue[Event] = queue.Queue()
    states = [RankState(r.rank, r.node.name, entered=started) for r in plan.ranks]
    workers: dict[int, Worker] = {}
    open_streams: set[int] = set()
    lock = threading.Lock()

    def launch(r: Rank) -> None:
        argv = worker_argv(plan.python, source, worker_spec(plan, r))
        worker = start(r.rank, launcher, r.node, argv, source, events)
        with lock:
            if isinstance(worker, str):
                states[r.rank].error, states[r.rank].failed_phase = worker, "launch"
            else:
                workers[r.rank] = worker
                open_streams.add(r.rank)

    status = "passed"
    first_failure: float | None = None
    # In parallel: one slow SSH connect must not hold back the other nodes' ranks.
    pool = ThreadPoolExecutor(max_workers=min(32, len(plan.ranks)))
    try:
        for future in [pool.submit(launch, r) for r in plan.ranks]:
            future.result()
        while open_streams:
            try:
                event = events.get(timeout=POLL)
            except queue.Empty:
                event = None
            if event is not None:
                if event.data is None:
                    open_streams.discard(event.key)
                    states[event.key].exit_code = workers[event.key].process.exit_code()
                else:
                    states[event.key].apply(event.data, event.at)
            now = time.monotonic()
            if first_failure is None and any(s.failed for s in states):
                first_failure = now
            if first_failure is not None and now - first_failure > plan.deadlines.settle:
                break
            late = [
                s
                for s in states
                if not s.failed
                and not s.done
                and now - s.entered > plan.deadlines.of(s.phase or "launch") + GRACE
            ]
            if late:
                status = "timeout"
                break
    except KeyboardInterrupt:
        # Ctrl-C: still kill every rank and say where each one was.
        status = "interrupted"
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        while not events.empty():  # lines that arrived before the end still tell the phase
            event = events.get()
            if event.data is not None:
                states[event.key].apply(event.data, event.at)
        for worker in workers.values():
            worker.process.kill()
        for key, worker in workers.items():
            states[key].stderr = worker.stderr_text()
    result = RunResult(label, plan, status, states, time.monotonic() - started)
    if status == "passed" and not (all(s.done for s in states) and result.verified):
        result.status = "failed"
    return result
