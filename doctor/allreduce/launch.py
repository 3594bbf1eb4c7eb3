"""Start worker ranks on nodes and stream their JSON lines back; kill them whole.

A launcher starts one program on a node and hands back a ``Process``: its stdout lines, its
stderr, a way to close its stdin (the worker's lifeline) and a way to kill its process group.
``LocalLauncher`` runs on this machine; ``SshLauncher`` (ssh_launch.py) runs over the SSH
transport's connections, streaming, so the controller sees every phase as it happens.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib.resources import files
from typing import Any, Protocol

from doctor.inventory import Node
from doctor.transport.local import spawn

# Reads exactly the worker's source from stdin and runs it; what stays on stdin is the lifeline.
BOOT = "import sys;exec(compile(sys.stdin.buffer.read(int(sys.argv[1])),'allreduce-worker','exec'))"
STDERR_LIMIT = 1 << 20
CHUNK = 1 << 16
KILL_WAIT = 10.0  # seconds to see a killed remote worker's exit status


def worker_source() -> bytes:
    return files("doctor.allreduce").joinpath("worker.py").read_bytes()


def worker_argv(python: str, source: bytes, spec: dict[str, Any]) -> list[str]:
    return [python, "-c", BOOT, str(len(source)), json.dumps(spec, sort_keys=True)]


class Process(Protocol):
    def stdout_lines(self) -> Iterator[bytes]: ...

    def stderr_chunks(self) -> Iterator[bytes]: ...

    def close_stdin(self) -> None: ...

    def kill(self) -> None:
        """Kill the whole process group on its node, and wait for it to end here."""
        ...

    def exit_code(self) -> int | None: ...


class Launcher(Protocol):
    def start(self, node: Node, argv: list[str], stdin: bytes) -> Process | str:
        """Start ``argv`` on ``node``, writing ``stdin`` and keeping it open; or the error text."""
        ...


class LocalProcess:
    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc

    def stdout_lines(self) -> Iterator[bytes]:
        assert self.proc.stdout
        yield from self.proc.stdout

    def stderr_chunks(self) -> Iterator[bytes]:
        assert self.proc.stderr
        fd = self.proc.stderr.fileno()
        yield from iter(lambda: os.read(fd, CHUNK), b"")

    def close_stdin(self) -> None:
        if self.proc.stdin:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.close_stdin()
        self.proc.wait()

    def exit_code(self) -> int | None:
        return self.proc.wait()


class LocalLauncher:
    """Every rank on this machine (the nodes are only names), talking over loopback."""

    def start(self, node: Node, argv: list[str], stdin: bytes) -> Process | str:
        try:
            proc = spawn(argv)
        except OSError as exc:
            return f"cannot run {argv[0]}: {exc.strerror}"
        assert proc.stdin
        with contextlib.suppress(OSError):  # it died at once: its exit and stderr say why
            proc.stdin.write(stdin)
            proc.stdin.flush()
        return LocalProcess(proc)


@dataclass
class Event:
    """One JSON line from a rank (``data`` None: its stdout closed), stamped on arrival."""

    key: int
    data: dict[str, Any] | None
    at: float


@dataclass
class Worker:
    """One started worker; its stdout lines go to the shared queue as Events."""

    key: int
    process: Process
    stderr: bytearray = field(default_factory=bytearray)
    junk: list[str] = field(default_factory=list)  # stdout lines that were not JSON

    def stderr_text(self) -> str:
        return self.stderr.decode("utf-8", "replace")


def start(
    key: int,
    launcher: Launcher,
    node: Node,
    argv: list[str],
    source: bytes,
    events: queue.Queue[Event],
) -> Worker | str:
    """Start one worker and its reader threads; the error text when it cannot be started."""
    process = launcher.start(node, argv, source)
    if isinstance(process, str):
        return process
    worker = Worker(key, process)
    threading.Thread(target=_read_stdout, args=(worker, events), daemon=True).start()
    threading.Thread(target=_read_stderr, args=(worker,), daemon=True).start()
    return worker


def _read_stdout(worker: Worker, events: queue.Queue[Event]) -> None:
    with contextlib.suppress(OSError, EOFError):
        for raw in worker.process.stdout_lines():
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
    with contextlib.suppress(OSError, EOFError):
        for chunk in worker.process.stderr_chunks():
            worker.stderr.extend(chunk)
            if len(worker.stderr) > STDERR_LIMIT:
                # Keep the head (NCCL's init lines) and the newest tail (the error).
                del worker.stderr[STDERR_LIMIT // 2 : len(worker.stderr) - STDERR_LIMIT // 2]
