"""The allreduce's start at scale: the whole `doctor preflight` on N healthy harness nodes, with a
launch timeout that suits the bed, must end with no FAIL (issue 38: at 64 nodes the ranks, all
importing torch on this machine's 2 cores, used to time out reaching rank 0's store, and the
report blamed MASTER_ADDR).

With ``--starve-first PCT`` node1, which holds the rendezvous store as rank 0, runs in a CPU
cgroup holding PCT % of one CPU (tests/cluster/harness.py ``starve``): its start is slow for real,
and the verdict must be a slow start (a warning), never a store failure.

Each run keeps the verdict (fail findings), the warnings, the allreduce's status and headline, its
seconds, the ranks' start times (from the run's start until each had imported torch), and the
load averages before and after: "quiet" is only as quiet as the machine.

Run as root from the repository root:
``python3 -m bench.start_bench [--nodes 64] [--launch-timeout 240] [--starve-first PCT]``;
results go to ``bench/start_bench.json`` (merged per size, case and launch timeout).
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
from typing import Any

from bench import kernel_window
from bench.load_bench import named, verdict
from tests.cluster.harness import Cluster, make_cluster

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "start_bench.json"


def preflight(c: Cluster, launch_timeout: float) -> tuple[float, dict[str, Any]]:
    argv = [sys.executable, "-m", "doctor", "preflight", "-H", c.hosts_arg()]
    argv += ["--ssh-config", str(c.ssh_config), "--python", sys.executable, "-f", "json"]
    argv += ["--launch-timeout", f"{launch_timeout:g}"]
    started = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=1800, cwd=ROOT)
    return time.perf_counter() - started, json.loads(proc.stdout)


def starts(run: dict[str, Any]) -> dict[str, Any]:
    """The ranks' start times (s from the run's start to torch imported), and who was slowest."""
    timed = [(r["start_s"], r["node"]) for r in run["ranks"] if r.get("start_s") is not None]
    if not timed:
        return {"ranks_started": 0, "ranks": len(run["ranks"])}
    times = sorted(t for t, _ in timed)
    slowest = max(timed)
    return {
        "ranks_started": len(timed),
        "ranks": len(run["ranks"]),
        "min_s": round(times[0], 1),
        "median_s": round(statistics.median(times), 1),
        "max_s": round(times[-1], 1),
        "slowest": slowest[1],
        "rank0_s": next((r["start_s"] for r in run["ranks"] if r["rank"] == 0), None),
    }


def warnings(report: dict[str, Any]) -> list[str]:
    found = (f for f in report["findings"] if f["severity"] == "warn")
    return sorted({f"{f['code']} {','.join(f['nodes'])}".strip() for f in found})


def one(c: Cluster, launch_timeout: float) -> dict[str, Any]:
    before = os.getloadavg()
    seconds, report = preflight(c, launch_timeout)
    section = report.get("allreduce") or {}
    runs = section.get("runs") or []
    first = runs[0] if runs else {}
    return {
        "seconds": round(seconds, 1),
        "verdict": verdict(report),
        "named": named(report),
        "warnings": warnings(report),
        "allreduce": {
            "status": section.get("status"),
            "headline": first.get("headline"),
            "seconds": first.get("seconds"),
            "start": starts(first) if first else None,
        },
        "load_before": [round(x, 1) for x in before],
        "load_after": [round(x, 1) for x in os.getloadavg()],
    }


def main(argv: list[str]) -> None:
    kernel_window.from_now()
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=64)
    parser.add_argument("--launch-timeout", type=float, default=240.0)
    parser.add_argument("--starve-first", type=float, default=None, metavar="PCT")
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args(argv[1:])
    case = "healthy" if args.starve_first is None else f"node1 at {args.starve_first:g}% CPU"
    with tempfile.TemporaryDirectory() as tmp, make_cluster(args.nodes, Path(tmp)) as c:
        if args.starve_first is not None:
            c.starve("node1", args.starve_first)
        results = []
        for _ in range(args.runs):
            results.append(one(c, args.launch_timeout))
            print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    save(
        {
            "nodes": args.nodes,
            "case": case,
            "launch_timeout_s": args.launch_timeout,
            "runs": results,
            "no_fail": all(not r["verdict"] for r in results),
            "run_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        }
    )


def save(result: dict[str, Any]) -> None:
    """Merge one size, case and launch timeout into the results file, read afresh."""
    doc = json.loads(RESULTS.read_text()) if RESULTS.exists() else {"results": []}

    def key(r: dict[str, Any]) -> tuple[int, str, float]:
        return r["nodes"], r["case"], r["launch_timeout_s"]

    kept = [r for r in doc["results"] if key(r) != key(result)]
    doc["results"] = sorted([*kept, result], key=key)
    doc["machine"] = (
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    RESULTS.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv)
