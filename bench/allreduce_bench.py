"""The allreduce verdict on the namespace cluster (3 nodes, real sshd, real TCP, CPU torch, Gloo).

1. `doctor allreduce` (the whole command: start-up, probe, allreduce, verdict) side by side with
   its peer, a torchrun smoke test (bench/smoke_test.py on every node over ssh: init, one
   allreduce, a barrier), in alternating rounds on the same nodes with the same Python.
   Target: ratio <= 1.0.
2. node3's link shaped to 10 Mbit/s (tc tbf, both directions): the whole `doctor allreduce`, which
   must end within 15 s and name node3 and its rate.
3. Every link shaped to 100 Mbit/s: bus bandwidth at a forced 16 MiB, as a fraction of the rate.

Needs root. Usage: python3 bench/allreduce_bench.py [--rounds N] [--out bench/allreduce_bench.json]
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.cluster.harness

from bench import kernel_window  # noqa: E402
from tests.cluster.harness import Cluster, make_cluster  # noqa: E402

PORT = 29611


def doctor(c: Cluster, *extra: str) -> tuple[float, dict]:
    argv = [sys.executable, "-m", "doctor", "allreduce", "-H", c.hosts_arg()]
    argv += ["--ssh-config", str(c.ssh_config), "--python", sys.executable, "--backend", "gloo"]
    argv += ["--port", str(PORT), "-f", "json", *extra]
    started = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=ROOT)
    seconds = time.perf_counter() - started
    return seconds, json.loads(proc.stdout)


def smoke(c: Cluster) -> float:
    """torchrun on every node at once over ssh; the time until the last one exits."""
    master = c.node("node1").address
    started = time.perf_counter()
    procs = []
    for rank, name in enumerate(c.names):
        remote = (
            f"cd {ROOT} && {sys.executable} -m torch.distributed.run --nnodes {len(c.names)} "
            f"--nproc_per_node 1 --node_rank {rank} --master_addr {master} "
            f"--master_port {PORT} bench/smoke_test.py"
        )
        argv = ["ssh", "-F", str(c.ssh_config), "-o", "BatchMode=yes", name, remote]
        procs.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
    codes = [p.wait(timeout=300) for p in procs]
    seconds = time.perf_counter() - started
    if any(codes):
        raise SystemExit(f"smoke test failed: {[p.stderr.read() for p in procs if p.stderr]}")
    return seconds


def summary(values: list[float]) -> dict[str, float]:
    return {
        "median_s": round(statistics.median(values), 3),
        "min_s": round(min(values), 3),
        "max_s": round(max(values), 3),
    }


def main() -> None:
    kernel_window.from_now()
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path(__file__).with_suffix(".json"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, make_cluster(3, Path(tmp)) as c:
        ours: list[float] = []
        peer: list[float] = []
        for _ in range(args.rounds):
            seconds, report = doctor(c)
            assert report["allreduce"]["verified"], report["allreduce"]
            ours.append(seconds)
            peer.append(smoke(c))
        runs = len(report["allreduce"]["runs"])
        c.shape("node3", "10mbit")
        slow_s, slow = doctor(c)
        [named] = [f for f in slow["findings"] if f["code"] == "allreduce.slow_node"]
        for name in c.names:
            c.shape(name, "100mbit")
        _, shaped = doctor(c, "--sizes", "1M..16M")
    largest = shaped["allreduce"]["runs"][0]["sweep"][-1]
    rate_gbps = 100e6 / 8 / 1e9
    result = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}",
        "load_average_at_end": os.getloadavg(),
        "healthy_3_nodes_gloo": {
            "rounds": args.rounds,
            "doctor_allreduce": summary(ours),
            "torchrun_smoke_test": summary(peer),
            "ratio_of_medians": round(statistics.median(ours) / statistics.median(peer), 3),
            "target_ratio": 1.0,
            "runs_per_verdict": runs,
        },
        "node3_at_10mbit": {
            "doctor_allreduce_s": round(slow_s, 2),
            "target_s": 15.0,
            "slow_node": named["nodes"],
            "summary": named["summary"],
            "sweep_stopped": slow["allreduce"]["runs"][0]["sweep_stopped"],
        },
        "all_links_at_100mbit": {
            "largest_bytes": largest["bytes"],
            "busbw_gbps": largest["busbw_gbps"],
            "fraction_of_rate": round(largest["busbw_gbps"] / rate_gbps, 3),
        },
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
