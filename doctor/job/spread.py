"""Run the job: one keeper (keeper.py) per node through the transport's launcher, output streamed
with node prefixes and kept whole per node, every node ended together.

A node whose command ends with an error (or cannot be started) ends the others after ``grace``
seconds; Ctrl-C and the user's deadline end them at once. With a ``watch``, a job that printed
nothing for ``hang_after`` seconds is looked at (doctor/job/watch.py): moving, it goes on; hung,
it is reported once (until it prints again) or ended. Ending a node closes its keeper's
lifeline, so the keeper ends its command's processes (SIGTERM, SIGKILL after its own grace);
a keeper that still does not end is killed through the launcher. The exit code is the worst
node's.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any, BinaryIO

from doctor.core.errors import EXIT_INTERRUPTED
from doctor.core.files import inside
from doctor.core.model import CheckOutcome
from doctor.nodes.inventory import Node
from doctor.nodes.transport.launch import KILL_WAIT, Launcher, Process, boot_args

POLL = 0.1
KEEPER_GRACE = 5.0  # seconds a keeper gives the command between SIGTERM and SIGKILL
TIMED_OUT = 124
NOT_STARTED = 255  # the exit code of a node whose command could not be started, as ssh's


@dataclass(frozen=True)
class Launch:
    """One node's command and what to set in its environment."""

    node: Node
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    remove: tuple[str, ...] = ()  # files the doctor has the job make, removed after it (globs)


@dataclass
class NodeRun:
    launch: Launch
    log: Path
    process: Process | None = None
    error: str = ""  # why it could not be started
    code: int | None = None
    ended: float | None = None  # monotonic time its command ended
    done: threading.Event = field(default_factory=threading.Event)

    @property
    def name(self) -> str:
        return self.launch.node.name


@dataclass
class JobResult:
    runs: list[NodeRun]
    seconds: float
    interrupted: bool = False
    timed_out: bool = False
    hung: bool = False  # ended by the doctor's hang watch (--on-hang stop)
    hangs: list[dict[str, Any]] = field(default_factory=list)  # the watch's verdicts
    stopped: list[str] = field(default_factory=list)  # nodes ended by the doctor
    judged: list[CheckOutcome] = field(default_factory=list)  # the hang check's, when hung

    def exit_code(self) -> int:
        """The worst code of the nodes that failed by themselves; 130 after Ctrl-C, 124 past
        the time limit (as timeout(1)) or when ended as hung."""
        if self.interrupted:
            return EXIT_INTERRUPTED
        worst = max((r.code or 0 for r in self.failed()), default=0)
        return worst or (TIMED_OUT if self.timed_out or self.hung else 0)

    def failed(self) -> list[NodeRun]:
        """The nodes whose command failed by itself, in the order they ended."""
        bad = [r for r in self.runs if r.code != 0 and r.name not in self.stopped]
        return sorted(bad, key=lambda r: r.ended or 0.0)


def keeper_source() -> bytes:
    return files("doctor.job").joinpath("keeper.py").read_bytes()


# What a rank prints when a collective timed out: the moment to look, before its watchdog ends
# the ranks (PyTorch's ProcessGroupNCCL, Gloo, Horovod's stall inspector).
ALARMS = re.compile(
    rb"Watchdog caught collective operation timeout|failure detected by watchdog"
    rb"|Received a dump signal|[Tt]imed out waiting \d+ ?ms for|Timeout at NCCL work"
    rb"|waiting for remainder of ranks"
)


class Output:
    """Lines to the terminal, prefixed by node when there are several, and whole to the log."""

    def __init__(self, prefixed: bool) -> None:
        self.prefixed = prefixed
        self.lock = threading.Lock()
        self.last = time.monotonic()  # when the job last printed anything, on any node
        self.alarm: tuple[float, str] | None = None  # the first timeout line: when, and it

    def relay(self, name: str, chunks: Iterator[bytes], to: BinaryIO, log: BinaryIO) -> None:
        head = f"[{name}] ".encode() if self.prefixed else b""
        rest = b""
        with contextlib.suppress(OSError, EOFError):
            for chunk in chunks:
                rest += chunk
                *lines, rest = rest.split(b"\n")
                self._write(to, log, [head + ln + b"\n" for ln in lines], chunk)
        if rest:
            self._write(to, log, [head + rest + b"\n"], rest + b"\n")

    def _write(self, to: BinaryIO, log: BinaryIO, lines: list[bytes], raw: bytes) -> None:
        with self.lock:
            self.last = time.monotonic()
            if self.alarm is None and (found := ALARMS.search(raw)):
                start = raw.rfind(b"\n", 0, found.start()) + 1
                end = raw.find(b"\n", found.end())
                said = raw[start : end if end >= 0 else len(raw)].decode("utf-8", "replace")
                self.alarm = (self.last, said.strip()[:300])
            log.write(raw)
            log.flush()
            if lines:
                with contextlib.suppress(OSError):
                    to.write(b"".join(lines))
                    to.flush()


