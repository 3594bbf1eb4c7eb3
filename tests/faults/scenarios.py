"""The fault matrix: every scenario, the commands it runs under, and what each may end with.

A scenario breaks one thing (on node3, or between node2 and node3, or on the controller) for the
length of one run and then puts it back, so one 3-node cluster serves the whole matrix.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

from tests.cluster.harness import Cluster
from tests.faults import builders as b
from tests.faults.runner import Trigger, interrupt

NODES = ("node1", "node2", "node3")
COMMANDS = ("preflight", "allreduce", "collect")
WITH_SRUN = (*COMMANDS, "srun")  # where the fault means something to a SLURM allocation
CONNECT_TIMEOUT = 5.0  # 2 s timed out healthy nodes while this 2-core machine ran at load 58
PROBE_DEADLINE = 10.0
# What each command may take at most with these settings: connecting (5 s), the probe's
# deadline (10 s) and the transport's grace after it (5 s), start-up and the report (3 s); then
# the allreduce's phase deadlines where one stalls (a dead peer is seen at the next phase
# boundary, 40 s covers launch and rendezvous); and for preflight the reachability and mesh
# stages (30 s between them on 3 nodes); under srun, preflight plus srun's launch grace (10 s).
DEADLINES = {"collect": 25.0, "allreduce": 65.0, "preflight": 95.0, "srun": 100.0}
INTERRUPT_DEADLINE = 5.0  # seconds from Ctrl-C to the exit
SIZES = "4096,65536"  # two small sizes: the figures are about failures, not bandwidth

Fault = Callable[[Cluster, Path], AbstractContextManager[None]]


@contextlib.contextmanager
def nothing(c: Cluster, workdir: Path) -> Iterator[None]:
    yield


@dataclass(frozen=True)
class Scenario:
    name: str
    what: str  # one line for docs/reliability.md
    fault: Fault = nothing
    commands: tuple[str, ...] = COMMANDS
    faulty: frozenset[str] = frozenset()  # nodes a finding may name
    named: frozenset[str] = frozenset()  # nodes a failure must name
    unreachable: frozenset[str] = frozenset()  # nodes the report cannot hold
    exits: frozenset[int] = frozenset({1})
    trigger: Trigger | None = None
    interrupts: bool = False

    def deadline(self, command: str) -> float:
        return INTERRUPT_DEADLINE if self.interrupts else DEADLINES[command]

    def healthy(self) -> list[str]:
        return [n for n in NODES if n not in self.unreachable]


def on3(fn: Callable[..., AbstractContextManager[None]], *args: object) -> Fault:
    return lambda c, workdir: fn(c, "node3", *args)


def on3_dir(fn: Callable[..., AbstractContextManager[None]]) -> Fault:
    return lambda c, workdir: fn(c, "node3", workdir)


N3 = frozenset({"node3"})
ANY = frozenset({0, 1})

SCENARIOS = (
    Scenario(
        "healthy", "nothing broken (the reference row)", commands=WITH_SRUN, exits=frozenset({0})
    ),
    Scenario(
        "blackholed",
        "node3 drops every packet (connects time out)",
        on3(b.blackholed),
        faulty=N3,
        unreachable=N3,
    ),
    Scenario(
        "sshd-refused",
        "node3's sshd is down (connection refused)",
        on3(b.sshd_down),
        faulty=N3,
        unreachable=N3,
    ),
    Scenario(
        "sshd-hung",
        "node3's sshd is stopped (SIGSTOP): TCP is accepted, nothing answers",
        on3(b.hung_sshd),
        faulty=N3,
        unreachable=N3,
    ),
    Scenario(
        "host-key-changed",
        "node3 presents a host key other than the one known: refused, never connected",
        on3_dir(b.host_key_changed),
        faulty=N3,
        unreachable=N3,
    ),
    Scenario(
        "ssh-one-way",
        "node3 does not accept node2's key (ssh node2 -> node3 fails, node3 -> node2 works)",
        lambda c, workdir: b.one_way_ssh(c, "node2", "node3"),
        faulty=frozenset({"node2", "node3"}),
        exits=ANY,  # only preflight's mesh sees it
    ),
    Scenario(
        "no-python",
        "node3 has no Python at the path the run names",
        on3(b.no_python),
        faulty=N3,
        unreachable=N3,
    ),
    Scenario(
        "tmp-read-only",
        "node3's /tmp is a read-only tmpfs",
        on3(b.tmp_read_only),
        faulty=N3,
        exits=ANY,
    ),
    Scenario(
        "tmp-full",
        "node3's /tmp is a 16 KiB tmpfs with no byte free",
        on3(b.tmp_full),
        faulty=N3,
        exits=ANY,
    ),
    Scenario(
        "no-ip",
        "node3 has no usable `ip` (iproute2 missing)",
        on3_dir(b.no_ip),
        faulty=N3,
        exits=ANY,
    ),
    Scenario(
        "killed-mid-probe",
        "every process on node3 is killed while its probe runs",
        on3(b.revived),
        faulty=N3,
        unreachable=N3,
        trigger=Trigger("node3", "<cluster-doctor>", lambda c, pid: b.kill_node(c, "node3")),
        commands=WITH_SRUN,
    ),
    Scenario(
        "killed-mid-allreduce",
        "every process on node3 is killed 1 s into its allreduce rank",
        on3(b.revived),
        # Not collect: it runs no allreduce. Under srun it was left out while the other ranks
        # were sometimes named too; 12 of 12 runs named node3 alone after the srun fixes.
        commands=("preflight", "allreduce", "srun"),
        faulty=N3,
        named=N3,
        trigger=Trigger(
            "node3", "allreduce-worker", lambda c, pid: b.kill_node(c, "node3"), delay=1.0
        ),
        # Under srun, a rank killed while it imports torch gets no exit (srun tells none for a
        # task whose node's processes all went): its heartbeats stopping while the others' went
        # on tell it from a rank still importing (doctor/stages/allreduce/liveness.py).
    ),
    Scenario(
        "slow-link",
        "node3's link shaped to 1 Mbit/s both ways",
        on3(b.shaped, "1mbit"),
        faulty=N3,
        exits=ANY,
        commands=WITH_SRUN,
    ),
    Scenario(
        "output-read-only",
        "the controller's output folder is read-only",
        lambda c, workdir: b.output_folder(workdir / "out", read_only=True),
        exits=frozenset({2}),
        commands=WITH_SRUN,
    ),
    Scenario(
        "output-full",
        "the controller's output folder has no byte free",
        lambda c, workdir: b.output_folder(workdir / "out", read_only=False),
        exits=frozenset({2}),
        commands=WITH_SRUN,
    ),
    *(
        Scenario(
            f"ctrl-c-{phase}",
            f"Ctrl-C while the {phase} runs",
            commands=commands,
            exits=frozenset({130}),
            trigger=Trigger("node1", marker, interrupt, delay),
            interrupts=True,
        )
        for phase, marker, commands, delay in (
            ("probe", "<cluster-doctor>", WITH_SRUN, 0.0),
            ("reach", "reach-agent", ("preflight",), 0.0),
            ("mesh", "mesh-agent", ("preflight",), 0.0),
            ("allreduce", "allreduce-worker", ("preflight", "allreduce", "srun"), 1.0),
        )
    ),
)

# The srun column last: its SLURM is started once, for those runs only.
CASES = sorted(
    ((s, cmd) for s in SCENARIOS for cmd in s.commands), key=lambda case: case[1] == "srun"
)


DOCTOR = [sys.executable, "-m", "doctor"]
# srun: preflight inside a 3-node allocation, as a batch user runs it.
SALLOC = ["salloc", "-N3", "-w", "node[1-3]", "--immediate=20", "--quiet"]


def doctor_argv(c: Cluster, command: str, out: Path) -> list[str]:
    """The command line a user would type, reports into ``out``."""
    files = ["-f", "json", "--json", str(out / "report.json"), "--junit", str(out / "report.xml")]
    probe = ["--python", sys.executable, "--deadline", str(PROBE_DEADLINE)]
    if command == "srun":
        return [*SALLOC, *DOCTOR, "preflight", "--launcher", "srun", *probe, *files,
                "--sizes", SIZES]  # fmt: skip
    common = ["-H", c.hosts_arg(), "--ssh-config", str(c.ssh_config), "--python", sys.executable]
    common += ["--connect-timeout", str(CONNECT_TIMEOUT)]
    if command == "collect":
        return [*DOCTOR, "collect", *common, *probe[2:], "--save-raw", str(out)]
    if command == "preflight":
        common += probe[2:]
    return [*DOCTOR, command, *common, *files, "--sizes", SIZES]
