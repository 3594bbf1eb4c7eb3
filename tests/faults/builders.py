"""Faults the cluster test bed lacks (tests/cluster/harness.py has the rest): each is a real
mechanism on one node, applied as a context manager that puts the node back as it was, so one
cluster serves every scenario of the matrix.

A node's files are changed inside its sshd's own mount namespace (what every login there sees),
never on this machine: ``mount`` through ``Cluster.in_mounts`` (nsenter into the sshd's mounts).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

from tests.cluster.harness import Cluster
from tests.cluster.netns import sh
from tests.cluster.slurm import Slurm


@contextlib.contextmanager
def mounted(c: Cluster, name: str, *mount_args: str, target: str) -> Iterator[None]:
    """``mount <mount_args> <target>`` on the node only; unmounted afterwards."""
    c.in_mounts(name, "mount", *mount_args, target)
    try:
        yield
    finally:
        c.in_mounts(name, "umount", "-l", target)


@contextlib.contextmanager
def hung_sshd(c: Cluster, name: str) -> Iterator[None]:
    """sshd stopped with SIGSTOP: the kernel still accepts TCP on its socket, nothing answers."""
    node = c.node(name)
    assert node.sshd is not None
    os.kill(node.sshd.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(node.sshd.pid, signal.SIGCONT)


def python_dir() -> str:
    """The folder of the path the matrix names with ``--python``, not of the file it leads to: a
    venv's python leads to /usr/bin/python3.11, and an empty /usr/bin would take the node's
    umount with it (the node stayed without a Python for every scenario after)."""
    folder = Path(sys.executable).parent
    assert not (folder / "umount").exists(), f"{folder} holds the system's tools: run in a venv"
    return str(folder)


@contextlib.contextmanager
def no_python(c: Cluster, name: str) -> Iterator[None]:
    """The node has no such Python: an empty tmpfs over the interpreter's folder."""
    with mounted(c, name, "-t", "tmpfs", "-o", "size=4k", "tmpfs", target=python_dir()):
        yield


@contextlib.contextmanager
def tmp_read_only(c: Cluster, name: str) -> Iterator[None]:
    with mounted(c, name, "-t", "tmpfs", "-o", "ro,size=16k", "tmpfs", target="/tmp"):
        yield


@contextlib.contextmanager
def tmp_full(c: Cluster, name: str) -> Iterator[None]:
    """A 16 KiB /tmp with no byte left."""
    with mounted(c, name, "-t", "tmpfs", "-o", "size=16k", "tmpfs", target="/tmp"):
        fill = "dd if=/dev/zero of=/tmp/fill bs=4k 2>/dev/null; true"
        c.in_mounts(name, "sh", "-c", fill)
        yield


@contextlib.contextmanager
def no_ip(c: Cluster, name: str, workdir: Path) -> Iterator[None]:
    """``ip`` gone: a file that cannot be executed over the real binary (every path to it on
    this machine, /usr/sbin/ip and /sbin/ip, is a link to /usr/bin/ip)."""
    blank = workdir / "not-ip"
    blank.write_bytes(b"")
    blank.chmod(0o644)
    real = os.path.realpath("/usr/sbin/ip")
    with mounted(c, name, "--bind", str(blank), target=real):
        yield


@contextlib.contextmanager
def blackholed(c: Cluster, name: str) -> Iterator[None]:
    c.blackhole(name)
    try:
        yield
    finally:
        for half in ("0/25", "128/25"):
            c.node(name).ns.ip("route", "del", "blackhole", f"{c.subnet}.{half}")


@contextlib.contextmanager
def sshd_down(c: Cluster, name: str) -> Iterator[None]:
    c.stop_sshd(name)
    try:
        yield
    finally:
        c.start_sshd(name)
        c.wait_ready()


@contextlib.contextmanager
def host_key_changed(c: Cluster, name: str, workdir: Path) -> Iterator[None]:
    """The controller's known_hosts holds another key for the node (as after a reinstall, or
    with someone in the middle): the node presents a key the controller did not record."""
    saved = c.known_hosts.read_text()
    other = workdir / f"other_{name}_key"
    other.unlink(missing_ok=True)
    other.with_suffix(".pub").unlink(missing_ok=True)
    sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other))
    key = other.with_suffix(".pub").read_text().split()[:2]
    node = c.node(name)
    lines = [ln for ln in saved.splitlines() if not ln.startswith(f"{name},")]
    lines.append(f"{name},{node.address} {' '.join(key)}")
    c.known_hosts.write_text("\n".join(lines) + "\n")
    try:
        yield
    finally:
        c.known_hosts.write_text(saved)


@contextlib.contextmanager
def one_way_ssh(c: Cluster, src: str, dst: str) -> Iterator[None]:
    keys = c.node(dst).dir / "authorized_keys"
    saved = keys.read_text()
    c.break_ssh_one_way(src, dst)
    try:
        yield
    finally:
        keys.write_text(saved)


@contextlib.contextmanager
def shaped(c: Cluster, name: str, rate: str) -> Iterator[None]:
    c.shape(name, rate)
    try:
        yield
    finally:
        node = c.node(name)
        node.run(["tc", "qdisc", "del", "dev", "eth0", "root"])
        sh("tc", "qdisc", "del", "dev", node.host_veth, "root", check=False)


def kill_node(c: Cluster, name: str) -> None:
    """Every process in the node's namespace dies at once (the node lost power)."""
    node = c.node(name)
    for pid in sh("ip", "netns", "pids", node.ns.name, check=False).stdout.split():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)
    if node.sshd is not None:
        node.sshd.wait(10)
        node.sshd = None


@contextlib.contextmanager
def revived(c: Cluster, name: str) -> Iterator[None]:
    """After a scenario that kills the node: its sshd is started again."""
    try:
        yield
    finally:
        if c.node(name).sshd is None:
            c.start_sshd(name)
            c.wait_ready()


@contextlib.contextmanager
def output_folder(path: Path, *, read_only: bool) -> Iterator[None]:
    """The controller's output folder is a read-only tmpfs, or a full one (8 KiB, filled)."""
    path.mkdir(parents=True, exist_ok=True)
    sh("mount", "-t", "tmpfs", "-o", f"{'ro,' if read_only else ''}size=8k", "tmpfs", str(path))
    try:
        if not read_only:
            sh("sh", "-c", f"dd if=/dev/zero of={path}/fill.bin bs=4k 2>/dev/null; true")
        yield
    finally:
        sh("umount", "-l", str(path))


@contextlib.contextmanager
def slurmd_revived(slurm: Slurm, name: str) -> Iterator[None]:
    """After a scenario that kills the node: its slurmd is started again, and idle."""
    try:
        yield
    finally:
        proc = slurm.slurmds.get(name)
        if proc is None or proc.poll() is not None:
            slurm.stop_slurmd(name)
            slurm.start_slurmd(next(n for n in slurm.nodes if n.name == name))
            slurm.wait_idle([name], timeout=60)
