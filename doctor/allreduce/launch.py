"""Start worker ranks on nodes and stream their JSON lines back; kill them whole."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from importlib.resources import files
from typing import Any, Protocol

from doctor.inventory import Node

# Reads exactly the worker's source from stdin and runs it; what stays on stdin is the lifeline.
BOOT = "import sys;exec(compile(sys.stdin.buffer.read(int(sys.argv[1])),'allreduce-worker','exec'))"
STDERR_LIMIT = 1 << 20


def worker_source() -> bytes:
    return files("doctor.allreduce").joinpath("worker.py").read_bytes()


def worker_argv(python: str, source: bytes, spec: dict[str, Any]) -> list[str]:
    return [python, "-c", BOOT, str(len(source)), json.dumps(spec, sort_keys=True)]


class Launcher(Protocol):
    def wrap(self, node: Node, argv: list[str]) -> list[str]:
        """The local argv that runs ``argv`` on ``node`` with stdin/stdout passed through."""
        ...


class LocalLauncher:
    """Every rank on this machine (the nodes are only names), talking over loopback."""

    def wrap(self, node: Node, argv: list[str]) -> list[str]:
        return argv


@dataclass
class Event:
    """One JSON line from a rank (``data`` None: its stdout closed), stamped on arrival."""

    key: int
    data: dict[str, Any] | None
    at: float


@dataclass
class Worker:
    """One started worker process; its stdout lines go to the shared queue as Events."""

    key: int
    proc: subprocess.Popen[bytes]
    stderr: bytearray = field(default_factory=bytearray)
    junk: list[str] = field(default_factory=list)  # stdout lines that were not JSON

    def kill(self) -> None:
        """Kill its whole process group and close the lifeline (which ends a remote worker)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        if self.proc.stdin:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        self.proc.wait()

    def stderr_text(self) -> str:
        return self.stderr.decode("utf-8", "replace")


def start(
    key: int,
    argv: list[str],
    source: bytes,
    events: queue.Queue[Event],
    keep_stdin: bool = True,
) -> Worker | str:
    """Start one worker in its own session; the error text when it cannot be started."""
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        return f"cannot run {argv[0]}: {exc.strerror}"
    worker = Worker(key, proc)
    assert proc.stdin and proc.stdout and proc.stderr
    try:
        proc.stdin.write(source)
        proc.stdin.flush()
        if not keep_stdin:
            proc.stdin.close()
    except OSError:
        pass  # it died at once; its exit status and stderr say why
    threading.Thread(target=_read_stdout, args=(worker, events), daemon=True).start()
    threading.Thread(target=_read_stderr, args=(worker,), daemon=True).start()
    return worker


def _read_stdout(worker: Worker, events: queue.Queue[Event]) -> None:
    assert worker.proc.stdout
    for raw in worker.proc.stdout:
        line = raw.decode("utf-8", "replace").strip()
        try:
            data = json.loads(line)
        except ValueError:
            data = None
        if isinstance(data, dict):
            events.put(Event(worker.key, data, time.monotonic()))
        elif line:
            worker.junk.append(line[:300])
    events.put(Event(worker.key, None, time.monotonic()))


def _read_stderr(worker: Worker) -> None:
    assert worker.proc.stderr
    fd = worker.proc.stderr.fileno()
    for chunk in iter(lambda: os.read(fd, 65536), b""):
        worker.stderr.extend(chunk)
        if len(worker.stderr) > STDERR_LIMIT:
            # Keep the head (NCCL's init lines) and the newest tail (the error).
            del worker.stderr[STDERR_LIMIT // 2 : len(worker.stderr) - STDERR_LIMIT // 2]
