"""Run on a node over SSH (paramiko): deadlines, keepalives, host keys checked, failures classified.

Host keys are checked against known_hosts the way OpenSSH does by default: an unknown key is
refused unless ``accept_new`` (OpenSSH's ``StrictHostKeyChecking=accept-new``), which records it;
a key that differs from the recorded one is always refused. Every way a node can fail becomes a
NodeFailure with its own code, so one dead node never stops the others.
"""

from __future__ import annotations

import contextlib
import logging
import select
import shlex
import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import paramiko

from doctor.core.model import NodeFailure
from doctor.nodes.inventory import Node
from doctor.nodes.transport import ExecResult, SshOptions
from doctor.nodes.transport.known_hosts import KnownHosts

# Written first on stderr by the remote wrapper: the pid of the session leader, so that a command
# that outlives its deadline can be killed on the node with its whole process group.
PID_MARK = b"doctor-pid:"
# paramiko logs a node that fails the handshake (a hung sshd, a reset) with a traceback from its
# transport thread; with no handler of ours, Python's last resort prints it on stderr. Every such
# failure is already a NodeFailure with one line.
logging.getLogger("paramiko").addHandler(logging.NullHandler())


class HostKeyUnknown(paramiko.SSHException):
    pass


class _Policy(paramiko.MissingHostKeyPolicy):
    """Refuse unknown keys, or (accept-new) record them in the user's known_hosts file."""

    def __init__(self, accept_new: bool, record_in: Path, lock: threading.Lock) -> None:
        self.accept_new = accept_new
        self.record_in = record_in
        self.lock = lock

    def missing_host_key(
        self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey
    ) -> None:
        known = dict(client.get_host_keys().lookup(hostname) or {})
        if known or not self.accept_new:
            # A known host offering a key of another type is a changed key, never a new one.
            raise HostKeyUnknown(hostname, key.get_name(), sorted(known))
        with self.lock:
            self.record_in.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            with open(self.record_in, "a") as handle:
                handle.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")


def _known_hosts_files(options: SshOptions, node: Node) -> list[Path]:
    files = list(node.known_hosts or options.known_hosts)
    if not files:
        files = ["~/.ssh/known_hosts", "/etc/ssh/ssh_known_hosts"]
    return [Path(f).expanduser() for f in files]


def remote_command(argv: list[str]) -> str:
    """The shell command line for ``argv``: announce the pid (= process group), then exec."""
    quoted = " ".join(shlex.quote(a) for a in argv)
    return f'exec sh -c \'printf "doctor-pid:%s\\n" "$$" >&2; exec "$@"\' sh {quoted}'


def split_pid(stderr: bytes) -> tuple[int | None, bytes]:
    """Take the wrapper's pid line off the front of stderr."""
    if not stderr.startswith(PID_MARK):
        return None, stderr
    line, _, rest = stderr.partition(b"\n")
    try:
        return int(line[len(PID_MARK) :]), rest
    except ValueError:
        return None, stderr


def send_stdin(chan: paramiko.Channel, data: bytes) -> None:
    """Write ``data`` to the remote command's stdin.

    A command that exits without reading it (``/nonexistent/python3``: exit 127 at once) closes
    the channel under the write. That is not a transport failure: its exit status and stderr,
    already received, say what happened, so the caller goes on to read them.
    """
    try:
        chan.sendall(data)
    except OSError:
        if not chan.closed:
            raise


