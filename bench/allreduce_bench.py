"""The 3-node Gloo allreduce on the namespace cluster (real sshd, real TCP): two numbers.

1. Time to verdict: from the stage's start (rendezvous port check, ranks started over SSH,
   torch imported on every node) to a verified result; healthy cluster, small sweep.
2. Bus bandwidth at the largest sweep size with every node's link shaped to 100 Mbit/s (tc tbf,
   both directions), as a fraction of that rate. Target: at least 0.7.

Needs root. Usage: python3 bench/allreduce_bench.py [--runs N] [--out bench/allreduce_bench.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.cluster.harness

from doctor.allreduce.plan import default_sizes

from doctor.allreduce.stage import Request, StageResult, run_stage
from doctor.inventory import build_inventory
from doctor.transport.launch import SshLauncher
from doctor.transport.ssh import SshTransport
from tests.cluster.harness import Cluster, make_cluster

RATE_MBIT = 100


def run(c: Cluster, sizes: tuple[int, ...]) -> tuple[StageResult, float]:
    nodes = build_inventory(hosts=c.hosts_arg(), ssh_config=c.ssh_config)
    request = Request(
        nodes=tuple(nodes), python=sys.executable, sizes=sizes, rendezvous_iface="eth0"
    )
    started = time.perf_counter()
    with SshTransport() as transport:
        result = run_stage(request, SshLauncher(transport))
    seconds = time.perf_counter() - started
    status = result.runs[0].status if result.runs else "not_started"
    if status != "passed":
        raise SystemExit(
            f"run did not pass: {result.runs[0].headline() if result.runs else status}"
        )
    return result, seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--largest", default=str(16 << 20), help="largest shaped size, bytes")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_suffix(".json"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, make_cluster(3, Path(tmp)) as c:
        verdicts = [run(c, (1024, 65536))[1] for _ in range(args.runs)]
        for node in c.names:
            c.shape(node, f"{RATE_MBIT}mbit")
        shaped, shaped_s = run(c, default_sizes(1 << 20, int(args.largest)))
    rows = shaped.runs[0].sweep_rows()
    largest = rows[-1]
    rate_gbps = RATE_MBIT * 1e6 / 8 / 1e9
    result = {
        "machine": f"{platform.node()} {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}",
        "load_average_at_end": os.getloadavg(),
        "time_to_verdict_3_nodes_gloo": {
            "runs": args.runs,
            "median_s": round(statistics.median(verdicts), 3),
            "min_s": round(min(verdicts), 3),
            "max_s": round(max(verdicts), 3),
        },
        "shaped_100mbit": {
            "largest_bytes": largest["bytes"],
            "busbw_gbps": largest["busbw_gbps"],
            "fraction_of_rate": round(largest["busbw_gbps"] / rate_gbps, 3),
            "target_fraction": 0.7,
            "stage_s": round(shaped_s, 2),
            "sweep": rows,
        },
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "shaped_100mbit"}, indent=2))
    print("shaped:", {k: v for k, v in result["shaped_100mbit"].items() if k != "sweep"})


if __name__ == "__main__":
    main()
