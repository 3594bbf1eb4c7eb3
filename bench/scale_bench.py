"""Scale on the netns harness: healthy 16, 64 and 128 nodes, the whole preflight against the floor.

For each size, in alternating rounds on one cluster of real sshd nodes:

- floor: ``ssh -o BatchMode=yes host true`` to every node at once (one login per node);
- probe: ``doctor preflight --no-allreduce --mesh off --reach off`` (facts and checks);
- reach: the same with TCP reachability on;
- doctor: the whole ``doctor preflight --no-allreduce`` (probe, reachability, the SSH mesh);
- allreduce: ``doctor preflight --mesh off --reach off --launch-timeout S`` (the probe and the
  allreduce across every node: one rank a node, every rank importing torch on this machine's
  cores, hence the long launch timeout; ``--no-allreduce`` leaves it out);
- mesh floor: the pairs the doctor's mesh tested, as a shell loop would test them: one login per
  node, from which ``ssh -o BatchMode=yes peer true`` to each of its peers at once (the doctor's
  mesh costs ``doctor - reach``; this is what those same logins cost on this test bed).

Every report should have no fail finding: each one is counted (a false alarm), with examples.
Beside the wall times it keeps what the controller itself spent apart from what the test bed
spent: every node's sshd, agents and ranks run on the same 2 cores, so here each login any node
makes is paid by one machine, where on a real cluster each node pays for its own. The controller
is the doctor process and its children on this side (the ssh clients it starts): its CPU seconds
are ``getrusage(RUSAGE_CHILDREN)`` around the run (every descendant the doctor waited for), its
peak memory is sampled from /proc every SAMPLE seconds (the sum of VmRSS over the doctor's process
tree, shared pages counted in every process, and the doctor's own VmHWM). Each stage's cost is
the run with it less the run without it. The machine's MemAvailable is sampled too: its drop
during the allreduce is the ranks' memory (theirs, not the controller's). Results go to
``bench/scale_bench.json``, merged per size.

Run as root from the repository root:
``python3 -m bench.scale_bench [--rounds N] [--sizes 16 64 128] [--launch-timeout S]
[--no-allreduce]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench import kernel_window
from bench.floor import by_source, fan_out, logins, ssh_floor
from bench.installed import compile_bytecode
from tests.cluster.harness import Cluster, make_cluster

HERE = Path(__file__).parent
ROOT = HERE.parent
RESULTS = HERE / "scale_bench.json"
# This checkout's doctor (run from ROOT), not whichever one is installed.
DOCTOR = [sys.executable, "-m", "doctor"]
SAMPLE = 0.5  # seconds between looks at /proc: a scan of every process, a few % of one core
# The doctor is killed when the machine's MemAvailable falls below this (128 ranks importing
# torch on one machine may not fit it): the run is then kept as stopped, never left to thrash.
MEMORY_FLOOR_MIB = 2048


def mesh_floor(c: Cluster, pairs: list[tuple[str, str]]) -> float:
    """One login per node that logs in to each of its tested peers at once."""
    # The node's own ssh, as the doctor's mesh agents run it there.
    each = 'ssh -o BatchMode=yes "$t" true'
    commands = {source: fan_out(each, t) for source, t in by_source(pairs).items()}
    return logins(c.ssh_config, commands, "mesh floor", 600)


def tested_pairs(coverage: dict, nodes: list[str]) -> list[tuple[str, str]]:
    if "pairs" in coverage:
        return [(a, b) for a, b in coverage["pairs"]]
    return [(a, b) for a in nodes for b in nodes if a != b]


def _kib(status: str, field: str) -> int:
    line = next((x for x in status.splitlines() if x.startswith(field + ":")), "")
    return int(line.split()[1]) if line else 0


def _parents() -> dict[int, int]:
    """Every process's parent, from /proc."""
    out = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = Path(f"/proc/{entry.name}/stat").read_text()
                out[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    return out


def _tree(root: int) -> list[int]:
    parents = _parents()
    tree, frontier = [root], [root]
    while frontier:
        frontier = [p for p, parent in parents.items() if parent in frontier]
        tree += frontier
    return tree


def _available_mib() -> int:
    return _kib(Path("/proc/meminfo").read_text(), "MemAvailable") >> 10


@contextlib.contextmanager
def sampled(pid: int) -> Iterator[dict[str, int]]:
    """Peaks of ``pid``'s process tree while the block runs: the sum of its VmRSS, its own VmHWM,
    its process count; and the machine's least MemAvailable (all in MiB but the count). Kills
    ``pid`` when MemAvailable falls below MEMORY_FLOOR_MIB (``stopped_low_memory`` 1)."""
    peak = {"tree_rss_mib": 0, "doctor_hwm_mib": 0, "processes": 0, "stopped_low_memory": 0}
    peak["available_before_mib"] = peak["available_min_mib"] = _available_mib()
    done = threading.Event()

    def look() -> None:
        while not done.wait(SAMPLE):
            rss = 0
            tree = _tree(pid)
            for p in tree:
                with contextlib.suppress(OSError):
                    status = Path(f"/proc/{p}/status").read_text()
                    rss += _kib(status, "VmRSS")
                    if p == pid:
                        peak["doctor_hwm_mib"] = _kib(status, "VmHWM") >> 10
            peak["tree_rss_mib"] = max(peak["tree_rss_mib"], rss >> 10)
            peak["processes"] = max(peak["processes"], len(tree))
            peak["available_min_mib"] = min(peak["available_min_mib"], _available_mib())
            if peak["available_min_mib"] < MEMORY_FLOOR_MIB and not peak["stopped_low_memory"]:
                peak["stopped_low_memory"] = 1
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, 9)

    thread = threading.Thread(target=look, daemon=True)
    thread.start()
    try:
        yield peak
    finally:
        done.set()
        thread.join()


