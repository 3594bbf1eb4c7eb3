"""The nodes against each other: the same CPUs and memory everywhere, and none much busier.

These thresholds are relative: a node is judged by how far it strays from the median of the
nodes probed (or from the --baseline node), so a machine-wide load or a small test bed blames
nobody, and a node that lost a DIMM stands out however much memory the others have.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator

from doctor.core.model import Finding, Fix, Missing, Severity
from doctor.core.nodeset import compact
from doctor.core.shell import commands
from doctor.core.units import human_bytes
from doctor.facts.cluster import ClusterFacts
from doctor.facts.host.host import Cpus, HostFacts
from doctor.facts.node import NodeFacts
from doctor.judge.drift import drift_findings, need_drift
from doctor.judge.thresholds import described, threshold
from doctor.plugin import Skip, cluster_check


def _host(facts: NodeFacts) -> HostFacts | None:
    return None if isinstance(facts.host, Missing) else facts.host


def _cpus(facts: NodeFacts) -> Cpus | Missing:
    host = _host(facts)
    return host.cpus if host is not None else Missing("no host facts")


def _memory_total(facts: NodeFacts) -> int | None:
    host = _host(facts)
    return None if host is None or isinstance(host.memory, Missing) else host.memory.total


@cluster_check(
    "host.inventory",
    "Every node has the same CPUs and about the same memory",
    codes={
        "host.cpu.drift": "a node's CPU model or count differs from the others'",
        "host.memory.drift": "a node has host.memory_drift_pct less memory than the median node: "
        "a DIMM is missing or failed",
    },
)
def inventory(cluster: ClusterFacts) -> Iterator[Finding]:
    def model(f: NodeFacts) -> str | Missing:
        cpus = _cpus(f)
        return cpus if isinstance(cpus, Missing) else f"{cpus.count} x {cpus.model}"

    totals = {n: t for n, f in cluster.nodes.items() if (t := _memory_total(f))}
    try:
        need_drift(cluster, "a CPU inventory", (model, "0 x ?"))
        cpus = True
    except Skip:
        if len(totals) < 2:  # neither can be compared
            raise
        cpus = False  # a pasted `free` shows memory, not CPUs
    if cpus:
        yield from drift_findings(
            cluster,
            model,
            code="host.cpu.drift",
            what="CPUs",
            severity=Severity.WARN,
            fix=Fix("Check the node's BIOS (SMT, cores disabled) and hardware against the others."),
        )
    if len(totals) < 2:
        return
    median = statistics.median(totals.values())
    limit = threshold("host.memory_drift_pct")
    short = sorted(n for n, t in totals.items() if t < median * (1 - limit / 100))
    if short:
        yield Finding(
            "host.memory.drift",
            Severity.WARN,
            f"{compact(short)} has less memory than the other nodes: "
            + ", ".join(f"{n} {human_bytes(totals[n])}" for n in short[:4])
            + f" against a median of {human_bytes(median)}",
            nodes=tuple(short),
            evidence=(
                *(f"{n}: MemTotal {totals[n]} bytes" for n in short[:8]),
                f"median of {len(totals)} nodes: {int(median)} bytes",
                described("host.memory_drift_pct"),
            ),
            fix=Fix(
                "Check the node's DIMMs (a missing or failed one, a disabled channel).",
                commands("sudo dmidecode -t memory | grep -E 'Size|Locator'"),
            ),
            data={"threshold": "relative", "median": int(median)},
        )


@cluster_check(
    "host.load",
    "No node is much busier than the others before the job starts",
    codes={
        "host.load.busy": "a node's load per CPU is host.load_ratio times the median node's: "
        "something else runs there",
    },
)
def load(cluster: ClusterFacts) -> Iterator[Finding]:
    per_cpu: dict[str, float] = {}
    for name, facts in cluster.nodes.items():
        host, cpus = _host(facts), _cpus(facts)
        if host is None or isinstance(host.load, Missing) or isinstance(cpus, Missing):
            continue
        per_cpu[name] = host.load[1] / max(1, cpus.count)
    if len(per_cpu) < 2:
        raise Skip("the load is judged against other nodes' (fewer than two nodes report it)")
    median = statistics.median(per_cpu.values())
    ratio = threshold("host.load_ratio")
    busy = sorted(n for n, v in per_cpu.items() if v > 1.0 and v > ratio * max(median, 0.1))
    if busy:
        yield Finding(
            "host.load.busy",
            Severity.WARN,
            f"{compact(busy)} is busy: 5-minute load "
            + ", ".join(f"{n} {per_cpu[n]:.1f}" for n in busy[:4])
            + f" per CPU against a median of {median:.2f}",
            nodes=tuple(busy),
            evidence=(
                *(f"{n}: load {per_cpu[n]:.2f} per CPU" for n in busy[:8]),
                described("host.load_ratio"),
            ),
            fix=Fix(
                "See what runs there before the job starts.", commands("top -b -n 1 | head -20")
            ),
            data={"threshold": "relative", "median": round(median, 3)},
        )


CHECKS = [inventory, load]
