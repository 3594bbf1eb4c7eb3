"""What the GPU tests measured (``--gpu-tests``), judged: the node's own allreduce over NVLink
against its SKU's busbw floor and against the other nodes; GEMM results that are not finite; a GPU,
a copy direction or a GPU pair slower than its siblings or the SKU's floor; and the multi-node
allreduce against a floor the run states for its fabric.

Relative judgements use ``gpu.bench_fraction`` of the median of the node's own GPUs (or of the
nodes); absolute ones the GPU profile's floors (doctor/judge/thresholds.py). Every finding says
which.
"""

from __future__ import annotations

from collections.abc import Iterator
from statistics import median

from doctor.core.model import Finding, Fix, Missing, Severity
from doctor.core.shell import command, commands
from doctor.facts.cluster import ClusterFacts
from doctor.facts.gpu_bench import GpuBench
from doctor.facts.node import NodeFacts
from doctor.judge.thresholds import limit, need_limit
from doctor.plugin import Skip, cluster_check, need, node_check

RERUN = command("doctor preflight --gpu-tests --select gpu.bench")


def _bench(facts: NodeFacts) -> GpuBench:
    bench = need(facts.gpu_bench, "GPU tests")
    if bench.error is None and not bench.per_gpu and not bench.allreduce:
        raise Skip("the GPU tests measured nothing")
    return bench


def _slower(values: dict[str, float], fraction: float) -> dict[str, tuple[float, float]]:
    """The entries under ``fraction`` of the median of all (needs two to compare)."""
    if len(values) < 2:
        return {}
    middle = median(values.values())
    return {k: (v, middle) for k, v in values.items() if v < fraction * middle}


@node_check(
    "gpu.bench",
    "The node's GPU tests: NVLink allreduce at its SKU's floor, finite and even GEMMs, even "
    "memory, host and peer bandwidth",
    needs=("gpu_bench",),
    codes={
        "gpu.tests.failed": "the GPU tests could not run on a node that has GPUs",
        "gpu.busbw.below_floor": "the node's own allreduce is below its GPU SKU's busbw floor",
        "gpu.gemm.not_finite": "a GPU's GEMM gave NaN or infinite results",
        "gpu.gemm.slow": "a GPU's GEMM is slower than the node's other GPUs'",
        "gpu.bandwidth.slow": "a GPU's memory or host copy bandwidth is below its siblings' or "
        "its SKU's floor",
        "gpu.p2p.slow": "a GPU pair copies slower than the node's other pairs or the SKU's floor",
    },
)
def bench(facts: NodeFacts) -> Iterator[Finding]:
    result = _bench(facts)
    if result.error is not None:
        yield Finding(
            "gpu.tests.failed",
            Severity.WARN,
            f"the GPU tests stopped: {result.error}",
            evidence=(result.error,),
            fix=Fix("Run them where torch sees the GPUs (the job's environment).", (RERUN,)),
        )
    floor, fraction = limit(facts, "allreduce.busbw_gbps"), need_limit(facts, "gpu.bench_fraction")
    busbw = result.busbw
    if floor is not None and busbw is not None and busbw < floor.value:
        yield Finding(
            "gpu.busbw.below_floor",
            Severity.WARN,
            f"the node's own allreduce across its {result.gpus} GPUs reached {busbw:.0f} GB/s "
            f"busbw, below the {floor.shown} GB/s its GPUs reach",
            evidence=(
                *(f"{size >> 20} MiB: {bw:.1f} GB/s" for size, bw in result.allreduce),
                str(floor),
            ),
            fix=Fix(
                "Check the NVLinks and the fabric manager (a link down or degraded halves it).",
                commands(
                    "nvidia-smi nvlink -s",
                    "nvidia-smi nvlink -e",
                    "systemctl status nvidia-fabricmanager",
                ),
            ),
            data={"threshold": "absolute", "busbw_gbps": busbw, "floor": floor.value},
        )
    broken = [g.index for g in result.per_gpu if g.finite is False]
    if broken:
        yield Finding(
            "gpu.gemm.not_finite",
            Severity.FAIL,
            f"GEMM on GPU {', '.join(map(str, broken))} gave NaN or infinite results from finite "
            "inputs: the GPU computes wrongly",
            evidence=tuple(f"GPU{i}: torch.isfinite(matmul) is False" for i in broken),
            fix=Fix(
                "Drain the node and run the vendor's diagnostics.", commands("dcgmi diag -r 3")
            ),
        )
    yield from _speeds(facts, result, fraction.value)


