"""Collection time through srun vs through SSH on the same namespace nodes (root).

Builds N nodes (default 16) with the test harness (real sshd each) and a real SLURM over them,
then times ``gather`` of the probe on every node: one srun step making its own allocation, one
srun step inside an existing allocation (salloc), and the SSH transport (fresh connections).
Usage: python3 bench/srun_collect.py [--nodes 16] [--runs 5] [--out bench/srun_collect.json]
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import kernel_window
from doctor.core.model import NodeFailure
from doctor.nodes.inventory import build_inventory
from doctor.nodes.transport.srun import slurm_nodes
from doctor.nodes.transport.ssh import SshTransport
from doctor.stages.collect import gather
from tests.cluster.harness import make_cluster
from tests.cluster.slurm import slurm_on

SPEC = {"deadline": 20.0}

# Run by salloc inside the allocation: one timed gather through srun, printed as seconds.
IN_ALLOCATION = """
import os, sys, time
from doctor.stages.collect import gather
from doctor.core.model import NodeFailure
from doctor.nodes.transport.srun import slurm_nodes
nodes, transport = slurm_nodes(None, None, os.environ)
started = time.perf_counter()
results = gather(nodes, transport, {"deadline": 20.0})
elapsed = time.perf_counter() - started
bad = [n for n, r in results.items() if isinstance(r, NodeFailure)]
print(elapsed if not bad else "failed: %s" % bad)
"""


def summary(samples: list[float]) -> dict[str, float]:
    return {
        "median_s": round(statistics.median(samples), 3),
        "min_s": round(min(samples), 3),
        "max_s": round(max(samples), 3),
    }


def timed_gather(nodes, transport, failures: list[str]) -> float:
    """Seconds to collect every node; failed nodes are recorded, not hidden."""
    started = time.perf_counter()
    results = gather(nodes, transport, SPEC)
    elapsed = time.perf_counter() - started
    failures += [f"{n}: {r.summary}" for n, r in results.items() if isinstance(r, NodeFailure)]
    return elapsed


def main() -> None:
    kernel_window.from_now()
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=16)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path(__file__).with_suffix(".json"))
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    work = Path(tempfile.mkdtemp(prefix="srun-bench-"))
    (work / "nodes").mkdir()
    with (
        make_cluster(args.nodes, work / "nodes") as cluster,
        slurm_on(cluster, work / "slurm") as slurm,
    ):
        hostlist = f"node[1-{args.nodes}]"
        nodes, srun = slurm_nodes(hostlist, None, slurm.env)
        failures: dict[str, list[str]] = {"srun": [], "ssh": []}
        own = [timed_gather(nodes, srun, failures["srun"]) for _ in range(args.runs)]
        inside = []
        env = {**slurm.env, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
        for _ in range(args.runs):
            proc = subprocess.run(
                [
                    "salloc",
                    f"-N{args.nodes}",
                    "--immediate=30",
                    sys.executable,
                    "-c",
                    IN_ALLOCATION,
                ],
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            answer = proc.stdout.strip().splitlines()[-1]
            if answer.startswith("failed"):
                failures["srun"].append(answer)
            else:
                inside.append(float(answer))
        ssh_nodes = build_inventory(hosts=cluster.hosts_arg(), ssh_config=cluster.ssh_config)
        ssh = []
        for _ in range(args.runs):
            with SshTransport() as transport:  # fresh connections each run, as a user's run has
                ssh.append(timed_gather(ssh_nodes, transport, failures["ssh"]))
    result = {
        "machine": f"{platform.node()} {platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}",
        "load_average_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "nodes": args.nodes,
        "runs": args.runs,
        "srun_own_allocation": summary(own),
        "srun_inside_allocation": summary(inside),
        "ssh_fresh_connections": summary(ssh),
        "failed_nodes": failures,
        "note": "all nodes are namespaces of one machine: the probes compete for its CPUs",
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
