"""A real SLURM over namespace nodes: munge, slurmctld on this machine, one slurmd per node.

Everything lives under one scratch folder with its own munge socket, ports and state, so it never
touches a system munged/slurmctld and two runs never collide. Every daemon runs in the foreground
as a child we hold, and teardown stops exactly those (plus any job step left in a node's own
network namespace, found by that namespace's name).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.cluster.harness import Cluster
from tests.cluster.netns import sh

BINARIES = ("munged", "slurmctld", "slurmd", "srun", "salloc", "sinfo", "scontrol", "scancel")


@dataclass(frozen=True)
class SlurmNode:
    """What SLURM needs to know of a node: its name, network namespace and data address."""

    name: str
    netns: str
    address: str
    # Mount a tmpfs of this many bytes on the node's /dev/shm (a planted problem), or None.
    shm_bytes: int | None = None


SHM_64M = 64 << 20


def nodes_of(cluster: Cluster) -> list[SlurmNode]:
    """The harness's nodes as SLURM sees them (its 64 MB /dev/shm nodes keep their tmpfs)."""
    return [
        SlurmNode(n.name, n.ns.name, n.address, SHM_64M if n.small_shm else None)
        for n in (cluster.node(name) for name in cluster.names)
    ]


def missing_binaries() -> list[str]:
    return [b for b in BINARIES if shutil.which(b) is None]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        return int(s.getsockname()[1])


def slurm_conf(
    scratch: Path,
    nodes: Sequence[SlurmNode],
    *,
    controller: str,
    ctld_port: int,
    slurmd_port: int,
    prolog: str | None = None,
) -> str:
    """One slurm.conf for the controller, every slurmd and every client."""
    lines = [
        "ClusterName=doctortest",
        f"SlurmctldHost={socket.gethostname()}({controller})",
        f"SlurmctldPort={ctld_port}",
        f"SlurmdPort={slurmd_port}",
        f"AuthInfo=socket={scratch}/munge.socket",
        "SlurmUser=root",
        "SlurmdUser=root",
        f"StateSaveLocation={scratch}/state",
        f"SlurmdSpoolDir={scratch}/spool/%n",
        f"SlurmctldPidFile={scratch}/slurmctld.pid",
        f"SlurmdPidFile={scratch}/slurmd.%n.pid",
        f"SlurmctldLogFile={scratch}/slurmctld.log",
        f"SlurmdLogFile={scratch}/slurmd.%n.log",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        "ReturnToService=2",
        "MpiDefault=none",
        # Short timers so a dead slurmd is seen within a test's time, not the default 5 minutes.
        "SlurmdTimeout=30",
        "MessageTimeout=5",
        "InactiveLimit=0",
        "KillWait=2",
        "SchedulerParameters=sched_min_interval=100000",
    ]
    if prolog:
        # PrologFlags=Alloc runs the prolog at allocation, as health-checking sites configure it.
        lines += [f"Prolog={prolog}", "PrologFlags=Alloc"]
    for node in nodes:
        lines.append(
            f"NodeName={node.name} NodeAddr={node.address} NodeHostname={node.name} CPUs=1 "
            "State=UNKNOWN"
        )
    lines.append(f"PartitionName=test Nodes={','.join(n.name for n in nodes)} Default=YES")
    return "\n".join(lines) + "\n"