def _speeds(facts: NodeFacts, result: GpuBench, fraction: float) -> Iterator[Finding]:
    relative = f"relative: under {fraction:.0%} of the median of the node's GPUs"
    tflops = {f"GPU{g.index}": g.tflops for g in result.per_gpu if g.tflops is not None}
    slow = _slower(tflops, fraction)
    if slow:
        yield Finding(
            "gpu.gemm.slow",
            Severity.WARN,
            f"{', '.join(slow)} compute{'s' if len(slow) == 1 else ''} slower than the node's "
            "other GPUs: clocks held down (power, heat) or a weak part; the job waits for it",
            evidence=(*(f"{g}: {v:.0f} of {m:.0f} TFLOPS" for g, (v, m) in slow.items()), relative),
            fix=Fix(
                "Look at its clocks and their reasons.",
                commands("nvidia-smi -q -d PERFORMANCE,CLOCK"),
            ),
            data={"threshold": "relative", "gpus": sorted(slow)},
        )
    h2d_floor = limit(facts, "gpu.h2d_gbps")
    lines = []
    for what in ("memory_gbps", "h2d_gbps", "d2h_gbps"):
        values = {f"GPU{g.index}": v for g in result.per_gpu if (v := getattr(g, what)) is not None}
        for gpu, (value, middle) in _slower(values, fraction).items():
            lines.append(
                f"{gpu} {what[:-5]}: {value:.1f} GB/s, the others {middle:.1f} ({relative})"
            )
        if h2d_floor is not None and what != "memory_gbps":
            for gpu, value in values.items():
                if value < h2d_floor.value:
                    lines.append(f"{gpu} {what[:-5]}: {value:.1f} GB/s (absolute: {h2d_floor})")
    if lines:
        yield Finding(
            "gpu.bandwidth.slow",
            Severity.WARN,
            f"{len(lines)} GPU copy bandwidth(s) below the node's others or the SKU's floor",
            evidence=tuple(lines),
            fix=Fix(
                "A slow host copy is a narrow or slow PCIe link or a far NUMA node; a slow "
                "memory copy is the GPU itself.",
                commands("nvidia-smi -q -d PCIE", "nvidia-smi topo -m"),
            ),
            data={"threshold": "relative" if not h2d_floor else "absolute", "lines": lines},
        )
    p2p_floor = limit(facts, "gpu.p2p_gbps")
    pairs = _slower(result.p2p, fraction)
    under = {k: v for k, v in result.p2p.items() if p2p_floor and v < p2p_floor.value}
    if pairs or under:
        evidence = [
            f"GPU {k}: {v:.0f} GB/s, the pairs' median {m:.0f} ({relative})"
            for k, (v, m) in pairs.items()
        ]
        evidence += [f"GPU {k}: {v:.0f} GB/s (absolute: {p2p_floor})" for k, v in under.items()]
        yield Finding(
            "gpu.p2p.slow",
            Severity.WARN,
            f"{len(set(pairs) | set(under))} GPU pair(s) copy slower than the others or the "
            "SKU's floor: a degraded NVLink between them",
            evidence=tuple(evidence[:24]),
            fix=Fix(
                "Check those GPUs' NVLinks.", commands("nvidia-smi nvlink -s", "nvidia-smi topo -m")
            ),
            data={
                "threshold": "absolute" if under else "relative",
                "pairs": sorted(set(pairs) | set(under)),
            },
        )


