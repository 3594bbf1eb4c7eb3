"""Group testing on the project's test bed (tests/cluster/harness.py): how many rounds and tests
it takes to name a node, how long, and how far apart healthy and slow groups run, quiet and with
this machine loaded on purpose (a busy loop on every core).

For each size and case (the middle node's link shaped to 10 Mbit/s; the middle node
blackholed), ``doctor allreduce`` runs RUNS times quiet, then LOADED_RUNS times loaded. A run is
kept with its wall time, the search's rounds, tests and seconds, the nodes its FAIL findings name,
each round's groups (ranks started, seconds, speeds), how long the ranks of the run across every
node took to import torch, and the load averages around it. docs/scale.md carries these figures
(``--document`` prints its table).

At 64 nodes the ranks of the run across every node, and of the search's first round, import
torch on this machine's 2 cores (about a minute): give them ``--launch-timeout 240``, and
``--loaded-runs 0`` keeps to quiet runs. ``--bed testbed`` runs the same on the independent test
bed (/work/shared/testbed/cluster.py, bench/load_bench.py's ``Testbed``).

Run as root from the repository root:
``python3 -m bench.group_bench [--sizes 8 16] [--runs 3] [--loaded-runs N] [--cases 10mbit]
[--bed harness|testbed] [--launch-timeout S] [--connect-timeout S] [--keep]``; results go to
``bench/group_bench.json`` (merged with what is there, per bed, size and case; ``--keep`` adds
the new runs to the case's saved ones).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import kernel_window
from bench.load_bench import Bed, Testbed, bed
from tests.cluster.busy import busy_cores
from tests.cluster.harness import Cluster

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "group_bench.json"


def doctor(b: Bed, options: list[str]) -> tuple[float, dict[str, Any]]:
    argv = [sys.executable, "-m", "doctor", "allreduce", "-H", b.hosts_arg()]
    argv += ["--ssh-config", str(b.ssh_config), "--python", sys.executable, "--iface", "eth0"]
    argv += [*options, "-f", "json"]
    started = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=1800, cwd=ROOT)
    return time.perf_counter() - started, json.loads(proc.stdout)


def break_node(b: Bed, case: str, node: str) -> None:
    """The case's fault on ``node``: its link shaped to 10 Mbit/s both ways, or blackholed."""
    if case == "blackholed":
        b.blackhole(node)
    elif isinstance(b, Testbed):
        b._cli("shape", node.removeprefix("node"), case)
    else:
        assert isinstance(b, Cluster)
        b.shape(node, case)


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


def one(b: Bed, options: list[str]) -> dict[str, Any]:
    before = os.getloadavg()
    wall, report = doctor(b, options)
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


def size(kind: str, n: int, args: argparse.Namespace, result: dict[str, Any]) -> None:
    """Run every case of ``args`` on a bed of ``n`` nodes; each case replaces its own in
    ``result``."""
    middle = f"node{n // 2 + 1}"
    options = ["--connect-timeout", f"{args.connect_timeout:g}"]
    if args.launch_timeout is not None:
        options += ["--launch-timeout", f"{args.launch_timeout:g}"]
    loaded_runs = args.runs if args.loaded_runs is None else args.loaded_runs
    result.update({"bed": kind, "nodes": n, "node": middle})
    for case in args.cases:
        with bed(kind, n) as b:
            break_node(b, case, middle)
            quiet = [one(b, options) for _ in range(args.runs)]
            with busy_cores(loaded_runs > 0):
                loaded = [one(b, options) for _ in range(loaded_runs)]
        if args.keep and case in result.get("cases", {}):
            quiet = result["cases"][case]["quiet"] + quiet
            loaded = result["cases"][case]["loaded"] + loaded
        every = quiet + loaded
        result.setdefault("cases", {})[case] = {
            "options": options,
            "quiet": quiet,
            "loaded": loaded,
            "named_alone": all(r["fail_named"] == [middle] for r in every),
            "search_named_alone": all(r["search_named"] == [middle] for r in every),
            "machine": {"cpus": os.cpu_count(), "when": time.strftime("%F %T")},
        }


def span(values: list[float], fmt: str = "{:.0f}") -> str:
    low, high = fmt.format(min(values)), fmt.format(max(values))
    return low if low == high else f"{low}–{high}"


def document(results: dict[str, Any]) -> str:
    lines = [
        "| test bed | nodes | case | load average | named alone | rounds | tests | search | "
        "whole run | healthy groups | slow groups |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for res in sorted(results.values(), key=lambda r: (r.get("bed", "harness"), r["nodes"])):
        for case, data in res["cases"].items():
            for load in ("quiet", "loaded"):
                runs = data[load]
                if not runs:
                    continue
                rounds = [rd for r in runs for rd in r["per_round"]]
                healthy = [s for rd in rounds for s in rd["healthy_mbit"]]
                slow = [s for rd in rounds for s in rd["slow_mbit"]]
                alone = all(r["fail_named"] == [res["node"]] for r in runs)
                loads = [r["load_before"][0] for r in runs] + [r["load_after"][0] for r in runs]
                cells = [
                    res.get("bed", "harness"),
                    res["nodes"],
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
    kernel_window.from_now()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 16])
    parser.add_argument("--runs", type=int, default=3, help="quiet runs")
    parser.add_argument("--loaded-runs", type=int, default=None, help="default: --runs")
    parser.add_argument("--cases", nargs="+", default=["10mbit", "blackholed"])
    parser.add_argument("--bed", choices=["harness", "testbed"], default="harness")
    parser.add_argument("--launch-timeout", type=float, default=None)
    parser.add_argument("--connect-timeout", type=float, default=3.0)
    parser.add_argument("--keep", action="store_true", help="add to the case's saved runs")
    parser.add_argument("--document", action="store_true")
    args = parser.parse_args()
    results = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    if args.document:
        print(document(results))
        return 0
    for n in args.sizes:
        key = str(n) if args.bed == "harness" else f"{args.bed} {n}"
        size(args.bed, n, args, results.setdefault(key, {}))
        # Read afresh and merge: only this bed and size's cases change.
        saved = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
        saved[key] = results[key]
        RESULTS.write_text(json.dumps(saved, indent=1) + "\n")
    print(document(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