def doctor(c: Cluster, *extra: str) -> tuple[float, float, dict, dict[str, int]]:
    """Wall seconds, the controller's CPU seconds (the doctor and its children), its report, and
    its peaks (``sampled``)."""
    argv = [*DOCTOR, "preflight", "-H", c.hosts_arg(), "--ssh-config", str(c.ssh_config)]
    argv += ["-f", "json", "--python", sys.executable, *extra]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT
    )
    with sampled(proc.pid) as peak:
        out, _ = proc.communicate(timeout=1800)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if peak["stopped_low_memory"]:  # no report: the run is kept as what it cost until then
        return wall, cpu, {"findings": [], "stopped_low_memory": True}, peak
    return wall, cpu, json.loads(out), peak


def fails(report: dict) -> list[str]:
    """The fail findings of a report of a healthy cluster: each one a false alarm."""
    return [f["summary"] for f in report["findings"] if f["severity"] == "fail"]


RUNS = {  # run -> the preflight's options
    "probe": ("--no-allreduce", "--mesh", "off", "--reach", "off"),
    "reach": ("--no-allreduce", "--mesh", "off"),
    "doctor": ("--no-allreduce",),
    "allreduce": ("--mesh", "off", "--reach", "off"),  # with --launch-timeout
}
STAGES = {  # stage -> (the run with it, the run without it)
    "probe": ("probe", None),
    "reachability": ("reach", "probe"),
    "mesh": ("doctor", "reach"),
    "allreduce": ("allreduce", "probe"),
}


def allreduce_facts(report: dict, peak: dict[str, int], n: int) -> dict[str, Any]:
    """The allreduce's own verdict and seconds, its ranks' start, and what the ranks took of
    the machine's memory (MemAvailable's drop during the run, a rank a node)."""
    section = report.get("allreduce") or {}
    run = (section.get("runs") or [{}])[0]
    starts = sorted(r["start_s"] for r in run.get("ranks", []) if r.get("start_s") is not None)
    drop = peak["available_before_mib"] - peak["available_min_mib"]
    return {
        "status": section.get("status"),
        "headline": run.get("headline"),
        "seconds": run.get("seconds"),
        "ranks_started": len(starts),
        "start_median_s": round(statistics.median(starts), 1) if starts else None,
        "start_max_s": round(starts[-1], 1) if starts else None,
        "stopped_low_memory": bool(peak["stopped_low_memory"]),
        "available_before_mib": peak["available_before_mib"],
        "available_min_mib": peak["available_min_mib"],
        "memory_drop_mib": drop,
        "memory_per_rank_mib": round(drop / n),
        "warnings": sorted(f["code"] for f in report["findings"] if f["severity"] == "warn"),
    }


