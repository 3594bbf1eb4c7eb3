"""Time `doctor preflight` on this node and the probe alone (no torch import).

Targets on a 2-core machine: preflight under 1 s wall, probe under 300 ms.
Usage: python3 -m bench.preflight_bench [--runs N] [--out bench/preflight_bench.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.installed import compile_bytecode
from doctor.judge.registry import load_checks
from doctor.pipeline.request import Request
from doctor.pipeline.steps import probe_spec
from doctor.stages.collect import probe_argv, probe_source


def timed(argv: list[str], stdin: bytes | None = None) -> float:
    started = time.perf_counter()
    proc = subprocess.run(argv, input=stdin, capture_output=True, check=False)
    if proc.returncode not in (0, 1):  # 1: the run completed and found something
        raise SystemExit(f"{argv[:4]} failed: {proc.stderr.decode()[-500:]}")
    return time.perf_counter() - started


def summary(samples: list[float]) -> dict[str, float]:
    return {
        "median_s": round(statistics.median(samples), 4),
        "min_s": round(min(samples), 4),
        "max_s": round(max(samples), 4),
    }


def main() -> None:
    compile_bytecode()
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--out", type=Path, default=Path(__file__).with_suffix(".json"))
    args = parser.parse_args()
    spec = probe_spec(Request("probe", checks=tuple(load_checks())), [])
    source = probe_source()
    probe = [timed(probe_argv(sys.executable, spec), source) for _ in range(args.runs)]
    preflight = [
        timed([sys.executable, "-m", "doctor", "preflight", "-f", "json"]) for _ in range(args.runs)
    ]
    result = {
        "machine": f"{platform.node()} {platform.machine()}, {platform.python_version()}",
        "runs": args.runs,
        "probe_alone": summary(probe),
        "preflight_wall": summary(preflight),
        "targets": {"probe_alone_s": 0.3, "preflight_wall_s": 1.0},
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
