"""A real cluster on this machine: N nodes as network namespaces on a bridge, each with sshd.

Usage (root)::

    with make_cluster(3, tmp_path) as c:          # nodes node1..node3
        c.ssh_config                               # Host node1 -> 198.18.X.1, key, known_hosts
        c.hosts_arg()                              # "node1,node2,node3" for doctor -H
        c.break_ssh_one_way("node2", "node3")      # node3 no longer trusts node2's key
        c.stop_sshd("node2")                       # connection refused
        c.blackhole("node3")                       # every TCP connect to node3 times out
        c.unblackhole("node3")                     # and again reachable

Other builders (testbed.md's scenarios): ``blackhole_between(a, b)`` (only a -> b times out),
``exec_prefix()`` (reach nodes as ``kubectl exec`` does, no sshd),
``forget_host_key(a, b)``, ``replace_host_key(n)``, ``deauthorize_controller(n)``,
``hostname_loopback(n)`` (own name -> 127.0.1.1), ``unresolvable_on(n, name)``,
``break_listener(n)`` (no peer reaches its TCP listeners),
``rename_interface(n, "ens5")``, ``add_docker0()`` (172.17.0.1/16 everywhere),
``shape(n, "10mbit")`` (tbf both ways), ``set_mtu(n, 1400)``, ``starve(n, 3)`` (3 % of a CPU),
``make_cluster(n, dir, small_shm=("node2",))`` (64 MB /dev/shm), ``bind_mount(n, src, dst)``.
``c.node(n).run(argv)`` runs inside a node's namespace; ``c.ssh(n, cmd)`` goes through its sshd.
``python -m tests.cluster.harness N DIR`` holds a cluster up until interrupted (benches, by hand).

Every node has its own hostname (UTS namespace), /etc/hosts and /etc/ssh (``ip netns exec``
bind-mounts /etc/netns/<ns>/*), host key, user key and known_hosts, so ``ssh nodeJ`` inside node I
behaves as on a real cluster (the mesh check runs exactly that). Each sshd runs in its own mount
namespace (``c.bind_mount`` puts a file or package on one node only) where root's ~/.bashrc is
empty: logins use the system PATH (``/usr/bin/python3``), not this machine's pyenv. The
controller is this machine: it reaches the nodes through the bridge address ``.254`` using
``c.ssh_config``.

A free /24 in 198.18.0.0/15 is claimed with an exclusive lock file, because several harnesses run
at once on this machine. Everything is removed by the names created here, and every process left in
a node's namespace is killed by pid (``ip netns pids``), even when the test fails.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.cluster.netns import Netns, sh, unique

SSHD = "/usr/sbin/sshd"
LOCK_DIR = Path("/run/lock/cluster-doctor-subnets")
CONTROLLER_HOST = 254


@dataclass
class ClusterNode:
    index: int
    name: str  # its hostname and the name other nodes and the controller use
    address: str
    ns: Netns
    dir: Path
    host_veth: str
    sshd: subprocess.Popen[bytes] | None = None
    small_shm: bool = False
    hosts_lines: list[str] = field(default_factory=list)

    @property
    def etc(self) -> Path:
        return Path("/etc/netns") / self.ns.name

    def run(self, argv: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
        """Run a command inside the node (its network namespace; the machine's hostname)."""
        return self.ns.run(argv, **kw)  # type: ignore[arg-type]


def _claim_subnet() -> tuple[int, Path]:
    """A /24 in 198.18.0.0/15 that no interface or route on this machine uses yet, locked for us."""
    LOCK_DIR.mkdir(parents=True, exist_ok=True)
    used = sh("ip", "-4", "-o", "addr").stdout + sh("ip", "-4", "route").stdout
    for third in range(10, 250):
        if f"198.18.{third}." in used:
            continue
        lock = LOCK_DIR / str(third)
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            with contextlib.suppress(OSError, ValueError):
                pid = int(lock.read_text())
                if not Path(f"/proc/{pid}").exists():  # its harness died: reclaim
                    lock.unlink()
            continue
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        return third, lock
    raise RuntimeError("no free 198.18.x.0/24 left for a test cluster")


def _keygen(path: Path, comment: str) -> str:
    sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path))
    return (path.with_suffix(".pub")).read_text().strip()


