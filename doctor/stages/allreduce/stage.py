"""The allreduce stage: run it as configured, and as recommended when that differs. Facts out.

What the runs mean (failed, slow node, NCCL choosing otherwise than predicted, the log
diagnosis) is judged by the ``allreduce`` check (checks/allreduce.py), like every other fact.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from doctor.explain.engine import Explanation, Scanner, findings
from doctor.facts.allreduce import AllreduceFacts, Deadlines, Plan, Rank, RunResult
from doctor.nodes.inventory import Node
from doctor.nodes.transport.launch import Launcher
from doctor.stages.allreduce.groups import MIN_NODES, find_culprits, search_mode
from doctor.stages.allreduce.run import run_plan

# Variables whose first name is an interface the rendezvous can use, in order of preference.
IFACE_VARS = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")


@dataclass(frozen=True)
class Job:
    """Which ranks run where, and with what: everything the stage needs to start them."""

    nodes: tuple[Node, ...]
    backend: str = "gloo"  # gloo | nccl
    gpus: dict[str, int] = field(default_factory=dict)  # NCCL: ranks per node
    port: int = 29500
    python: str = "python3"
    deadlines: Deadlines = field(default_factory=Deadlines)
    sizes: tuple[int, ...] | None = None  # None: sized by time
    recommendation: dict[str, str] = field(default_factory=dict)
    # Whether the recommendation would change the interfaces the libraries choose (the NIC
    # replay's word): a passing run is tried as recommended only then.
    recommendation_changes: bool = True
    rendezvous_iface: str | None = None
    # When the run across every node fails, hangs or runs slow: find the nodes by group testing.
    search: bool = True


def iface_hint(job: Job) -> str | None:
    """An exact interface name to find the rendezvous address on, if the settings give one."""
    if job.rendezvous_iface:
        return job.rendezvous_iface
    for var in IFACE_VARS:
        value = job.recommendation.get(var, "")
        first = value.split(",")[0].lstrip("=")
        if first and not value.startswith("^"):
            return first
    return None


def ranks_for(job: Job) -> tuple[Rank, ...]:
    """One rank per GPU with NCCL, one per node with Gloo; in inventory order."""
    ranks: list[Rank] = []
    for node in job.nodes:
        per_node = job.gpus.get(node.name, 0) if job.backend == "nccl" else 1
        for local in range(max(1, per_node)):
            ranks.append(Rank(len(ranks), node, local))
    return tuple(ranks)


def try_recommended(configured: RunResult, job: Job) -> bool:
    """Whether to run again as recommended: when the configured run failed before the sum was
    verified (does the fix work?), or when the recommendation would change what the libraries
    choose (would the change break it?). A run that verified the exact sum and then overran
    (a slow link in the sweep) proved its interfaces: another variant would only cost as long, as
    would one after a slow start."""
    if configured.status == "interrupted" or not differs(job.recommendation, configured):
        return False
    if configured.slow_start:
        return False  # the ranks would be as slow to import torch again
    if any(r.gone for r in configured.ranks):
        return False  # no setting brings back a process or a node that went
    broken = configured.status != "passed" and not configured.verified
    return broken or job.recommendation_changes


def differs(recommendation: dict[str, str], run: RunResult) -> bool:
    """Whether any rank's environment differs from the recommendation (unknown counts as yes)."""
    if not recommendation:
        return False
    return any(
        not r.host or any(r.env.get(k) != v for k, v in recommendation.items()) for r in run.ranks
    )


def read_logs(run: RunResult) -> Explanation:
    """Every rank's captured output through the log diagnosis, one source per rank: on NCCL
    runs it also reads NCCL's INFO lines (version, bootstrap interface, transports, nNodes)."""
    scanner = Scanner()
    for r in run.ranks:
        lines = r.stderr.splitlines()
        if r.error:
            lines.append(r.error)
        scanner.feed_lines([line.encode() for line in lines], f"rank {r.rank} ({r.node})", 1)
    return scanner.result


def with_logs(run: RunResult, backend: str) -> RunResult:
    logs = read_logs(run)
    nccl = logs.nccl.to_json() if backend == "nccl" and not logs.nccl.is_empty() else None
    return replace(run, nccl_log=logs.nccl, log_findings=tuple(findings(logs)), nccl=nccl)


def run_allreduce(job: Job, launcher: Launcher) -> AllreduceFacts:
    master = job.nodes[0]
    ranks = ranks_for(job)
    facts = AllreduceFacts(
        backend=job.backend,
        world_size=len(ranks),
        master=master.name,
        port=job.port,
        python=job.python,
        rendezvous=f"{master.name}:{job.port}",
        recommendation=job.recommendation,
    )
    if len(ranks) < 2:
        why = "one rank: nothing to reduce across (add nodes, or GPUs with --backend nccl)"
        return replace(facts, skipped=why)
    plan = Plan(
        ranks=ranks,
        backend=job.backend,
        port=job.port,
        deadlines=job.deadlines,
        sizes=job.sizes,
        python=job.python,
    )
    iface = iface_hint(job)
    configured = run_plan(plan, launcher, "as configured", iface)
    if configured.status == "not_started":
        return replace(facts, not_started=configured.reason, port_taken=configured.port_taken)
    runs = [configured]
    if try_recommended(configured, job):
        env: dict[str, str | None] = dict(job.recommendation)
        runs.append(run_plan(replace(plan, env=env), launcher, "as recommended", iface))
    facts = replace(
        facts,
        rendezvous=f"{facts.rendezvous} ({configured.address})",
        runs=tuple(with_logs(run, job.backend) for run in runs),
    )
    mode = search_mode(facts.runs) if job.search else None
    if mode is not None and len({n.name for n in job.nodes}) >= MIN_NODES:
        # The settings of the last run tried: what the job would be given.
        facts = replace(facts, search=find_culprits(runs[-1].plan, launcher, mode, iface))
    return facts