@cluster_check(
    "gpu.bench_drift",
    "Every node's own NVLink allreduce and GEMMs are as fast as the other nodes'",
    codes={
        "gpu.busbw.slow_node": "a node's own allreduce is slower than the other nodes'",
        "gpu.gemm.slow_node": "a node's GPUs compute slower than the other nodes'",
    },
)
def bench_drift(cluster: ClusterFacts) -> Iterator[Finding]:
    measured = {
        name: f.gpu_bench
        for name, f in cluster.nodes.items()
        if not isinstance(f.gpu_bench, Missing)
    }
    if len(measured) < 2:
        raise Skip("fewer than two nodes ran the GPU tests (--gpu-tests)")
    first = next(iter(cluster.nodes.values()))
    fraction = need_limit(first, "gpu.bench_fraction").value
    busbw = {n: b.busbw for n, b in measured.items() if b.busbw is not None}
    gemm = {
        n: median(g.tflops for g in b.per_gpu if g.tflops is not None)
        for n, b in measured.items()
        if any(g.tflops is not None for g in b.per_gpu)
    }
    for code, values, unit, what in (
        ("gpu.busbw.slow_node", busbw, "GB/s busbw", "own allreduce"),
        ("gpu.gemm.slow_node", gemm, "TFLOPS", "GEMM (median GPU)"),
    ):
        slow = _slower(values, fraction)
        if slow:
            yield Finding(
                code,
                Severity.WARN,
                f"{what} on {', '.join(slow)} under {fraction:.0%} of the other nodes': the job "
                "runs at the slowest node's pace",
                nodes=tuple(slow),
                evidence=(
                    *(
                        f"{n}: {v:.0f} {unit}, the nodes' median {m:.0f}"
                        for n, (v, m) in slow.items()
                    ),
                    f"relative: under {fraction:.0%} of the nodes' median",
                ),
                fix=Fix(
                    "Compare the slow node's NVLinks, clocks and cooling with a good one's.",
                    (RERUN,),
                ),
                data={"threshold": "relative", "nodes": sorted(slow)},
            )


@cluster_check(
    "allreduce.floor",
    "The allreduce across the nodes reaches the busbw the run says its fabric gives",
    needs=("allreduce",),
    codes={"allreduce.below_floor": "the multi-node allreduce is below the stated busbw floor"},
)
def multinode_floor(cluster: ClusterFacts) -> Iterator[Finding]:
    facts = need(cluster.allreduce)
    first = next(iter(cluster.nodes.values()), None)
    floor = None if first is None else limit(first, "allreduce.multinode_busbw_gbps")
    if floor is None:
        raise Skip(
            "no floor set for this fabric "
            "(doctor.toml: [thresholds.allreduce] multinode_busbw_gbps)"
        )
    rows = [r for run in facts.runs[:1] for r in run.sweep_rows()]
    best = max((r["busbw_gbps"] for r in rows), default=None)
    if best is None:
        raise Skip("the allreduce measured no size")
    if best < floor.value:
        yield Finding(
            "allreduce.below_floor",
            Severity.WARN,
            f"the allreduce across the nodes reached {best:.1f} GB/s busbw at best, below the "
            f"{floor.shown} GB/s this fabric should give",
            evidence=(
                *(f"{r['bytes'] >> 10} KiB: {r['busbw_gbps']:.2f} GB/s" for r in rows[-4:]),
                str(floor),
            ),
            fix=Fix(
                "Check what NCCL used (NCCL_DEBUG=INFO: NET/IB or Socket, GDR) and the HCAs' "
                "rates; sweep to larger sizes where small ones do not reach the plateau.",
                commands("doctor allreduce --sizes 64M,256M,1G"),
            ),
            data={"threshold": "absolute", "busbw_gbps": best, "floor": floor.value},
        )


CHECKS = [bench, bench_drift, multinode_floor]
