"""The one pipeline every command runs: request -> nodes -> probe -> stages -> facts -> checks.

    inventory, transport   connect(request.targets)            doctor/nodes/connect.py
    probe                  gather(...) on every node           doctor/stages/collect.py
    parse                  parse_node(capture)                 doctor/facts/node.py
    cross-node stages      SSH mesh, TCP reachability          doctor/stages/
    derived facts          proven interfaces -> NIC plans      doctor/nic/plan.py
    allreduce              a real allreduce, as facts          doctor/stages/allreduce/stage.py
    checks                 pure functions of ClusterFacts      checks/, doctor/judge/runner.py
    report                 one object; renderers read it       doctor/judge/report.py

ClusterFacts is built once, at the end, from what each step returned; nothing changes it after.
A command is a Request with some of these switched off (doctor/pipeline/request.py).
"""

from __future__ import annotations

import os
import random
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from doctor.core.capture import Capture
from doctor.core.model import Missing, NodeFailure
from doctor.core.nodeset import check_host
from doctor.facts.allreduce import AllreduceFacts
from doctor.facts.cluster import ClusterFacts
from doctor.facts.kernel.events import WORDS as KERNEL_WORDS
from doctor.facts.network.mesh import SshMesh
from doctor.facts.network.reach import Reachability
from doctor.facts.node import NodeFacts, parse_node
from doctor.judge.report import Report
from doctor.judge.runner import run_checks
from doctor.judge.thresholds import threshold
from doctor.nic.choice import NicPlan
from doctor.nic.plan import cluster_recommendation, with_plans, would_change
from doctor.nic.section import nccl_used, nics_section
from doctor.nodes.connect import WORKERS, connect
from doctor.nodes.inventory import Node
from doctor.nodes.transport import BatchTransport, Transport
from doctor.nodes.transport.exec import ExecTransport
from doctor.nodes.transport.launchers import launcher_for
from doctor.pipeline.baseline import load_baseline
from doctor.pipeline.request import AllreduceSettings, Request, parse_since
from doctor.stages.collect import gather
from doctor.stages.mesh import run_mesh
from doctor.stages.pairs import Sampling
from doctor.stages.probe import GPU_TESTS_SECONDS
from doctor.stages.reach import run_reach

if TYPE_CHECKING:
    from doctor.stages.allreduce.stage import Job

NOT_TESTED = Missing("reachability not tested")
NO_MESH = Missing("SSH mesh not run")


class Watcher(Protocol):
    """What the pipeline says as it goes; the CLI shows it on stderr (doctor/render/progress.py)."""

    def probing(self, names: list[str]) -> None: ...

    def probed(self, name: str, result: Capture | NodeFailure) -> None: ...

    def testing(self, stage: str) -> None: ...

    def tested(self, stage: str, pairs: int, total: int) -> None: ...

    def done(self) -> None:
        """The probe or the stage that was going on has ended."""
        ...


class Silent:
    def probing(self, names: list[str]) -> None:
        pass

    def probed(self, name: str, result: Capture | NodeFailure) -> None:
        pass

    def testing(self, stage: str) -> None:
        pass

    def tested(self, stage: str, pairs: int, total: int) -> None:
        pass

    def done(self) -> None:
        pass


def probe_spec(request: Request, resolve: list[str]) -> dict[str, Any]:
    """What the probe captures: its defaults, what the request's checks ask for, and the names
    every node resolves (each node's and MASTER_ADDR) when several nodes are checked."""
    files: set[str] = set()
    commands: dict[str, list[str]] = {}
    for spec in request.checks:
        files.update(spec.probe_files)
        for name, argv in spec.probe_commands.items():
            commands[f"{spec.id}:{name}"] = list(argv)
    out: dict[str, Any] = {
        # The GPU tests run inside the probe, in their own budget on top of its deadline.
        "deadline": request.probe.deadline + (GPU_TESTS_SECONDS if request.probe.gpu_tests else 0),
        "gpu_tests": request.probe.gpu_tests,
        "torch": request.probe.torch,
        "files": sorted(files),
        "commands": commands,
        "since": parse_since(request.probe.since, time.time()),
        "kernel_words": list(KERNEL_WORDS),  # the lines of the kernel log that leave the node
        "paths": list(request.probe.paths or []),
        "mounts": list(request.probe.mounts or []),
        "path_timeout": threshold("host.path_timeout_s"),
        "dstate_seconds": threshold("host.dstate_seconds"),
    }
    if resolve:
        out["resolve"] = resolve
    return out