@dataclass
class Slurm:
    """A running SLURM; ``env`` is what a client (srun, salloc, the doctor) needs."""

    scratch: Path
    conf: Path
    nodes: list[SlurmNode]
    munged: subprocess.Popen[bytes] | None = None
    slurmctld: subprocess.Popen[bytes] | None = None
    slurmds: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        env["SLURM_CONF"] = str(self.conf)
        return env

    def client(
        self, argv: Sequence[str], timeout: float = 30, check: bool = False
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            list(argv), env=self.env, capture_output=True, text=True, timeout=timeout, check=check
        )

    def node_states(self) -> dict[str, str]:
        out = self.client(["sinfo", "-h", "-N", "-o", "%N %t"]).stdout
        return dict(line.split() for line in out.splitlines() if line.strip())

    def wait_idle(self, names: Sequence[str], timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        states: dict[str, str] = {}
        while time.monotonic() < deadline:
            states = self.node_states()
            if all(states.get(n) == "idle" for n in names):
                return
            time.sleep(0.3)
        raise RuntimeError(f"SLURM nodes not idle after {timeout}s: {states}; see {self.scratch}")

    def start_slurmd(self, node: SlurmNode) -> None:
        """slurmd inside the node: its netns, mounts (real cgroups, fresh sysfs) and hostname."""
        cg = self.scratch / f"cg-{node.name}"
        cg.mkdir(exist_ok=True)
        (self.scratch / "spool" / node.name).mkdir(parents=True, exist_ok=True)
        hosts = Path("/etc/netns") / node.netns / "hosts"
        steps = [
            f"mount --rbind /sys/fs/cgroup {cg}",
            "mount -t sysfs sysfs /sys",
            f"mount --rbind {cg} /sys/fs/cgroup",
        ]
        if hosts.exists():
            steps.append(f"mount --bind {hosts} /etc/hosts")
        if node.shm_bytes is not None:
            steps.append(f"mount -t tmpfs -o size={node.shm_bytes} shm /dev/shm")
        steps.append(f"hostname {node.name}")
        steps.append(f"exec slurmd -D -f {self.conf} -N {node.name}")
        argv = [
            "nsenter",
            f"--net=/run/netns/{node.netns}",
            "unshare",
            "-m",
            "--uts",
            "--propagation",
            "private",
            "sh",
            "-c",
            " && ".join(steps),
        ]
        log = open(self.scratch / f"slurmd-{node.name}.out", "wb")  # noqa: SIM115 (child keeps it)
        self.slurmds[node.name] = subprocess.Popen(
            argv, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()

    def stop_slurmd(self, name: str) -> None:
        proc = self.slurmds.pop(name, None)
        if proc is not None:
            _stop(proc)

    def leftovers(self) -> dict[str, list[int]]:
        """Job steps and their tasks still running in each node (slurmstepd, SLURM_JOB_ID set)."""
        found: dict[str, list[int]] = {}
        for node in self.nodes:
            pids = [
                int(p) for p in sh("ip", "netns", "pids", node.netns, check=False).stdout.split()
            ]
            alive = [p for p in pids if _is_job_process(p)]
            if alive:
                found[node.name] = alive
        return found

    def stop(self) -> None:
        """Cancel every job of this SLURM, stop its daemons, kill job processes left on nodes."""
        if self.slurmctld is not None and self.slurmctld.poll() is None:
            self.client(["scancel", "--full", "--quiet", "--state=RUNNING"], check=False)
            self.client(["scancel", "--quiet", "--state=PENDING"], check=False)
        for name in list(self.slurmds):
            self.stop_slurmd(name)
        for pids in self.leftovers().values():
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        for proc in (self.slurmctld, self.munged):
            if proc is not None:
                _stop(proc)


def _is_job_process(pid: int) -> bool:
    try:
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False  # gone already
    return comm == "slurmstepd" or b"\0SLURM_JOB_ID=" in b"\0" + environ


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        proc.wait()


def _start_munged(scratch: Path) -> subprocess.Popen[bytes]:
    key = scratch / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    argv = [
        "munged",
        "--foreground",
        "--force",
        f"--socket={scratch}/munge.socket",
        f"--key-file={key}",
        f"--pid-file={scratch}/munged.pid",
        f"--log-file={scratch}/munged.log",
        f"--seed-file={scratch}/munged.seed",
    ]
    proc = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    _wait_for(lambda: (scratch / "munge.socket").exists(), 10, "munged socket", scratch)
    return proc


def _wait_for(ready: Callable[[], bool], timeout: float, what: str, scratch: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return
        time.sleep(0.1)
    raise RuntimeError(f"{what} not ready after {timeout}s; see {scratch}")


@contextmanager
def slurm_on(cluster: Cluster, scratch: Path, *, prolog: str | None = None) -> Iterator[Slurm]:
    """SLURM over a harness cluster: slurmctld on its bridge address, slurmd in each node."""
    with slurm_cluster(
        scratch, nodes_of(cluster), controller=cluster.controller_address, prolog=prolog
    ) as slurm:
        yield slurm


@contextmanager
def slurm_cluster(
    scratch: Path, nodes: Sequence[SlurmNode], *, controller: str, prolog: str | None = None
) -> Iterator[Slurm]:
    """munged + slurmctld (listening on ``controller``) + one slurmd per node; all stopped after."""
    missing = missing_binaries()
    if missing:
        raise RuntimeError(
            "SLURM test bed needs " + ", ".join(missing) + " (apt-get install slurmctld slurmd "
            "slurm-client munge)"
        )
    scratch.mkdir(parents=True, exist_ok=True)
    scratch.chmod(0o700)  # munged refuses a world-writable socket folder
    for sub in ("state", "spool"):
        (scratch / sub).mkdir(exist_ok=True)
    conf = scratch / "slurm.conf"
    conf.write_text(
        slurm_conf(
            scratch,
            nodes,
            controller=controller,
            ctld_port=free_port(),
            slurmd_port=free_port(),
            prolog=prolog,
        )
    )
    slurm = Slurm(scratch, conf, list(nodes))
    try:
        slurm.munged = _start_munged(scratch)
        out = open(scratch / "slurmctld.out", "wb")  # noqa: SIM115 (child keeps it)
        slurm.slurmctld = subprocess.Popen(
            ["slurmctld", "-D", "-i", "-f", str(conf)],
            env=slurm.env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        out.close()
        _wait_for(
            lambda: slurm.client(["scontrol", "ping"], timeout=10).stdout.count("UP") > 0,
            20,
            "slurmctld",
            scratch,
        )
        for node in nodes:
            slurm.start_slurmd(node)
        slurm.wait_idle([n.name for n in nodes])
        yield slurm
    finally:
        slurm.stop()