@dataclass
class SshTransport:
    """One cached SSH connection per node, opened on first use or ahead of it (``open``);
    ``close()`` ends them all."""

    options: SshOptions = field(default_factory=SshOptions)
    _clients: dict[str, paramiko.SSHClient | NodeFailure] = field(default_factory=dict)
    _closed: bool = False
    _locks: dict[str, threading.Lock] = field(default_factory=dict)
    _guard: threading.Lock = field(default_factory=threading.Lock)
    _record_lock: threading.Lock = field(default_factory=threading.Lock)
    _known: dict[tuple[Path, ...], KnownHosts] = field(default_factory=dict)

    def _fail(self, node: Node, code: str, summary: str, detail: str = "") -> NodeFailure:
        return NodeFailure(node.name, code, summary, detail)

    def _open_socket(self, node: Node, deadline: float) -> socket.socket | NodeFailure:
        host = node.address or node.name
        where = f"{host} port {node.port}"
        try:
            infos = socket.getaddrinfo(host, node.port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            return self._fail(
                node, "ssh.unresolvable", f"{host} does not resolve on the controller", str(exc)
            )
        last: NodeFailure | None = None
        for family, kind, proto, _name, addr in infos:
            sock = socket.socket(family, kind, proto)
            sock.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                sock.connect(addr)
                return sock
            except TimeoutError:
                sock.close()
                last = self._fail(
                    node,
                    "ssh.timeout",
                    f"no answer from {where} within {self.options.connect_timeout:g}s",
                    "connect timed out: the host is down, or a firewall or route drops packets",
                )
            except ConnectionRefusedError:
                sock.close()
                last = self._fail(
                    node, "ssh.refused", f"connection to {where} refused: no sshd listening"
                )
            except OSError as exc:
                sock.close()
                last = self._fail(node, "ssh.unreachable", f"cannot reach {where}: {exc.strerror}")
        assert last is not None  # getaddrinfo never returns an empty list
        return last

    def _sock_for(
        self, node: Node, deadline: float
    ) -> socket.socket | paramiko.Channel | NodeFailure:
        if not node.proxy_jump:
            return self._open_socket(node, deadline)
        jump = Node.parse_jump(node.proxy_jump)
        client = self._client(jump)
        if isinstance(client, NodeFailure):
            return self._fail(
                node, client.code, f"via jump host {jump.name}: {client.summary}", client.detail
            )
        transport = client.get_transport()
        assert transport is not None
        try:
            return transport.open_channel(
                "direct-tcpip",
                (node.address or node.name, node.port),
                ("127.0.0.1", 0),
                timeout=max(0.1, deadline - time.monotonic()),
            )
        except (paramiko.SSHException, OSError) as exc:
            return self._fail(
                node, "ssh.unreachable", f"jump host {jump.name} cannot open a channel: {exc}"
            )

    def _known_hosts(self, files: list[Path]) -> KnownHosts:
        """The known_hosts files, read once per run and shared by every connection."""
        with self._guard:
            if tuple(files) not in self._known:
                self._known[tuple(files)] = KnownHosts(files)
            return self._known[tuple(files)]

    def _connect(self, node: Node) -> paramiko.SSHClient | NodeFailure:
        opts = self.options
        deadline = time.monotonic() + opts.connect_timeout
        sock = self._sock_for(node, deadline)
        if isinstance(sock, NodeFailure):
            return sock
        host = node.address or node.name
        client = paramiko.SSHClient()
        known = _known_hosts_files(opts, node)
        # The client gets this host's entries only, under the name paramiko looks them up by
        # (it also prefers their key types when negotiating, as OpenSSH does).
        name = host if node.port == 22 else f"[{host}]:{node.port}"
        for kind, key in self._known_hosts(known).keys_for(name).items():
            client.get_host_keys().add(name, kind, key)
        client.set_missing_host_key_policy(
            _Policy(opts.accept_new_host_keys, known[0], self._record_lock)
        )
        user = node.user or opts.user
        try:
            client.connect(
                host,
                port=node.port,
                username=user,
                sock=sock,
                key_filename=list(node.identity_files or opts.identity_files) or None,  # type: ignore[arg-type]
                timeout=opts.connect_timeout,
                banner_timeout=opts.connect_timeout,
                auth_timeout=opts.connect_timeout,
                look_for_keys=True,
                allow_agent=True,
            )
        except paramiko.BadHostKeyException as exc:
            client.close()
            return self._fail(
                node,
                "ssh.host_key_changed",
                f"the host key of {host} has CHANGED since it was recorded in known_hosts",
                f"offered {exc.key.get_name()} {exc.key.get_fingerprint().hex()}",
            )
        except HostKeyUnknown as exc:
            client.close()
            hostname, kind, known_types = exc.args
            if known_types:
                summary = (
                    f"{hostname} offered a {kind} key but known_hosts has {','.join(known_types)}"
                )
                return self._fail(node, "ssh.host_key_changed", summary)
            return self._fail(
                node,
                "ssh.host_key_unknown",
                f"the host key of {hostname} is not in known_hosts",
                "read: " + ", ".join(str(p) for p in known),
            )
        except paramiko.AuthenticationException as exc:
            client.close()
            return self._fail(
                node,
                "ssh.auth_failed",
                f"{user or 'the user'}@{host} refused every key we offered",
                str(exc),
            )
        except (paramiko.SSHException, OSError, EOFError) as exc:
            transport = client.get_transport()
            # A hung sshd accepts TCP (the kernel does) and never sends its banner; paramiko then
            # fails later with an unrelated message ("No existing session").
            bannerless = transport is not None and not transport.remote_version
            client.close()
            if isinstance(exc, (TimeoutError, socket.timeout)) or (
                bannerless and time.monotonic() >= deadline
            ):
                return self._fail(
                    node, "ssh.timeout", f"{host} accepted TCP but the SSH handshake timed out"
                )
            return self._fail(node, "ssh.error", f"SSH to {host} failed: {exc}")
        transport = client.get_transport()
        if transport is not None:
            transport.set_keepalive(opts.keepalive)
        return client

    def _client(self, node: Node) -> paramiko.SSHClient | NodeFailure:
        with self._guard:
            lock = self._locks.setdefault(node.name, threading.Lock())
        with lock:
            if node.name not in self._clients:
                client = self._connect(node)
                with self._guard:
                    if self._closed and isinstance(client, paramiko.SSHClient):
                        # Opened ahead (``open``) and finished after close(): not kept open.
                        client.close()
                        client = self._fail(node, "ssh.error", "the SSH transport was closed")
                    self._clients[node.name] = client
            return self._clients[node.name]

    def open(self, nodes: Sequence[Node], window: int) -> None:
        """Begin connecting to the first ``window`` nodes now, each in a thread of its own.

        Their handshakes then go on while the caller finishes its own start-up (the checks and
        their facts load: 0.1 s of imports), and the first command on each finds its connection
        made, or waits for the one in the making. Only the first window: the rest are opened by
        the first command sent to them, as the pipeline's own window reaches them, so no more
        handshakes are in flight at once than before. A node that cannot be reached keeps its
        NodeFailure, exactly as when execute() connects.
        """
        for node in nodes[:window]:
            opener = threading.Thread(target=self._client, args=(node,), name="ssh-open")
            opener.daemon = True  # a handshake still going at exit dies with the process
            opener.start()

    def execute(
        self, node: Node, argv: list[str], stdin: bytes, timeout: float
    ) -> ExecResult | NodeFailure:
        started = time.monotonic()
        client = self._client(node)
        if isinstance(client, NodeFailure):
            return client
        deadline = started + timeout
        try:
            transport = client.get_transport()
            if transport is None or not transport.is_active():
                return self._fail(node, "ssh.error", "the SSH connection dropped")
            chan = transport.open_session(timeout=max(0.1, deadline - time.monotonic()))
            chan.exec_command(remote_command(argv))
            send_stdin(chan, stdin)
            chan.shutdown_write()
            out, err = bytearray(), bytearray()
            # Done at EOF *and* exit status: sshd may send the status before the last output.
            while not (
                (chan.eof_received or chan.closed)
                and chan.exit_status_ready()
                and not chan.recv_ready()
                and not chan.recv_stderr_ready()
            ):
                left = deadline - time.monotonic()
                if left <= 0:
                    pid, _ = split_pid(bytes(err))
                    chan.close()
                    self._kill_group(client, pid)
                    return self._fail(
                        node,
                        "node.timeout",
                        f"no answer from {argv[0]} within {timeout:g}s",
                        "the command was killed on the node" if pid else "",
                    )
                select.select([chan], [], [], min(left, 1.0))
                while chan.recv_ready():
                    out += chan.recv(1 << 16)
                while chan.recv_stderr_ready():
                    err += chan.recv_stderr(1 << 16)
            rc = chan.recv_exit_status()
            chan.close()
        except (paramiko.SSHException, OSError, EOFError) as exc:
            return self._fail(node, "ssh.error", f"SSH session to {node.name} failed: {exc}")
        _, rest = split_pid(bytes(err))
        return ExecResult(rc, bytes(out), rest, time.monotonic() - started)

    def session(self, node: Node, timeout: float) -> paramiko.Channel | NodeFailure:
        """A fresh session channel to ``node``, for a command whose output is read as it comes."""
        client = self._client(node)
        if isinstance(client, NodeFailure):
            return client
        transport = client.get_transport()
        if transport is None or not transport.is_active():
            return self._fail(node, "ssh.error", "the SSH connection dropped")
        try:
            return transport.open_session(timeout=timeout)
        except (paramiko.SSHException, OSError, EOFError) as exc:
            return self._fail(node, "ssh.error", f"SSH session to {node.name} failed: {exc}")

    def kill_group(self, node: Node, pid: int | None) -> None:
        """Kill process group ``pid`` on ``node`` (best effort, bounded)."""
        client = self._clients.get(node.name)
        if isinstance(client, paramiko.SSHClient):
            self._kill_group(client, pid)

    def _kill_group(self, client: paramiko.SSHClient, pid: int | None) -> None:
        """Kill a timed-out command's whole process group on the node (best effort, bounded)."""
        if pid is None or pid <= 1:
            return
        with contextlib.suppress(paramiko.SSHException, OSError, EOFError):
            transport = client.get_transport()
            if transport is None:
                return
            chan = transport.open_session(timeout=5)
            chan.exec_command(f"kill -KILL -- -{pid}")
            chan.status_event.wait(5)
            chan.close()

    def close(self) -> None:
        with self._guard:
            self._closed = True
            clients = list(self._clients.values())
            self._clients.clear()
        for client in clients:
            if not isinstance(client, NodeFailure):
                client.close()

    def __enter__(self) -> SshTransport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