def _follow(run: NodeRun, output: Output) -> None:
    """Relay the node's output until its streams close, then record how it ended."""
    assert run.process is not None
    process = run.process
    with open(run.log, "ab") as log:
        err = threading.Thread(
            target=output.relay,
            args=(run.name, process.stderr_chunks(), sys.stderr.buffer, log),
            daemon=True,
        )
        err.start()
        output.relay(run.name, process.stdout_lines(), sys.stdout.buffer, log)
        err.join(KILL_WAIT)
    run.code = process.exit_code()
    if run.code is None:
        run.code = NOT_STARTED
    run.ended = time.monotonic()
    run.done.set()


def _start(
    run: NodeRun, launcher: Launcher, python: str, output: Output, halt: threading.Event
) -> None:
    source = keeper_source()
    spec = {
        "argv": run.launch.argv,
        "env": run.launch.env,
        "cwd": os.getcwd(),
        "grace": KEEPER_GRACE,
        "remove": list(run.launch.remove),
    }
    started = launcher.start(
        run.launch.node, [python, *boot_args("doctor-job", source, spec)], source
    )
    if isinstance(started, str):
        run.error, run.code, run.ended = started, NOT_STARTED, time.monotonic()
        run.log.write_text(f"doctor: not started: {started}\n")
        run.done.set()
        return
    run.process = started
    if halt.is_set():  # the job was stopped while this node was being reached
        started.close_stdin()
    _follow(run, output)


def run_job(
    launches: list[Launch],
    launcher: Launcher,
    python: str,
    folder: Path,
    *,
    grace: float = 10.0,
    timeout: float | None = None,
    watch: Callable[[float, str], str] | None = None,
    hang_after: float | None = None,
) -> JobResult:
    """Start every node's command at once and wait for all of them (see the module's rules).
    ``watch(quiet_seconds, why)`` says "moving", "report" or "stop": called after ``hang_after``
    seconds of silence, or at once when a rank prints that a collective timed out (its
    watchdog ends the ranks soon after: the look must come first)."""
    folder.mkdir(parents=True, exist_ok=True)
    output = Output(prefixed=len(launches) > 1)
    runs = [NodeRun(launch, inside(folder, launch.node.name, ".log")) for launch in launches]
    began = time.monotonic()
    result = JobResult(runs, 0.0)
    halt = threading.Event()
    threads = [
        threading.Thread(target=_start, args=(run, launcher, python, output, halt), daemon=True)
        for run in runs
    ]
    quiet_since, reported, alarmed = began, False, False
    try:
        for thread in threads:
            thread.start()
        while not all(run.done.is_set() for run in runs):
            time.sleep(POLL)
            now = time.monotonic()
            if output.last > quiet_since:
                quiet_since, reported = output.last, False
            alarm = output.alarm if not alarmed else None  # one look for the first alarm
            quiet = now - quiet_since >= hang_after if hang_after else False
            if watch and hang_after and (alarm or (quiet and not reported)):
                alarmed = alarmed or alarm is not None
                said = watch(now - quiet_since, f"a rank printed: {alarm[1]}" if alarm else "")
                if said == "stop":
                    result.hung = True
                    break
                # Moving: another quiet spell before the next look. Hung: not again until the
                # job prints something.
                quiet_since, reported = time.monotonic(), said == "report"
                continue
            first_bad = min(
                (r.ended for r in runs if r.ended is not None and r.done.is_set() and r.code),
                default=None,
            )
            if first_bad is not None and now - first_bad > grace:
                break
            if timeout is not None and now - began > timeout:
                result.timed_out = True
                break
    except KeyboardInterrupt:
        result.interrupted = True
    finally:
        result.stopped = _stop(runs, halt)
        for thread in threads:
            thread.join(KILL_WAIT)
    result.seconds = time.monotonic() - began
    return result


def _stop(runs: list[NodeRun], halt: threading.Event) -> list[str]:
    """End every node still running: its lifeline first, the launcher's kill after."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut this
    try:
        halt.set()
        running = [r for r in runs if not r.done.is_set()]
        for run in running:
            if run.process is not None:
                run.process.close_stdin()
        stop_at = time.monotonic() + KEEPER_GRACE + KILL_WAIT
        while any(not r.done.is_set() for r in running) and time.monotonic() < stop_at:
            time.sleep(POLL)
        for run in running:
            if not run.done.is_set() and run.process is not None:
                run.process.kill()
        return [r.name for r in running]
    finally:
        signal.signal(signal.SIGINT, previous)
