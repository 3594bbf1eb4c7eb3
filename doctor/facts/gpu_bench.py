"""What the probe's GPU tests measured (``--gpu-tests``; GPU_TESTS_SNIPPET in the probe): the node's
own allreduce across its GPUs by size, and per GPU its GEMM TFLOPS and whether the result was
finite, memory, host-to-device and device-to-host bandwidth, and the copy bandwidth of each GPU
pair. Numbers only; checks/gpu_bench.py judges them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from doctor.core.capture import Capture
from doctor.core.model import Missing
from doctor.facts.child import last_words

SLOT = "gpu-tests"
MARK = "@@cluster-doctor-gpu-tests@@"
FLOOR_BYTES = 256 << 20  # a node's NVLink busbw is judged on its large messages only


@dataclass(frozen=True)
class GpuSpeed:
    index: int
    tflops: float | None
    finite: bool | None
    memory_gbps: float | None
    h2d_gbps: float | None
    d2h_gbps: float | None


@dataclass(frozen=True)
class GpuBench:
    gpus: int
    name: str | None  # the first GPU's name, as torch gives it
    allreduce: tuple[tuple[int, float], ...]  # (bytes, busbw GB/s)
    per_gpu: tuple[GpuSpeed, ...]
    p2p: dict[str, float]  # "0-1" → GB/s
    error: str | None  # the tests stopped here (CUDA not usable, a test raised)

    @property
    def busbw(self) -> float | None:
        """The best busbw at FLOOR_BYTES and above: where NVLink's bandwidth plateaus."""
        large = [bw for size, bw in self.allreduce if size >= FLOOR_BYTES]
        return max(large) if large else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if value == value and value >= 0 else None


def parse_answer(data: dict[str, Any]) -> GpuBench:
    """The runner's JSON, any field of which may be absent or odd."""
    runs = []
    for row in data.get("allreduce") or []:
        if isinstance(row, dict):
            size, bw = _number(row.get("bytes")), _number(row.get("busbw_gbps"))
            if size is not None and bw is not None:
                runs.append((int(size), bw))
    speeds = []
    for row in data.get("per_gpu") or []:
        if isinstance(row, dict) and isinstance(row.get("index"), int):
            finite = row.get("finite")
            speeds.append(
                GpuSpeed(
                    row["index"],
                    _number(row.get("tflops")),
                    finite if isinstance(finite, bool) else None,
                    _number(row.get("memory_gbps")),
                    _number(row.get("h2d_gbps")),
                    _number(row.get("d2h_gbps")),
                )
            )
    raw_pairs = data.get("p2p")
    pairs: dict[Any, Any] = raw_pairs if isinstance(raw_pairs, dict) else {}
    p2p = {str(k): bw for k, v in pairs.items() if (bw := _number(v)) is not None}
    error, gpus, name = data.get("error"), data.get("gpus"), data.get("name")
    return GpuBench(
        gpus=gpus if isinstance(gpus, int) else 0,
        name=name if isinstance(name, str) else None,
        allreduce=tuple(runs),
        per_gpu=tuple(speeds),
        p2p=p2p,
        error=str(error)[:300] if error else None,
    )


def parse_gpu_bench(cap: Capture) -> GpuBench | Missing:
    result = cap.command(SLOT)
    if isinstance(result, Missing):
        if result.kind == "unsupported":
            return Missing("the GPU tests did not run (--gpu-tests)", "unsupported")
        return result
    line = next((ln for ln in reversed(result.stdout.splitlines()) if ln.startswith(MARK)), None)
    if line is None:
        return Missing(
            f"the GPU tests said nothing: {last_words(result, stdout_too=True)}", "failed"
        )
    try:
        data = json.loads(line[len(MARK) :])
    except ValueError:
        return Missing("the GPU tests' answer is not JSON", "failed")
    return parse_answer(data) if isinstance(data, dict) else Missing("odd answer", "failed")
