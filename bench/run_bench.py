"""The gate's price: `doctor run -- mpirun ...` against the same mpirun launched directly, with
the quick and the full profile, on 3, 16 and 64 namespace nodes (real sshd, real Open MPI).

The job is ``true`` on every node, so what is measured is the gate (probe, reachability, the
allreduce: one size with quick, the sweep with full) plus the doctor's launch, not the job. Past
16 nodes the gate runs without the allreduce (``--allreduce-up-to``): 64 ranks on this machine's
2 cores overrun its phase deadlines, which real nodes, each with its own CPUs, do not. The
SSH mesh is left out of both (``--mesh off``): its cost is the scale benchmark's
(bench/scale_bench.py), and on a test machine whose /root/.ssh/config names another test bed's
addresses the nodes' own ssh cannot log in to these nodes at all.
Usage (root): python3 -m bench.run_bench [--nodes 3 16 64] [--runs 2] [--launch-timeout S]
[--allreduce-up-to N] [--out bench/run_bench.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import kernel_window
from bench.installed import compile_bytecode
from tests.cluster.harness import Cluster, make_cluster


def mpirun(c: Cluster) -> list[str]:
    return [
        "mpirun", "--allow-run-as-root", "-H", c.hosts_arg(), "-np", str(len(c.names)),
        "--mca", "plm_rsh_args", f"-F {c.ssh_config}", "true",
    ]  # fmt: skip


def timed(argv: list[str]) -> tuple[float, dict[str, object]]:
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "r.json"
        started = time.perf_counter()
        argv = [w.replace("{json}", str(report)) for w in argv]
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - started
        if proc.returncode != 0:
            raise SystemExit(f"{argv[:6]} failed ({proc.returncode}): {proc.stderr[-1500:]}")
        run = json.loads(report.read_text())["run"] if report.exists() else {}
    return seconds, run


def summary(samples: list[float]) -> dict[str, float]:
    return {
        "median_s": round(statistics.median(samples), 3),
        "min_s": round(min(samples), 3),
        "max_s": round(max(samples), 3),
    }


def measure(n: int, runs: int, launch_timeout: float, allreduce: bool) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as work, make_cluster(n, Path(work)) as c:
        job = mpirun(c)
        doctor = [sys.executable, "-m", "doctor", "-q", "run", "--ssh-config", str(c.ssh_config)]
        doctor += ["--python", sys.executable, "--json", "{json}", "--mesh", "off"]
        doctor += ["--launch-timeout", str(launch_timeout)]
        doctor += [] if allreduce else ["--no-allreduce"]
        out: dict[str, object] = {"nodes": n, "allreduce": allreduce}
        direct = [timed(job)[0] for _ in range(runs)]
        out["direct"] = summary(direct)
        for profile in ("quick", "full"):
            walls, gates = [], []
            for _ in range(runs):
                wall, run = timed([*doctor, "--profile", profile, "--", *job])
                walls.append(wall)
                gates.append(float(run["gate_seconds"]))  # type: ignore[arg-type]
            out[profile] = {
                "wall": summary(walls),
                "gate": summary(gates),
                "overhead_s": round(statistics.median(walls) - statistics.median(direct), 3),
            }
        return out


def main() -> None:
    kernel_window.from_now()
    compile_bytecode()
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, nargs="+", default=[3, 16, 64])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path(__file__).with_suffix(".json"))
    # Every node's ranks import torch on this machine's 2 cores at once: at 64 nodes that takes
    # longer than the doctor's 30 s default, which real nodes (each with its own CPUs) never pay.
    parser.add_argument("--launch-timeout", type=float, default=240.0)
    # Past this many nodes the gate runs without the allreduce: 64 Gloo ranks on 2 cores do not
    # finish the 256 KB verification within its 10 s deadline (every rank reaches it, none ends).
    parser.add_argument("--allreduce-up-to", type=int, default=16)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    results = [
        measure(n, args.runs, args.launch_timeout, n <= args.allreduce_up_to) for n in args.nodes
    ]
    result = {
        "machine": f"{platform.node()} {platform.machine()}, {platform.python_version()}",
        "cpus": os.cpu_count(),
        # Other work on the machine shows in every figure: the 1-minute load, before and after.
        "load_average": [round(load, 1), round(os.getloadavg()[0], 1)],
        "runs": args.runs,
        "job": "mpirun -np N true, one rank per node",
        "launch_timeout_s": args.launch_timeout,
        "results": results,
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