# A real cluster has a switch, and a NIC and a kernel per node; here every node shares this
# machine's kernel, so two of its tables are shared by the whole cluster and their defaults are
# sized for one host. The ARP cache is one table for every namespace (gc_thresh3 1,024 entries:
# 128 nodes each resolving their peers overflow it, "neighbor table overflow" in the kernel
# log, and SYNs to unresolved peers time out), and every packet between nodes passes one per-CPU
# backlog queue (veth delivers with netif_rx: 1,000 packets, where an ARP broadcast to 128 nodes
# is 128 at once). What the test bed costs is not the doctor's: give both room for the cluster.
KERNEL_TABLES_PER_NODE = {
    "net/core/netdev_max_backlog": 1000,
    "net/ipv4/neigh/default/gc_thresh1": 16,
    "net/ipv4/neigh/default/gc_thresh2": 64,
    "net/ipv4/neigh/default/gc_thresh3": 128,
}


def _roomy_kernel_tables(n: int) -> None:
    for name, per_node in KERNEL_TABLES_PER_NODE.items():
        path = Path("/proc/sys") / name
        if int(path.read_text()) < per_node * n:
            path.write_text(str(per_node * n))


class Cluster:
    """N nodes with real sshd; see the module docstring. Build with :func:`make_cluster`."""

    def __init__(self, n: int, workdir: Path, *, small_shm: tuple[str, ...] = ()) -> None:
        self.workdir = workdir
        self.prefix = unique("c")[:9]
        self.third, self._lock = _claim_subnet()
        self.subnet = f"198.18.{self.third}"
        self.bridge = f"{self.prefix}br"
        self.controller_address = f"{self.subnet}.{CONTROLLER_HOST}"
        self.nodes: list[ClusterNode] = []
        self.extra_links: list[str] = []  # root-namespace links a builder added: removed on close
        self.cgroups: list[Path] = []  # CPU cgroups a builder made (``starve``): removed on close
        self.client_key = workdir / "client_ed25519"
        self.known_hosts = workdir / "known_hosts"
        self.ssh_config = workdir / "ssh_config"
        try:
            self._build(n, set(small_shm))
        except BaseException:
            self.close()
            raise

    # -- construction --------------------------------------------------------------------------
    def _build(self, n: int, small_shm: set[str]) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        _roomy_kernel_tables(n)
        sh("ip", "link", "add", self.bridge, "type", "bridge")
        sh("ip", "addr", "add", f"{self.controller_address}/24", "dev", self.bridge)
        sh("ip", "link", "set", self.bridge, "up")
        client_pub = _keygen(self.client_key, "controller")
        for i in range(1, n + 1):
            name = f"node{i}"
            ns = Netns(f"{self.prefix}n{i}")
            node = ClusterNode(
                i, name, f"{self.subnet}.{i}", ns, self.workdir / name, f"{self.prefix}h{i}"
            )
            node.small_shm = name in small_shm
            self.nodes.append(node)
            sh("ip", "link", "add", node.host_veth, "type", "veth", "peer", "name", "eth0",
               "netns", ns.name)  # fmt: skip
            sh("ip", "link", "set", node.host_veth, "master", self.bridge, "up")
            ns.ip("addr", "add", f"{node.address}/24", "dev", "eth0")
            ns.ip("link", "set", "eth0", "up")
            node.dir.mkdir(parents=True)
            (node.etc / "ssh").mkdir(parents=True)
        host_keys = {}
        user_keys = {}
        for node in self.nodes:
            host_keys[node.name] = _keygen(node.dir / "ssh_host_ed25519_key", node.name)
            user_keys[node.name] = _keygen(node.dir / "id_ed25519", f"root@{node.name}")
        known = "".join(f"{nd.name},{nd.address} {host_keys[nd.name]}\n" for nd in self.nodes)
        self.known_hosts.write_text(known)
        for node in self.nodes:
            (node.dir / "known_hosts").write_text(known)
            keys = [client_pub, *user_keys.values()]
            (node.dir / "authorized_keys").write_text("\n".join(keys) + "\n")
            node.hosts_lines = [f"{nd.address} {nd.name}" for nd in self.nodes]
            self._write_hosts(node)
            self._write_configs(node)
        self.ssh_config.write_text(
            "".join(
                f"Host {nd.name}\n  HostName {nd.address}\n  User root\n"
                f"  IdentityFile {self.client_key}\n  UserKnownHostsFile {self.known_hosts}\n"
                "  StrictHostKeyChecking yes\n"
                for nd in self.nodes
            )
        )
        Path("/run/sshd").mkdir(exist_ok=True)
        (self.workdir / "bashrc").write_text("# test node: no per-login setup\n")
        for node in self.nodes:
            self.start_sshd(node.name)
        self.wait_ready()

    def _write_hosts(self, node: ClusterNode) -> None:
        lines = ["127.0.0.1 localhost", *node.hosts_lines]
        (node.etc / "hosts").write_text("\n".join(lines) + "\n")

    def _write_configs(self, node: ClusterNode) -> None:
        (node.dir / "sshd_config").write_text(
            f"ListenAddress 0.0.0.0\nPort 22\nHostKey {node.dir}/ssh_host_ed25519_key\n"
            f"PidFile {node.dir}/sshd.pid\nAuthorizedKeysFile {node.dir}/authorized_keys\n"
            "PermitRootLogin yes\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
            "StrictModes no\nUsePAM no\nMaxStartups 200\nLogLevel ERROR\n"
            "Subsystem sftp /usr/lib/openssh/sftp-server\n"
        )
        # The node's system-wide client config: what `ssh nodeJ` (mpirun, pdsh) uses there.
        (node.etc / "ssh" / "ssh_config").write_text(
            f"Host *\n  IdentityFile {node.dir}/id_ed25519\n"
            f"  UserKnownHostsFile {node.dir}/known_hosts\n"
            f"  GlobalKnownHostsFile {node.dir}/known_hosts\n"
        )

    def start_sshd(self, name: str) -> None:
        node = self.node(name)
        setup = f"hostname {node.name}"
        if Path("/root/.bashrc").exists():
            # A fresh node's shell: this machine's root .bashrc runs `pyenv init` (a rehash under
            # a global lock) in every SSH login, which hundreds of mesh logins queue on.
            setup += f" && mount --bind {shlex.quote(str(self.workdir / 'bashrc'))} /root/.bashrc"
        if Path("/root/.ssh").is_dir():
            # A node's own ~/.ssh, empty: this machine's (another test bed writes `Host node1`
            # entries to its config) would send the node's `ssh node1` to that bed's address.
            (node.dir / "dotssh").mkdir(mode=0o700, exist_ok=True)
            setup += f" && mount --bind {shlex.quote(str(node.dir / 'dotssh'))} /root/.ssh"
        if node.small_shm:  # Docker's default: a 64 MB tmpfs on /dev/shm
            setup += " && mount -t tmpfs -o size=64m tmpfs /dev/shm"
        script = f"{setup} && exec {SSHD} -D -e -f {shlex.quote(str(node.dir / 'sshd_config'))}"
        log = open(node.dir / "sshd.log", "ab")  # noqa: SIM115  (owned by the child)
        node.sshd = subprocess.Popen(
            node.ns.exec_argv(
                ["unshare", "--uts", "--mount", "--propagation", "private", "sh", "-c", script]
            ),
            stdout=log,
            stderr=log,
            stdin=subprocess.DEVNULL,
        )
        log.close()

    def wait_ready(self, timeout: float = 15.0) -> None:
        """Wait until every running sshd accepts TCP (from inside its own node)."""
        deadline = time.monotonic() + timeout
        for node in self.nodes:
            if node.sshd is None:
                continue
            probe = "import socket; socket.create_connection(('127.0.0.1', 22), 1).close()"
            while node.run(["/usr/bin/python3", "-c", probe], timeout=5).returncode != 0:
                if node.sshd.poll() is not None:
                    log = (node.dir / "sshd.log").read_text()
                    raise RuntimeError(f"sshd on {node.name} exited: {log.strip()}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"sshd on {node.name} not listening after {timeout}s")
                time.sleep(0.05)

    # -- access ----------------------------------------------------------------------------------
    def node(self, name: str) -> ClusterNode:
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)

    @property
    def names(self) -> list[str]:
        return [n.name for n in self.nodes]

    def hosts_arg(self) -> str:
        return ",".join(self.names)

    def ssh(self, name: str, command: str, timeout: float = 20) -> subprocess.CompletedProcess[str]:
        """OpenSSH from the controller to a node, as a user would."""
        return subprocess.run(
            ["ssh", "-F", str(self.ssh_config), "-o", "BatchMode=yes", name, command],
            capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip

    # -- failure scenarios (testbed.md) ----------------------------------------------------------
    def break_ssh_one_way(self, src: str, dst: str) -> None:
        """``dst`` stops trusting ``src``'s key: ssh src -> dst fails, dst -> src still works."""
        node = self.node(dst)
        pub = (self.node(src).dir / "id_ed25519.pub").read_text().strip()
        keys = (node.dir / "authorized_keys").read_text().splitlines()
        (node.dir / "authorized_keys").write_text("\n".join(k for k in keys if k != pub) + "\n")

    def forget_host_key(self, src: str, dst: str) -> None:
        """``src`` no longer knows ``dst``'s host key: its ssh says host key verification failed."""
        node = self.node(src)
        dst_node = self.node(dst)
        lines = (node.dir / "known_hosts").read_text().splitlines()
        kept = [ln for ln in lines if not ln.startswith(f"{dst_node.name},")]
        (node.dir / "known_hosts").write_text("\n".join(kept) + "\n")

    def deauthorize_controller(self, name: str) -> None:
        """The node no longer accepts the controller's key: authentication fails."""
        node = self.node(name)
        pub = (self.client_key.with_suffix(".pub")).read_text().strip()
        keys = (node.dir / "authorized_keys").read_text().splitlines()
        (node.dir / "authorized_keys").write_text("\n".join(k for k in keys if k != pub) + "\n")

    def replace_host_key(self, name: str) -> None:
        """The node gets a new host key (reinstalled, or someone in the middle); sshd restarts."""
        node = self.node(name)
        self.stop_sshd(name)
        for suffix in ("", ".pub"):
            (node.dir / f"ssh_host_ed25519_key{suffix}").unlink()
        _keygen(node.dir / "ssh_host_ed25519_key", node.name)
        self.start_sshd(name)
        self.wait_ready()

    def in_mounts(self, name: str, *argv: str) -> None:
        """Run ``argv`` in the node's own mount namespace (its sshd's: what every login there
        sees). With the node's root too: entering a mount namespace starts at the namespace's
        root, which is not this machine's "/" when the test bed runs in a chroot."""
        node = self.node(name)
        assert node.sshd is not None, f"sshd on {name} is not running"
        sh("nsenter", "--target", str(node.sshd.pid), "--mount", "--root", "--wd", "--", *argv)

    def bind_mount(self, name: str, source: Path, target: str) -> None:
        """Mount ``source`` over ``target`` for the node only: a different file or package on
        one node, e.g. another Python or library."""
        self.in_mounts(name, "mount", "--bind", str(source), target)

    def node_processes(self, name: str, comm: str) -> list[int]:
        """Pids of processes named ``comm`` running in the node's namespace."""
        pids = sh("ip", "netns", "pids", self.node(name).ns.name, check=False).stdout.split()
        found = []
        for pid in pids:
            with contextlib.suppress(OSError):
                if Path(f"/proc/{pid}/comm").read_text().strip() == comm:
                    found.append(int(pid))
        return found

    def stop_sshd(self, name: str) -> None:
        """sshd stops on the node: connections are refused."""
        node = self.node(name)
        if node.sshd is not None:
            node.sshd.terminate()
            node.sshd.wait(10)
            node.sshd = None

    def exec_prefix(self, stall: str | None = None) -> str:
        """A ``--exec`` prefix that enters a node as ``kubectl exec`` enters a pod: its network,
        its own hostname and /etc/hosts, stdin joined through; no sshd involved. With ``stall``,
        entering that node hangs (a pod stuck in ContainerCreating)."""
        cases = "".join(f"  {n.name}) ns={n.ns.name} ;;\n" for n in self.nodes)
        hang = f'[ "$node" = {shlex.quote(stall)} ] && exec sleep 600\n' if stall else ""
        script = self.workdir / ("enter-stalling" if stall else "enter")
        script.write_text(
            "#!/bin/sh\n"
            '# enter NODE CMD...: run CMD inside NODE (test harness, "kubectl exec" stand-in)\n'
            'node="$1"; shift\n'
            f'case "$node" in\n{cases}  *) echo "no such node: $node" >&2; exit 1 ;;\nesac\n'
            f"{hang}"
            'exec ip netns exec "$ns" unshare --uts sh -c \'hostname "$0"; exec "$@"\' '
            '"$node" "$@"\n'
        )
        script.chmod(0o755)
        return f"{script} {{node}}"

    def blackhole(self, name: str) -> None:
        """The node drops every reply (blackhole routes to the whole subnet): connects time out.

        ARP still answers (a neighbour lookup is not routed), so peers see no error, only silence.
        """
        node = self.node(name)
        for half in ("0/25", "128/25"):  # more specific than the connected /24
            node.ns.ip("route", "add", "blackhole", f"{self.subnet}.{half}")

    def unblackhole(self, name: str) -> None:
        """Undo ``blackhole``: the node answers again (a test then checks what recovered)."""
        node = self.node(name)
        for half in ("0/25", "128/25"):
            node.ns.ip("route", "del", "blackhole", f"{self.subnet}.{half}")

    def blackhole_between(self, src: str, dst: str) -> None:
        """``dst`` drops its replies to ``src`` only: ``src`` -> ``dst`` connects time out."""
        self.node(dst).ns.ip("route", "add", "blackhole", f"{self.node(src).address}/32")

    def break_listener(self, name: str) -> None:
        """Nothing reaches the node's TCP listeners on ports 40000-60000 (where the doctor's
        reachability agents listen): its answers from there go to a blackhole, as behind a
        firewall that drops them. Its SSH (port 22) and its own connects (ephemeral ports moved
        below 40000) still work."""
        node = self.node(name)
        # TCP by its number: ip reads protocol names from /etc/protocols, which a minimal Debian
        # (no netbase) lacks ('Invalid "ipproto" value' in the clean root).
        node.ns.ip("rule", "add", "ipproto", "6", "sport", "40000-60000", "blackhole")
        node.run(["sysctl", "-qw", "net.ipv4.ip_local_port_range=30000 39999"], check=True)

    def hostname_loopback(self, name: str) -> None:
        """The node's /etc/hosts maps its own name to 127.0.1.1 (the Debian installer default)."""
        node = self.node(name)
        node.hosts_lines = [f"127.0.1.1 {node.name}"] + [
            ln for ln in node.hosts_lines if not ln.endswith(f" {node.name}")
        ]
        self._write_hosts(node)

    def unresolvable_on(self, name: str, missing: str) -> None:
        """``name``'s /etc/hosts no longer has ``missing``."""
        node = self.node(name)
        node.hosts_lines = [ln for ln in node.hosts_lines if not ln.endswith(f" {missing}")]
        self._write_hosts(node)

    def rename_interface(self, name: str, new: str) -> None:
        """Rename the node's eth0 (e.g. ens5): names differ across nodes."""
        ns = self.node(name).ns
        ns.ip("link", "set", "eth0", "down")
        ns.ip("link", "set", "eth0", "name", new)
        ns.ip("link", "set", new, "up")
        ns.ip("addr", "replace", f"{self.node(name).address}/24", "dev", new)

    def add_docker0(self, names: list[str] | None = None, addr: str = "172.17.0.1/16") -> None:
        """A docker0 bridge with the same address on every node (as Docker sets it up)."""
        for node in self.nodes if names is None else [self.node(n) for n in names]:
            node.ns.add_bridge("docker0", addr)

    def add_isolated_default_route(self, name: str, iface: str = "ens6") -> None:
        """A second NIC holding the default route that leads nowhere other nodes are (a cloud
        instance's public interface): the address is the node's own, on a link with no peers."""
        node = self.node(name)
        node.ns.add_nic(iface, f"10.99.{node.index}.1/24")
        node.ns.ip("route", "add", "default", "via", f"10.99.{node.index}.2", "dev", iface)

    def add_ipv6_fabric(self, iface: str = "ens7") -> str:
        """A second network joining every node, with IPv6 ULA addresses only (no IPv4): each
        node's ``iface`` holds ``fd00:198:18:<subnet>::<i>/64``. Returns the prefix."""
        prefix = f"fd00:198:18:{self.third}::"
        bridge = f"{self.prefix}b6"
        sh("ip", "link", "add", bridge, "type", "bridge")
        sh("ip", "link", "set", bridge, "up")
        self.extra_links.append(bridge)
        for node in self.nodes:
            host_end = f"{self.prefix}s{node.index}"
            sh("ip", "link", "add", host_end, "type", "veth", "peer", "name", iface,
               "netns", node.ns.name)  # fmt: skip
            sh("ip", "link", "set", host_end, "master", bridge, "up")
            self.extra_links.append(host_end)
            # nodad: usable at once (duplicate address detection would hold it tentative ~2 s).
            node.ns.ip("addr", "add", f"{prefix}{node.index}/64", "dev", iface, "nodad")
            node.ns.ip("link", "set", iface, "up")
        return prefix

    def shape(self, name: str, rate: str = "10mbit") -> None:
        """A slow link: token bucket on both ends of the node's veth (egress and ingress); a
        node shaped before gets the new rate."""
        node = self.node(name)
        tbf = ["root", "tbf", "rate", rate, "burst", "32kbit", "latency", "400ms"]
        node.run(["tc", "qdisc", "replace", "dev", "eth0", *tbf], check=True)
        sh("tc", "qdisc", "replace", "dev", node.host_veth, *tbf)

    def starve(self, name: str, percent: float) -> None:
        """The node gets ``percent`` of one CPU: its sshd joins a CPU cgroup with that quota, and
        every login and process after it inherits the cgroup (an overloaded node, or one whose
        ``import torch`` crawls). cgroup v1's cpu controller where it is mounted, else v2's."""
        node = self.node(name)
        assert node.sshd is not None, f"sshd on {name} is not running"
        period = 100_000
        quota = max(1000, int(period * percent / 100))
        v1 = Path("/sys/fs/cgroup/cpu")
        group = (v1 if (v1 / "cgroup.procs").exists() else Path("/sys/fs/cgroup")) / (
            f"{self.prefix}{name}"
        )
        group.mkdir(exist_ok=True)
        self.cgroups.append(group)
        if (group / "cpu.cfs_quota_us").exists():
            (group / "cpu.cfs_period_us").write_text(str(period))
            (group / "cpu.cfs_quota_us").write_text(str(quota))
        else:
            (group / "cpu.max").write_text(f"{quota} {period}")
        (group / "cgroup.procs").write_text(str(node.sshd.pid))

    def set_mtu(self, name: str, mtu: int) -> None:
        self.node(name).ns.ip("link", "set", "eth0", "mtu", str(mtu))

    # -- teardown --------------------------------------------------------------------------------
    def close(self) -> None:
        """Kill every process in our namespaces by pid, then delete what we created, by name."""
        for node in self.nodes:
            if node.sshd is not None and node.sshd.poll() is None:
                node.sshd.kill()
                node.sshd.wait(10)
            pids = sh("ip", "netns", "pids", node.ns.name, check=False).stdout.split()
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
            node.ns.delete()
            sh("ip", "link", "delete", node.host_veth, check=False)
            for path in sorted(node.etc.rglob("*"), reverse=True) if node.etc.exists() else []:
                path.rmdir() if path.is_dir() else path.unlink()
            with contextlib.suppress(OSError):
                node.etc.rmdir()
        for link in self.extra_links:
            sh("ip", "link", "delete", link, check=False)
        for group in self.cgroups:  # empty now: every process in it was killed above
            for _ in range(50):
                try:
                    group.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:  # EBUSY until the killed processes are reaped
                    time.sleep(0.1)
        sh("ip", "link", "delete", self.bridge, check=False)
        with contextlib.suppress(OSError):
            self._lock.unlink()

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextlib.contextmanager
def make_cluster(n: int, workdir: Path, *, small_shm: tuple[str, ...] = ()) -> Iterator[Cluster]:
    """``n`` nodes with real sshd, removed afterwards even when the test fails."""
    cluster = Cluster(n, workdir, small_shm=small_shm)
    try:
        yield cluster
    finally:
        cluster.close()


def main(argv: list[str]) -> None:
    """``python -m tests.cluster.harness N DIR``: hold an N-node cluster up until interrupted."""
    n, workdir = int(argv[1]), Path(argv[2])
    workdir.mkdir(parents=True, exist_ok=True)
    with make_cluster(n, workdir) as c:
        print(f"{n} nodes on {c.subnet}.0/24; ssh config: {c.ssh_config}", flush=True)
        print(f"doctor preflight -H {c.hosts_arg()} --ssh-config {c.ssh_config}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            signal.sigwait({signal.SIGINT, signal.SIGTERM})


if __name__ == "__main__":
    import sys

    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    main(sys.argv)
