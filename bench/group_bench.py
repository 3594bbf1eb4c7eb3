"""Group testing on the project's test bed (tests/cluster/harness.py): how many rounds and tests
it takes to name a node, how long, and how far apart healthy and slow groups run, quiet and with
this machine loaded on purpose (a busy loop on every core).

For each size and case (the middle node's link shaped to 10 Mbit/s; the middle node
blackholed), ``doctor allreduce`` runs RUNS times quiet, then RUNS times loaded. A run is kept
with its wall time, the search's rounds, tests and seconds, the nodes its FAIL findings name,
each round's groups (ranks started, seconds, speeds), how long the ranks of the run across every
node took to import torch, and the load averages around it. docs/scale.md projects 64 nodes from
these figures (``--document`` prints its table); 64-node beds are not run here: two cores shared.

Run as root from the repository root:
``python3 -m bench.group_bench [--sizes 8 16] [--runs 3]``; results go to
``bench/group_bench.json`` (merged with what is there, per size).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.cluster.busy import busy_cores
from tests.cluster.harness import Cluster, make_cluster

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "group_bench.json"


def doctor(c: Cluster) -> tuple[float, dict[str, Any]]:
    argv = [sys.executable, "-m", "doctor", "allreduce", "-H", c.hosts_arg()]
    argv += ["--ssh-config", str(c.ssh_config), "--python", sys.executable, "--iface", "eth0"]
    argv += ["--connect-timeout", "3", "-f", "json"]
    started = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=900, cwd=ROOT)
    return time.perf_counter() - started, json.loads(proc.stdout)


def rounds(search: dict[str, Any]) -> list[dict[str, Any]]:
    """Per round: ranks started, its longest group, the healthy and the positive groups' busbw."""
    out = []
    for r in range(1, search["rounds"] + 1):
        groups = [g for g in search["groups"] if g["round"] == r]
        speed = [(g["outcome"], g["busbw_gbps"] * 8e3) for g in groups if g["busbw_gbps"]]
        out.append(
            {
                "ranks": sum(len(g["nodes"]) for g in groups),
                "groups": len(groups),
                "seconds": max(g["seconds"] for g in groups),
                "healthy_mbit": sorted(round(s, 1) for o, s in speed if o == "pass"),
                "slow_mbit": sorted(round(s, 1) for o, s in speed if o == "slow"),
            }
        )
    return out


def one(c: Cluster) -> dict[str, Any]:
    before = os.getloadavg()
    wall, report = doctor(c)
    section = report.get("allreduce") or {}
    search = section.get("search") or {}
    run = (section.get("runs") or [{}])[0]
    starts = [r["start_s"] for r in run.get("ranks", []) if r.get("start_s") is not None]
    named = sorted({n for f in report["findings"] if f["severity"] == "fail" for n in f["nodes"]})
    out = {
        "seconds": round(wall, 1),
        "whole_run_s": run.get("seconds"),
        "whole_status": run.get("status"),
        "slowest_start_s": max(starts, default=None),
        "search_rounds": search.get("rounds"),
        "search_tests": search.get("tests"),
        "search_s": search.get("seconds"),
        "search_named": search.get("bad_nodes"),
        "fail_named": named,
        "fail_codes": sorted({f["code"] for f in report["findings"] if f["severity"] == "fail"}),
        "per_round": rounds(search) if search else [],
        "load_before": [round(x, 1) for x in before],
        "load_after": [round(x, 1) for x in os.getloadavg()],
    }
    print(json.dumps({k: v for k, v in out.items() if k != "per_round"}), file=sys.stderr)
    return out


def size(n: int, runs: int) -> dict[str, Any]:
    middle = f"node{n // 2 + 1}"
    result: dict[str, Any] = {"nodes": n, "runs": runs, "node": middle, "cases": {}}
    for case in ("10mbit", "blackholed"):
        with tempfile.TemporaryDirectory() as tmp, make_cluster(n, Path(tmp)) as c:
            if case == "10mbit":
                c.shape(middle, "10mbit")
            else:
                c.blackhole(middle)
            quiet = [one(c) for _ in range(runs)]
            with busy_cores():
                loaded = [one(c) for _ in range(runs)]
        every = quiet + loaded
        result["cases"][case] = {
            "quiet": quiet,
            "loaded": loaded,
            "named_alone": all(r["fail_named"] == [middle] for r in every),
            "search_named_alone": all(r["search_named"] == [middle] for r in every),
        }
    return result


def span(values: list[float], fmt: str = "{:.0f}") -> str:
    low, high = fmt.format(min(values)), fmt.format(max(values))
    return low if low == high else f"{low}–{high}"


def document(results: dict[str, Any]) -> str:
    lines = [
        "| nodes | case | load average | named alone | rounds | tests | search | whole run | "
        "healthy groups | slow groups |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n, res in sorted(results.items(), key=lambda kv: int(kv[0])):
        for case, data in res["cases"].items():
            for load in ("quiet", "loaded"):
                runs = data[load]
                rounds = [rd for r in runs for rd in r["per_round"]]
                healthy = [s for rd in rounds for s in rd["healthy_mbit"]]
                slow = [s for rd in rounds for s in rd["slow_mbit"]]
                alone = all(r["fail_named"] == [res["node"]] for r in runs)
                loads = [r["load_before"][0] for r in runs] + [r["load_after"][0] for r in runs]
                cells = [
                    n,
                    f"{case}, {load}",
                    span(loads),
                    f"{'yes' if alone else 'NO'} ({len(runs)}×)",
                    span([r["search_rounds"] for r in runs]),
                    span([r["search_tests"] for r in runs]),
                    span([r["search_s"] for r in runs]) + " s",
                    span([r["whole_run_s"] for r in runs]) + " s",
                    span(healthy) + " Mbit/s" if healthy else "–",
                    span(slow, "{:.1f}") + " Mbit/s" if slow else "–",
                ]
                lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 16])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--document", action="store_true")
    args = parser.parse_args()
    results = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    if args.document:
        print(document(results))
        return 0
    for n in args.sizes:
        results[str(n)] = size(n, args.runs)
        results[str(n)]["machine"] = {"cpus": os.cpu_count(), "when": time.strftime("%F %T")}
        RESULTS.write_text(json.dumps(results, indent=1) + "\n")
    print(document(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