def run(request: Request, watcher: Watcher | None = None) -> Report:
    """Everything one command does before its report is rendered."""
    if request.captures is None:
        with connect(request.targets) as (nodes, transport):
            return run_connected(request, nodes, transport, watcher)
    baseline = load_baseline(request.baseline) if request.baseline is not None else None
    probed = {n: parse_node(n, c) for n, c in request.captures.items()}
    derived = derive(probed, NOT_TESTED)
    return _judged(request, ClusterFacts(nodes=derived, baseline=baseline))


def run_connected(
    request: Request,
    nodes: list[Node],
    transport: Transport | BatchTransport,
    watcher: Watcher | None = None,
) -> Report:
    """The pipeline on nodes already connected (`doctor run` launches the job through the same
    transport after)."""
    baseline = load_baseline(request.baseline) if request.baseline is not None else None
    return _judged(request, _on_nodes(request, nodes, transport, watcher or Silent(), baseline))


def _judged(request: Request, cluster: ClusterFacts) -> Report:
    outcomes = run_checks(request.checks, cluster) if request.judge else []
    return Report.build(request.command, cluster, outcomes, sections(cluster, request))


def _on_nodes(
    request: Request,
    nodes: list[Node],
    transport: Transport | BatchTransport,
    watcher: Watcher,
    baseline: NodeFacts | None,
) -> ClusterFacts:
    """Probe every node first, then the cross-node stages one after another: each stage runs
    on the nodes that answered and never while the probe runs, so no node's probe deadline is
    spent on the doctor's own load, and no stage starves another."""
    remote = not all(n.local for n in nodes)
    given = request.stages.master or os.environ.get("MASTER_ADDR")
    if given:
        check_host(given, "--master-addr" if request.stages.master else "MASTER_ADDR")
    master = (given or nodes[0].name) if remote else None
    spec = probe_spec(request, sorted({*(n.name for n in nodes), master}) if master else [])
    python = request.targets.python
    with _watching(watcher, [n.name for n in nodes]):
        results = gather(
            nodes, transport, spec, python=python, workers=WORKERS, on_done=watcher.probed
        )
    probed = {n: parse_node(n, c) for n, c in results.items() if isinstance(c, Capture)}
    answered = [n for n in nodes if n.name in probed]
    seed = request.stages.seed
    if seed is None:
        seed = random.SystemRandom().randrange(1 << 31)
    reach: Reachability | Missing = NOT_TESTED
    if request.stages.reach_mode is not Sampling.off and remote and len(answered) > 1:
        with _counting(watcher, "reach") as tested:
            reach = run_reach(
                probed,
                answered,
                transport,
                mode=request.stages.reach_mode,
                seed=seed,
                python=python,
                workers=WORKERS,
                on_pairs=tested,
            )
    ssh_mesh = _mesh(request, answered, transport, watcher, seed) if remote else NO_MESH
    derived = derive(probed, reach)
    allreduce: AllreduceFacts | Missing = Missing("allreduce not run")
    if request.allreduce is not None:
        from doctor.stages.allreduce.stage import run_allreduce  # torch's workers: only when asked

        job = job_for(request.allreduce, nodes, derived, python)
        allreduce = run_allreduce(job, launcher_for(transport))
    return ClusterFacts(
        nodes=derived,
        failures={n: f for n, f in results.items() if isinstance(f, NodeFailure)},
        inventory={n.name: n for n in nodes},
        baseline=baseline,
        master_addr=master,
        ssh_mesh=ssh_mesh,
        reachability=reach,
        allreduce=allreduce,
    )


def _mesh(
    request: Request,
    answered: list[Node],
    transport: Transport | BatchTransport,
    watcher: Watcher,
    seed: int,
) -> SshMesh | Missing:
    """SSH between the nodes that answered (one that did not is reported once, by node.reach)."""
    mode = request.stages.mesh_mode
    if mode is Sampling.off or len(answered) < 2:
        return NO_MESH
    if isinstance(transport, BatchTransport):
        return Missing(
            "not applicable under srun: SLURM starts the job's processes, not SSH", "unsupported"
        )
    if isinstance(transport, ExecTransport):
        return Missing(
            "not applicable with --exec: the nodes are reached through "
            f"{transport.prefix.words[0]}, not SSH",
            "unsupported",
        )
    with _counting(watcher, "mesh") as tested:
        return run_mesh(
            answered,
            transport,
            mode=mode,
            seed=seed,
            python=request.targets.python,
            workers=WORKERS,
            on_pairs=tested,
        )