def size(n: int, rounds: int, launch_timeout: float | None) -> dict:
    runs_ = [k for k in RUNS if k != "allreduce" or launch_timeout is not None]
    with tempfile.TemporaryDirectory() as tmp, make_cluster(n, Path(tmp)) as c:
        wall: dict[str, list[float]] = {k: [] for k in ("floor", *runs_, "mesh_floor")}
        cpu: dict[str, list[float]] = {k: [] for k in runs_}
        peaks: dict[str, list[dict[str, int]]] = {k: [] for k in runs_}
        false_alarms: list[str] = []
        reports: dict[str, dict] = {}
        allreduce: list[dict[str, Any]] = []
        for _ in range(rounds):
            wall["floor"].append(ssh_floor(c))
            for key in runs_:
                extra = RUNS[key]
                if key == "allreduce":
                    extra += ("--launch-timeout", f"{launch_timeout:g}")
                seconds, spent, report, peak = doctor(c, *extra)
                wall[key].append(seconds)
                cpu[key].append(spent)
                peaks[key].append(peak)
                reports[key] = report
                false_alarms += fails(report)
                if key == "allreduce":
                    allreduce.append(allreduce_facts(report, peak, n))
                print(key, round(seconds, 1), round(spent, 1), peak, file=sys.stderr, flush=True)
            pairs = tested_pairs(reports["doctor"]["ssh_mesh"]["coverage"], list(c.names))
            wall["mesh_floor"].append(mesh_floor(c, pairs))
        medians = {k: round(statistics.median(v), 3) for k, v in wall.items()}
        cpu_medians = {k: round(statistics.median(v), 3) for k, v in cpu.items()}
        stages = {}
        for stage, (with_it, without) in STAGES.items():
            if with_it not in runs_:
                continue
            wall_s = medians[with_it] - (medians[without] if without else 0.0)
            spent = cpu_medians[with_it] - (cpu_medians[without] if without else 0.0)
            stages[stage] = {
                "wall_s": round(wall_s, 2),
                "controller_cpu_s": round(spent, 2),
                "controller_cpu_ms_per_node": round(spent / n * 1e3, 1),
            }
        peak_of = {k: {f: max(p[f] for p in v) for f in v[0]} for k, v in peaks.items()}
        return {
            "nodes": n,
            "rounds": rounds,
            "median_s": medians,
            "doctor_vs_floor": round(medians["doctor"] / medians["floor"], 2),
            "probe_vs_floor": round(medians["probe"] / medians["floor"], 2),
            # The doctor's mesh (the whole run less the run without it) against the same logins
            # made by a shell loop: what the doctor adds to what the test bed's logins cost.
            "mesh_vs_mesh_floor": round(
                (medians["doctor"] - medians["reach"]) / medians["mesh_floor"], 2
            ),
            "controller_cpu_s": cpu_medians,
            "controller_peak": {
                k: {
                    "tree_rss_mib": v["tree_rss_mib"],
                    "tree_rss_kib_per_node": round(v["tree_rss_mib"] * 1024 / n),
                    "doctor_hwm_mib": v["doctor_hwm_mib"],
                    "processes": v["processes"],
                }
                for k, v in peak_of.items()
            },
            "stages": stages,
            "allreduce": allreduce,
            "launch_timeout_s": launch_timeout,
            # Over every run of this size: a healthy cluster must get none.
            "fail_findings": len(false_alarms),
            "fail_finding_examples": false_alarms[:5],
            "mesh_pairs": {
                k: reports["doctor"]["ssh_mesh"]["coverage"][k]
                for k in ("mode", "pairs_tested", "pairs_total")
            },
            "reach_pairs": {
                k: reports["doctor"]["reachability"]["coverage"][k]
                for k in ("mode", "pairs_tested", "pairs_total")
            },
            "load_average_at_end": [round(x, 1) for x in os.getloadavg()],
            "run_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        }


def main(argv: list[str]) -> None:
    kernel_window.from_now()
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--sizes", type=int, nargs="+", default=[16, 64, 128])
    parser.add_argument("--launch-timeout", type=float, default=240.0)
    parser.add_argument("--no-allreduce", action="store_true")
    args = parser.parse_args(argv[1:])
    compile_bytecode()
    for n in args.sizes:
        save(size(n, args.rounds, None if args.no_allreduce else args.launch_timeout))


def save(result: dict) -> None:
    """Merge one size into the results file, read afresh."""
    doc = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    kept = [r for r in doc.get("sizes", []) if r["nodes"] != result["nodes"]]
    results = sorted([*kept, result], key=lambda r: r["nodes"])
    first, last = results[0], results[-1]
    doc = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}",
        "sizes": results,
        "growth": {
            "from": first["nodes"],
            "to": last["nodes"],
            "doctor": round(last["median_s"]["doctor"] / first["median_s"]["doctor"], 2),
            "floor": round(last["median_s"]["floor"] / first["median_s"]["floor"], 2),
        },
        "target": "doctor <= 3x the floor at 64 nodes, 0 fail findings at every size",
    }
    RESULTS.write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main(sys.argv)
