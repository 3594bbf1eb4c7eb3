"""Run one allreduce across the plan's ranks, under per-phase deadlines; kill every rank after."""

from __future__ import annotations

import json
import queue
import subprocess
import time

from doctor.allreduce.launch import Event, Launcher, Worker, start, worker_argv, worker_source
from doctor.allreduce.plan import Plan
from doctor.allreduce.result import RankState, RunResult
from doctor.inventory import Node

POLL = 0.05
# Past a phase's own deadline the worker usually reports its own timeout; wait this much for it.
GRACE = 2.0


def rendezvous_address(
    launcher: Launcher, node: Node, iface: str | None, port: int, python: str, timeout: float
) -> tuple[str | None, bool, str]:
    """Ask ``node`` for its IPv4 address on ``iface`` and whether ``port`` is free there.

    Returns (address or None, port free, error text or "").
    """
    source = worker_source()
    argv = launcher.wrap(
        node, worker_argv(python, source, {"mode": "address", "iface": iface, "port": port})
    )
    try:
        done = subprocess.run(argv, input=source, capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return None, False, f"no answer from {node.name} within {timeout:g}s"
    except OSError as exc:
        return None, False, f"cannot run {argv[0]}: {exc.strerror}"
    for line in done.stdout.decode("utf-8", "replace").splitlines():
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict) and data.get("ev") == "address":
            return data.get("addr"), bool(data.get("port_free")), ""
    tail = done.stderr.decode("utf-8", "replace").strip().splitlines()
    return None, False, tail[-1] if tail else f"exit status {done.returncode}"


def run_plan(plan: Plan, launcher: Launcher, label: str = "as configured") -> RunResult:
    """Start every rank at once, follow their phases, stop at the first deadline or failure."""
    started = time.monotonic()
    source = worker_source()
    events: queue.Queue[Event] = queue.Queue()
    states = [RankState(r.rank, r.node.name, entered=started) for r in plan.ranks]
    workers: dict[int, Worker] = {}
    open_streams = set()
    for r in plan.ranks:
        argv = launcher.wrap(r.node, worker_argv(plan.python, source, plan.worker_spec(r)))
        worker = start(r.rank, argv, source, events)
        if isinstance(worker, str):
            states[r.rank].error, states[r.rank].failed_phase = worker, "launch"
            continue
        workers[r.rank] = worker
        open_streams.add(r.rank)

    status = "passed"
    first_failure: float | None = None
    try:
        while open_streams:
            try:
                event = events.get(timeout=POLL)
            except queue.Empty:
                event = None
            if event is not None:
                if event.data is None:
                    open_streams.discard(event.key)
                    workers[event.key].proc.wait()
                    states[event.key].exit_code = workers[event.key].proc.returncode
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
        for worker in workers.values():
            worker.kill()
        for key, worker in workers.items():
            states[key].stderr = worker.stderr_text()
            if states[key].exit_code is None and key not in open_streams:
                states[key].exit_code = worker.proc.returncode
    result = RunResult(label, plan, status, states, time.monotonic() - started)
    if status == "passed" and not (all(s.done for s in states) and result.verified):
        result.status = "failed"
    return result
