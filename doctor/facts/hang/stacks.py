"""A running job's processes as the stacks agent saw them (doctor/stages/stacks_agent.py).

One ``JobProcess`` per rank (and per child of a rank, such as a DataLoader worker), with its
Python threads innermost frame first, how it stood in /proc at the start and the end of the look,
and what Flight Recorder and NCCL's RAS said where they were armed. Parsing only: where each rank
is (doctor/facts/hang/position.py) and the verdict (checks/hang.py) are elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from doctor.core.model import NodeFailure


@dataclass(frozen=True)
class Frame:
    function: str
    file: str
    line: int
    native: bool = False

    def short_file(self) -> str:
        """The file as people quote it: the script's name, a library's path from its package."""
        for marker in ("/site-packages/", "/dist-packages/", "/lib/python3"):
            if marker in self.file:
                rest = self.file.split(marker, 1)[1]
                return rest.split("/", 1)[1] if marker == "/lib/python3" else rest
        return self.file.rsplit("/", 1)[-1]

    def where(self) -> str:
        """``file:line function``, the way a stack names a frame."""
        if self.native:
            return f"{self.function} ({self.short_file()})"
        return f"{self.short_file()}:{self.line} {self.function}"


@dataclass(frozen=True)
class Thread:
    name: str
    tid: int
    active: bool
    frames: tuple[Frame, ...]  # innermost first

    def python(self) -> tuple[Frame, ...]:
        return tuple(f for f in self.frames if not f.native)


@dataclass(frozen=True)
class Sample:
    """How a process stood in /proc at one moment."""

    state: str  # R, S, D, ...
    cpu_ticks: int
    io_bytes: int | None  # read + written, sockets included (None: /proc/PID/io unreadable)
    wchan: str


@dataclass(frozen=True)
class JobProcess:
    node: str
    pid: int
    role: str  # "rank", or "child" of the rank ``parent`` (a DataLoader worker, ...)
    argv: tuple[str, ...]
    env: dict[str, str]
    parent: int | None = None
    first: Sample | None = None
    last: Sample | None = None  # None: gone before the end of the look
    seconds: float = 0.0  # from the first sample to the last
    threads: tuple[Thread, ...] = ()
    threads_before: tuple[Thread, ...] | None = None  # the stack taken ``window`` seconds earlier
    stack_error: str | None = None  # why there is no stack (ptrace refused, py-spy missing, ...)
    flight: dict[str, Any] | None = None  # Flight Recorder's dump, trimmed (hang/flight.py)
    flight_error: str | None = None
    nccl: bool = False  # libnccl (or librccl) mapped
    crash: str = ""  # text only: the fatal signal its faulthandler dump began with

    @property
    def rank(self) -> int | None:
        """The global rank, from the first launcher variable that gives one."""
        for name in ("RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"):
            if self.env.get(name, "").isdigit():
                return int(self.env[name])
        return None

    def number(self, *names: str) -> int | None:
        for name in names:
            if self.env.get(name, "").isdigit():
                return int(self.env[name])
        return None

    @property
    def world_size(self) -> int | None:
        return self.number("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS")

    def job(self) -> str:
        """Which job the process belongs to: the doctor's mark, torch's rendezvous address,
        torchrun's run id, the SLURM step, the MPI job; one node may hold several jobs."""
        env = self.env
        if env.get("CLUSTER_DOCTOR_JOB"):
            return f"doctor run {env['CLUSTER_DOCTOR_JOB']}"
        if env.get("MASTER_ADDR") and env.get("MASTER_PORT"):
            return f"rendezvous {env['MASTER_ADDR']}:{env['MASTER_PORT']}"
        if env.get("TORCHELASTIC_RUN_ID"):
            return f"torchrun run {env['TORCHELASTIC_RUN_ID']}"
        if env.get("SLURM_JOB_ID"):
            return f"SLURM step {env['SLURM_JOB_ID']}.{env.get('SLURM_STEP_ID', '?')}"
        for name in ("PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid"):
            if env.get(name):
                return f"MPI job {env[name]}"
        return "job"

    def main_thread(self) -> Thread | None:
        for thread in self.threads:
            if thread.tid == self.pid or thread.name == "MainThread":
                return thread
        return self.threads[0] if self.threads else None

    def label(self) -> str:
        """``rank 3 (node2, pid 4242)``: what the evidence knows (text may give no node or pid)."""
        rank = f"rank {self.rank}" if self.rank is not None else "a process"
        where = ", ".join(([self.node] if self.node else []) + [f"pid {self.pid}"] * (self.pid > 0))
        return f"{rank} ({where})" if where else rank


@dataclass(frozen=True)
class NodeStacks:
    node: str
    machine: str = ""
    tool: str = ""  # where py-spy came from: "node", "shipped", "missing"
    processes: tuple[JobProcess, ...] = ()
    hidden: int = 0  # Python processes of other users, unreadable
    addresses: tuple[str, ...] = ()  # its IPv4 addresses (RAS names nodes by one of them)
    ras: dict[str, Any] | None = None  # NCCL RAS's raw answer (doctor/facts/hang/ras.py reads it)
    errors: tuple[str, ...] = ()


