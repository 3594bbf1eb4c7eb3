"""Programs over the SSH transport's cached connections, streamed as they run."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import paramiko

from doctor.core.model import NodeFailure
from doctor.nodes.inventory import Node
from doctor.nodes.transport.launch import CHUNK, KILL_WAIT, Process
from doctor.nodes.transport.ssh import SshTransport, remote_command, send_stdin, split_pid


class SshProcess:
    def __init__(self, transport: SshTransport, node: Node, chan: paramiko.Channel) -> None:
        self.transport, self.node, self.chan = transport, node, chan
        self.pid: int | None = None

    def stdout_lines(self) -> Iterator[bytes]:
        with contextlib.suppress(paramiko.SSHException):  # a dropped channel ends the stream
            yield from self.chan.makefile("rb")

    def stderr_chunks(self) -> Iterator[bytes]:
        first = True
        with contextlib.suppress(paramiko.SSHException):
            for chunk in iter(lambda: self.chan.recv_stderr(CHUNK), b""):
                if first:  # the remote wrapper announces the process group's pid first
                    self.pid, chunk = split_pid(chunk)
                    first = False
                yield chunk

    def send(self, data: bytes) -> None:
        with contextlib.suppress(OSError, EOFError, paramiko.SSHException):
            self.chan.sendall(data)

    def close_stdin(self) -> None:
        with contextlib.suppress(OSError, EOFError, paramiko.SSHException):
            self.chan.shutdown_write()

    def kill(self) -> None:
        if not self.chan.exit_status_ready():
            # The group kill, and the lifeline (stdin EOF) for a worker whose pid never arrived;
            # its exit status coming back is the proof it is gone from the node.
            self.transport.kill_group(self.node, self.pid)
            self.close_stdin()
            self.chan.status_event.wait(KILL_WAIT)
        self.chan.close()

    def exit_code(self) -> int | None:
        if not self.chan.status_event.wait(KILL_WAIT):
            return None
        return self.chan.recv_exit_status()


class SshLauncher:
    """Programs on remote nodes over the SSH transport's cached connections."""

    def __init__(self, transport: SshTransport, timeout: float = 10.0) -> None:
        self.transport, self.timeout = transport, timeout

    def start(self, node: Node, argv: list[str], stdin: bytes) -> Process | str:
        chan = self.transport.session(node, self.timeout)
        if isinstance(chan, NodeFailure):
            return chan.summary
        try:
            chan.exec_command(remote_command(argv))
            send_stdin(chan, stdin)
        except (OSError, EOFError, paramiko.SSHException) as exc:
            chan.close()
            return f"SSH session to {node.name} failed: {exc}"
        return SshProcess(self.transport, node, chan)
