"""Scale on the netns harness: healthy 16, 64 and 128 nodes, the whole preflight against the floor.

For each size, in alternating rounds on one cluster of real sshd nodes:

- floor: ``ssh -o BatchMode=yes host true`` to every node at once (one login per node);
- probe: ``doctor preflight --no-allreduce --mesh off --reach off`` (facts and checks);
- reach: the same with TCP reachability on;
- doctor: the whole ``doctor preflight --no-allreduce`` (probe, reachability, the SSH mesh);
- mesh floor: the pairs the doctor's mesh tested, as a shell loop would test them: one login per
  node, from which ``ssh -o BatchMode=yes peer true`` to each of its peers at once (the doctor's
  mesh costs ``doctor - reach``; this is what those same logins cost on this test bed).

Every report should have no fail finding: each one is counted (a false alarm), with examples.
Beside the wall times it keeps what the controller itself spent (the doctor process's CPU) apart
from what the test bed spent: every node's sshd, agents and ssh clients run on the same 2 cores,
so here each login any node makes is paid by one machine, where on a real cluster each node pays
for its own. Results go to ``bench/scale_bench.json``.

Run as root from the repository root: ``python3 -m bench.scale_bench [ROUNDS] [SIZES...]``.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.floor import by_source, fan_out, logins, ssh_floor
from bench.installed import compile_bytecode
from tests.cluster.harness import Cluster, make_cluster

HERE = Path(__file__).parent
DOCTOR = str(Path(sys.executable).parent / "doctor")


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


def doctor(c: Cluster, *extra: str) -> tuple[float, float, dict]:
    """Wall seconds, the doctor process's own CPU seconds, and its report."""
    argv = [DOCTOR, "preflight", "-H", c.hosts_arg(), "--ssh-config", str(c.ssh_config)]
    argv += ["--no-allreduce", "-f", "json", "--python", sys.executable, *extra]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, json.loads(proc.stdout)


def fails(report: dict) -> list[str]:
    """The fail findings of a report of a healthy cluster: each one a false alarm."""
    return [f["summary"] for f in report["findings"] if f["severity"] == "fail"]


def size(n: int, rounds: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp, make_cluster(n, Path(tmp)) as c:
        keys = ("floor", "probe", "reach", "doctor", "mesh_floor")
        runs: dict[str, list[float]] = {k: [] for k in keys}
        cpu: list[float] = []
        false_alarms: list[str] = []
        for _ in range(rounds):
            runs["floor"].append(ssh_floor(c))
            for key, extra in (
                ("probe", ("--mesh", "off", "--reach", "off")),
                ("reach", ("--mesh", "off")),
            ):
                wall, _, report = doctor(c, *extra)
                runs[key].append(wall)
                false_alarms += fails(report)
            wall, spent, report = doctor(c)
            runs["doctor"].append(wall)
            cpu.append(spent)
            false_alarms += fails(report)
            pairs = tested_pairs(report["ssh_mesh"]["coverage"], list(c.names))
            runs["mesh_floor"].append(mesh_floor(c, pairs))
        medians = {k: round(statistics.median(v), 3) for k, v in runs.items()}
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
            "controller_cpu_s": round(statistics.median(cpu), 3),
            # Over every run of this size: a healthy cluster must get none.
            "fail_findings": len(false_alarms),
            "fail_finding_examples": false_alarms[:5],
            "mesh_pairs": {
                k: report["ssh_mesh"]["coverage"][k]
                for k in ("mode", "pairs_tested", "pairs_total")
            },
            "reach_pairs": {
                k: report["reachability"]["coverage"][k]
                for k in ("mode", "pairs_tested", "pairs_total")
            },
        }


def main(argv: list[str]) -> None:
    rounds = int(argv[1]) if len(argv) > 1 else 3
    sizes = [int(a) for a in argv[2:]] or [16, 64, 128]
    compile_bytecode()
    results = [size(n, rounds) for n in sizes]
    first, last = results[0], results[-1]
    doc = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}",
        "load_average_at_end": os.getloadavg(),
        "sizes": results,
        "growth": {
            "from": first["nodes"],
            "to": last["nodes"],
            "doctor": round(last["median_s"]["doctor"] / first["median_s"]["doctor"], 2),
            "floor": round(last["median_s"]["floor"] / first["median_s"]["floor"], 2),
        },
        "target": "doctor <= 3x the floor at 64 nodes, 0 fail findings at every size",
    }
    (HERE / "scale_bench.json").write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps(doc, indent=2))


if __name__ == "__main__":
    main(sys.argv)
