"""Start programs on nodes that keep talking: stream their JSON lines back; kill them whole.

Where a transport runs a command and returns when it ends, a launcher starts one program on a
node and hands back a ``Process``: its stdout lines, its stderr, a way to write to its stdin and
to close it (the program's lifeline: it ends itself when stdin closes) and a way to kill its
process group. The allreduce ranks and the cross-node stage agents run this way, so the
controller sees every step as it happens and can tell them all to go at once.
``LocalLauncher`` runs on this machine; ``SshLauncher`` (ssh_launch.py) over the SSH transport's
connections; ``SrunLauncher`` (srun_launch.py) as one-task srun steps.
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
from typing import Any, Protocol

from doctor.core.jsonable import loads
from doctor.nodes.inventory import Node
from doctor.nodes.transport.local import spawn

# Reads exactly the program's source from stdin and runs it; what stays on stdin is the lifeline
# (and, for stage agents, the controller's word to go). The name shows in the process table.
BOOT = "import sys;exec(compile(sys.stdin.buffer.read(int(sys.argv[1])),{name!r},'exec'))"
STDERR_LIMIT = 1 << 20
CHUNK = 1 << 16
KILL_WAIT = 10.0  # seconds to see a killed remote worker's exit status


def boot_args(name: str, source: bytes, spec: dict[str, Any]) -> list[str]:
    """Arguments for a Python that reads ``source`` off its stdin and runs it with ``spec``."""
    return ["-c", BOOT.format(name=name), str(len(source)), json.dumps(spec, sort_keys=True)]


class Process(Protocol):
    def stdout_lines(self) -> Iterator[bytes]: ...

    def stderr_chunks(self) -> Iterator[bytes]: ...

    def send(self, data: bytes) -> None:
        """Write to its stdin (best effort: a process that is gone is not an error here)."""
        ...

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

    def send(self, data: bytes) -> None:
        if self.proc.stdin:
            with contextlib.suppress(OSError, ValueError):
                self.proc.stdin.write(data)
                self.proc.stdin.flush()

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
    """Every program on this machine (the nodes are only names), talking over loopback."""

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
    """One JSON line from a program (``data`` None: its stdout closed), stamped on arrival."""

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
                data = loads(line)
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
