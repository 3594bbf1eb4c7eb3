"""Time `doctor nics` on this node: the whole command, and the NIC planning alone.

Target: `doctor nics` under 1 s wall on a 2-core machine (the probe, which includes one
ncclGetUniqueId child per libnccl found, dominates; planning is pure computation).
Usage: python3 -m bench.nics_bench [--runs N] [--out bench/nics_bench.json]
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
from doctor.judge.registry import load_checks, select
from doctor.judge.runner import run_checks
from doctor.nic.section import nics_section
from doctor.nodes.targets import Targets
from doctor.pipeline import steps as pipeline
from doctor.pipeline.request import Request


def summary(samples: list[float]) -> dict[str, float]:
    return {
        "median_s": round(statistics.median(samples), 4),
        "min_s": round(min(samples), 4),
        "max_s": round(max(samples), 4),
    }


def wall(argv: list[str]) -> float:
    started = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, check=False)
    elapsed = time.perf_counter() - started
    if proc.returncode not in (0, 1):  # 1 means findings, still a complete run
        raise SystemExit(f"{argv} failed: {proc.stderr.decode()}")
    return elapsed


def main() -> None:
    compile_bytecode()
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--out", type=Path, default=Path(__file__).with_suffix(".json"))
    args = parser.parse_args()
    command = [sys.executable, "-m", "doctor", "nics", "-f", "json"]
    runs = [wall(command) for _ in range(args.runs)]
    specs = select(load_checks(), ["nics", "rdma", "limits.memlock"], ())
    here = Request("nics", targets=Targets(local=True), checks=tuple(specs), judge=False)
    cluster = pipeline.run(here).cluster
    planning = []
    for _ in range(args.runs):
        started = time.perf_counter()
        run_checks(specs, cluster)
        nics_section({name: facts.nic for name, facts in cluster.nodes.items()})
        planning.append(time.perf_counter() - started)
    result = {
        "machine": f"{platform.node()} {platform.machine()}, {platform.python_version()}",
        "runs": args.runs,
        # Shared 2-core machine: the load at the end says how busy it was while timing.
        "loadavg_1m": float(Path("/proc/loadavg").read_text().split()[0]),
        "doctor_nics_wall": summary(runs),
        "plan_and_checks_in_process": summary(planning),
        "targets": {"doctor_nics_wall_s": 1.0},
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
