"""The ``doctor allreduce`` command and the preflight stage: request in, report sections out."""

from __future__ import annotations

import sys

from doctor.allreduce.evidence import predictions
from doctor.allreduce.options import parse_env, parse_sizes
from doctor.allreduce.stage import Request, StageResult
from doctor.errors import UsageError
from doctor.facts.cluster import ClusterFacts
from doctor.inventory import Node
from doctor.model import Missing, present
from doctor.nic.plan import NicPlan
from doctor.nic.render import cluster_recommendation, plans
from doctor.report import Report
from doctor.runner import merge_findings

BACKENDS = ("auto", "gloo", "nccl")


def gpu_counts(cluster: ClusterFacts) -> dict[str, int]:
    """NVIDIA GPUs per node, from the PCI facts (0 where unknown)."""
    counts = {}
    for name, facts in cluster.nodes.items():
        devices = present(facts.pci) or []
        counts[name] = sum(1 for d in devices if d.is_nvidia_gpu)
    return counts


def recommended_env(by_node: dict[str, NicPlan | Missing], backend: str) -> dict[str, str]:
    """The nics recommendation, limited to the variables this backend reads."""
    prefix = "NCCL_" if backend == "nccl" else "GLOO_"
    env = cluster_recommendation(by_node)
    return {k: v for k, v in env.items() if k.startswith(prefix)}


def build_request(
    nodes: list[Node],
    cluster: ClusterFacts,
    *,
    backend: str,
    port: int,
    python: str | None,
    sizes: str = "1K..64M",
    recommend: list[str] | tuple[str, ...] = (),
    iface: str | None = None,
) -> Request:
    if backend not in BACKENDS:
        raise UsageError(f"--backend: expected one of {', '.join(BACKENDS)}")
    if not 1 <= port <= 65535:
        raise UsageError(f"--port: {port} is not a TCP port")
    gpus = gpu_counts(cluster)
    by_node = plans(cluster)
    if backend == "auto":
        # NCCL only where every node has a GPU: one CPU-only node would strand the others.
        backend = "nccl" if nodes and all(gpus.get(n.name, 0) for n in nodes) else "gloo"
    return Request(
        nodes=tuple(nodes),
        backend=backend,
        gpus=gpus,
        port=port,
        python=python or (sys.executable if all(n.local for n in nodes) else "python3"),
        sizes=parse_sizes(sizes),
        recommendation=parse_env(list(recommend))
        if recommend
        else recommended_env(by_node, backend),
        rendezvous_iface=iface,
        predicted=predictions(by_node),
    )


def attach(report: Report, stage: StageResult) -> None:
    """Add the stage's outcome, findings and JSON section to a report."""
    report.outcomes.append(stage.outcome())
    report.findings = merge_findings(report.outcomes)
    report.sections["allreduce"] = stage.section()
