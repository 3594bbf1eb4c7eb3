"""The GPU tests (--gpu-tests) judged. No GPU here: the runner itself runs for real only to its
first answer (this machine's torch sees no CUDA device); the judged numbers are WRITTEN in the
runner's answer shape (GPU_TESTS_SNIPPET), with values around the floors the peers publish
(AzHC: 460 GB/s busbw for 8 H100, 48 GB/s host copies, 335 GB/s P2P)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

from checks import gpu_bench as gb
from doctor.core.model import Status
from doctor.facts.allreduce import AllreduceFacts, RunResult
from doctor.facts.cluster import ClusterFacts
from doctor.facts.gpu import GpuFacts
from doctor.facts.gpu_bench import MARK, SLOT, GpuBench, parse_answer, parse_gpu_bench
from doctor.judge.runner import run_checks
from doctor.stages import probe
from tests import factkit as fk
from tests.allreduce.test_result import plan, sweep_state
from tests.facts.capturekit import overlay, raw_capture
from tests.gpu.test_gpu_health_checks import gpu

H100 = "NVIDIA H100 80GB HBM3"


def answer(busbw: float = 470.0, **per_gpu: Any) -> dict[str, Any]:
    """Eight H100 as the runner reports them; ``per_gpu`` overrides one GPU's row: gpu3={...}."""
    rows = []
    for i in range(8):
        row = {"index": i, "tflops": 610.0 + i, "finite": True, "memory_gbps": 2900.0}
        row.update({"h2d_gbps": 53.0, "d2h_gbps": 52.0})
        row.update(per_gpu.get(f"gpu{i}", {}))
        rows.append(row)
    p2p = {f"{i}-{j}": 360.0 for i in range(8) for j in range(8) if i != j}
    sizes = [(256 << 20, busbw * 0.9), (1 << 30, busbw * 0.98), (4 << 30, busbw)]
    return {
        "gpus": 8,
        "name": H100,
        "allreduce": [{"bytes": s, "seconds": 0.01, "busbw_gbps": b} for s, b in sizes],
        "per_gpu": rows,
        "p2p": p2p,
    }


def node(data: dict[str, Any], name: str = "gpu1", **areas: Any):  # type: ignore[no-untyped-def]
    gpus = GpuFacts(tuple(gpu(i, name=H100) for i in range(8)), "nvml")
    return fk.node(name, gpu_bench=parse_answer(data), gpus=gpus, **areas)


def findings(check, *nodes) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    (outcome,) = run_checks([check], fk.cluster(*nodes))
    return {f.code: f for f in outcome.findings} or {"status": outcome.status}


def test_the_runner_answers_where_torch_sees_no_gpu() -> None:
    pytest.importorskip("torch")
    argv = [sys.executable, "-c", probe.GPU_TESTS_SNIPPET, probe.GPU_TESTS_MARK, "10"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0
    entry = {"argv": argv, "rc": 0, "stdout": out.stdout, "stderr": out.stderr}
    bench = parse_gpu_bench(overlay(raw_capture("cpu-torch-wheel"), commands={SLOT: entry}))
    assert isinstance(bench, GpuBench) and bench.error == "RuntimeError: torch sees no CUDA device"
    assert probe.GPU_TESTS_MARK == MARK


def test_a_healthy_node_passes() -> None:
    assert findings(gb.bench, node(answer())) == {"status": Status.PASS}


def test_nvlink_busbw_below_the_sku_floor_is_absolute(
    thresholds: Callable[[dict[str, Any]], None],
) -> None:
    found = findings(gb.bench, node(answer(busbw=230.0)))
    finding = found["gpu.busbw.below_floor"]
    assert finding.data == {"threshold": "absolute", "busbw_gbps": 230.0, "floor": 460.0}
    assert "H100 SXM profile" in finding.evidence[-1]
    # The run's own floor wins.
    thresholds({"allreduce.busbw_gbps": 200})
    assert "gpu.busbw.below_floor" not in findings(gb.bench, node(answer(busbw=230.0)))


def test_a_gpu_that_computes_wrong_or_slow_and_a_slow_pair() -> None:
    data = answer(gpu3={"finite": False}, gpu5={"tflops": 300.0}, gpu6={"h2d_gbps": 12.0})
    data["p2p"]["2-7"] = 90.0
    found = findings(gb.bench, node(data))
    assert set(found) == {
        "gpu.gemm.not_finite",
        "gpu.gemm.slow",
        "gpu.bandwidth.slow",
        "gpu.p2p.slow",
    }
    assert found["gpu.gemm.not_finite"].severity.name == "FAIL"
    assert found["gpu.gemm.slow"].data == {"threshold": "relative", "gpus": ["GPU5"]}
    assert any("GPU6 h2d: 12.0 GB/s" in e for e in found["gpu.bandwidth.slow"].evidence)
    assert found["gpu.p2p.slow"].data["pairs"] == ["2-7"]


def test_a_node_slower_than_the_others() -> None:
    fast = [node(answer(), f"gpu{i}") for i in range(1, 4)]
    slow = node(answer(busbw=380.0), "gpu4")
    found = findings(gb.bench_drift, *fast, slow)
    assert found["gpu.busbw.slow_node"].nodes == ("gpu4",)
    assert found["gpu.busbw.slow_node"].data["threshold"] == "relative"
    assert findings(gb.bench_drift, *fast)["status"] is Status.PASS
    (outcome,) = run_checks([gb.bench_drift], fk.cluster(fast[0]))
    assert outcome.reason == "fewer than two nodes ran the GPU tests (--gpu-tests)"


def test_the_multinode_floor_is_the_runs_own(thresholds: Callable[[dict[str, Any]], None]) -> None:
    # Two nodes' ranks that swept up to 64 MiB: 8 GB/s busbw at best (2 ranks: busbw = algbw).
    ranks = tuple(sweep_state(r, [(16 << 20, 0.004), (64 << 20, 0.008)]) for r in (0, 1))
    facts = AllreduceFacts(
        "nccl",
        2,
        "gpu1",
        29500,
        "python3",
        "gpu1:29500",
        runs=(RunResult("as configured", plan(2), "passed", ranks, 1.0),),
    )
    one = node(answer())
    (outcome,) = run_checks([gb.multinode_floor], ClusterFacts({"gpu1": one}, allreduce=facts))
    assert outcome.reason.startswith("no floor set for this fabric")
    thresholds({"allreduce": {"multinode_busbw_gbps": 40}})
    (outcome,) = run_checks([gb.multinode_floor], ClusterFacts({"gpu1": one}, allreduce=facts))
    (finding,) = outcome.findings
    assert finding.code == "allreduce.below_floor" and finding.data["busbw_gbps"] == pytest.approx(
        8.39, 0.01
    )
    assert "doctor.toml" in finding.evidence[-1]