@dataclass(frozen=True)
class Told:
    """A tool's verdict read from a hung job's text (torchfrtrace, Horovod's stall inspector):
    this rank did not join a collective the others wait in."""

    rank: int
    node: str  # "" where the text does not say
    pid: int  # 0 where the text does not say
    collective: str
    tool: str


@dataclass(frozen=True)
class StacksFacts:
    """Every node's answer, and the nodes that gave none. ``live``: the doctor looked at the job
    itself (doctor stacks, doctor run); else the facts were read from what the job left behind
    (doctor explain), where a rank the text does not show is not thereby gone, nor blind."""

    nodes: dict[str, NodeStacks]
    failures: dict[str, NodeFailure] = field(default_factory=dict)
    window: float = 0.0
    live: bool = True
    told: tuple[Told, ...] = ()
    # Text only: ranks whose own output is here (their file, their launcher's label) but holds
    # no word of the hang: (rank, node).
    quiet: tuple[tuple[int, str], ...] = ()
    # Text only: ranks their launcher saw killed or crash (torchrun, mpirun, srun): (rank, node,
    # what the launcher said).
    exited: tuple[tuple[int, str, str], ...] = ()

    def ranks(self, job: str | None = None) -> list[JobProcess]:
        """The ranks (of one job, when named), by rank."""
        found = [
            p
            for n in self.nodes.values()
            for p in n.processes
            if p.role == "rank" and (job is None or p.job() == job)
        ]
        return sorted(found, key=lambda p: (p.rank if p.rank is not None else 1 << 30, p.node))

    def jobs(self) -> list[str]:
        """Every job seen, the one with the most ranks first."""
        counts: dict[str, int] = {}
        for p in self.ranks():
            counts[p.job()] = counts.get(p.job(), 0) + 1
        return sorted(counts, key=lambda j: (-counts[j], j))

    def children(self, rank: JobProcess) -> list[JobProcess]:
        node = self.nodes.get(rank.node)
        return [p for p in (node.processes if node else ()) if p.parent == rank.pid]


def _frames(raw: list[dict[str, Any]]) -> tuple[Frame, ...]:
    out = []
    for f in raw:
        native = bool(f.get("module")) and not str(f.get("filename", "")).endswith(".py")
        out.append(
            Frame(
                str(f.get("name", "?")), str(f.get("filename", "")), int(f.get("line") or 0), native
            )
        )
    return tuple(out)


def _threads(stack: dict[str, Any] | None) -> tuple[tuple[Thread, ...], str | None]:
    if not stack:
        return (), None
    if "error" in stack:
        return (), str(stack["error"])
    threads = []
    for t in stack.get("threads") or []:
        tid = int(t.get("os_thread_id") or t.get("thread_id") or 0)
        name = str(t.get("thread_name") or f"thread {tid}")
        threads.append(Thread(name, tid, bool(t.get("active")), _frames(t.get("frames") or [])))
    return tuple(threads), None


def _sample(raw: dict[str, Any] | None) -> Sample | None:
    if not raw:
        return None
    io = raw.get("io_bytes")
    return Sample(
        str(raw.get("state", "?")), int(raw.get("cpu_ticks", 0)), io, str(raw.get("wchan", ""))
    )


def parse_node(node: str, answer: dict[str, Any]) -> NodeStacks:
    """One node's agent answer (JSON already decoded) as facts."""
    processes = []
    for raw in answer.get("processes") or []:
        threads, error = _threads(raw.get("stack"))
        before = _threads(raw.get("stack_first"))[0] if raw.get("stack_first") else None
        if (
            raw.get("stack") is None
            and error is None
            and answer.get("tool", {}).get("how") == "missing"
        ):
            error = "py-spy is not on this node, and none could be brought"
        fr = raw.get("fr")
        processes.append(
            JobProcess(
                node=node,
                pid=int(raw["pid"]),
                role=str(raw.get("role", "rank")),
                argv=tuple(raw.get("argv") or ()),
                env={str(k): str(v) for k, v in (raw.get("env") or {}).items()},
                parent=raw.get("of"),
                first=_sample(raw.get("first")),
                last=_sample(raw.get("second")),
                seconds=float(raw.get("seconds") or 0.0),
                threads=threads,
                threads_before=before,
                stack_error=error,
                flight=fr if isinstance(fr, dict) and "error" not in fr else None,
                flight_error=fr.get("error") if isinstance(fr, dict) else None,
                nccl=bool(raw.get("nccl")),
            )
        )
    tool = answer.get("tool") or {}
    return NodeStacks(
        node=node,
        machine=str(answer.get("machine", "")),
        tool=str(tool.get("how", "")),
        processes=tuple(processes),
        hidden=int(answer.get("hidden") or 0),
        addresses=tuple(str(a) for a in answer.get("addresses") or ()),
        ras=answer.get("ras"),
        errors=tuple(str(e) for e in answer.get("errors") or ()),
    )