@contextmanager
def _watching(watcher: Watcher, names: list[str]) -> Iterator[None]:
    watcher.probing(names)
    try:
        yield
    finally:
        watcher.done()


@contextmanager
def _counting(watcher: Watcher, stage: str) -> Iterator[Callable[[int, int], None]]:
    """A callback that tells the watcher of pairs tested, while a stage runs."""
    watcher.testing(stage)
    try:
        yield lambda tested, total: watcher.tested(stage, tested, total)
    finally:
        watcher.done()


def derive(probed: Mapping[str, NodeFacts], reach: Reachability | Missing) -> dict[str, NodeFacts]:
    """Every node's NIC plan, once, on the interfaces every peer reached when that was tested."""
    proven = reach.proven() if isinstance(reach, Reachability) else {}
    return with_plans(probed, {name: frozenset(ifaces) for name, ifaces in proven.items()})


def gpu_counts(facts: Mapping[str, NodeFacts]) -> dict[str, int]:
    """GPUs torch's "nccl" backend can use per node, from the PCI facts (0 where unknown):
    NVIDIA's, and AMD's where torch is a ROCm build (its "nccl" is then RCCL)."""
    counts = {}
    for name, node in facts.items():
        devices = node.pci if isinstance(node.pci, list) else []
        torch = None if isinstance(node.frameworks, Missing) else node.frameworks.torch
        rocm = torch is not None and torch.hip is not None
        counts[name] = sum(1 for d in devices if d.is_nvidia_gpu or (rocm and d.is_amd_gpu))
    return counts


def job_for(
    settings: AllreduceSettings,
    nodes: list[Node],
    facts: Mapping[str, NodeFacts],
    python: str | None,
) -> Job:
    """The allreduce to run: the backend (auto: NCCL, or RCCL with a ROCm torch, where every node
    has a GPU), ranks, and the recommendation to try when the configured run's environment
    differs from it."""
    from doctor.stages.allreduce.stage import Job

    gpus = gpu_counts(facts)
    backend = settings.backend
    if backend == "auto":
        # NCCL only where every node has a GPU: one CPU-only node would strand the others.
        backend = "nccl" if nodes and all(gpus.get(n.name, 0) for n in nodes) else "gloo"
    if all(n.local for n in nodes) and backend != "nccl":
        # Gloo ranks on this machine, over loopback. Not NCCL's: two ranks on one GPU of one
        # host are NCCL's "invalid usage" (seen on a one-GPU H200); it runs one per GPU.
        nodes = nodes * (settings.ranks or 1)
    given = settings.recommendation()
    if given is not None:
        recommendation = given
    else:
        plans: dict[str, NicPlan | Missing] = {name: f.nic for name, f in facts.items()}
        prefix = "NCCL_" if backend == "nccl" else "GLOO_"
        env = cluster_recommendation(plans)
        recommendation = {k: v for k, v in env.items() if k.startswith(prefix)}
    return Job(
        nodes=tuple(nodes),
        backend=backend,
        gpus=gpus,
        port=settings.port,
        python=python or (sys.executable if all(n.local for n in nodes) else "python3"),
        deadlines=settings.deadlines.starting_in(settings.launch_timeout),
        sizes=settings.size_list(),
        recommendation=recommendation,
        recommendation_changes=any(would_change(f, recommendation) for f in facts.values()),
        rendezvous_iface=settings.iface,
        search=settings.search,
    )


def sections(cluster: ClusterFacts, request: Request) -> dict[str, Any]:
    """The report's sections beyond the checks, for what ran."""
    out: dict[str, Any] = {}
    if isinstance(cluster.ssh_mesh, SshMesh):
        out["ssh_mesh"] = cluster.ssh_mesh.to_section()
    if isinstance(cluster.reachability, Reachability):
        out["reachability"] = cluster.reachability.to_section()
    if request.nics_section:
        out["nics"] = nics_section({n: f.nic for n, f in cluster.nodes.items()})
    if isinstance(cluster.allreduce, AllreduceFacts):
        out["allreduce"] = cluster.allreduce.section()
    if used := nccl_used(cluster):
        out["nccl"] = used
    return out
