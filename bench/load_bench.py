"""Verdicts under load: the same cluster, quiet and loaded on purpose, must get the same verdict.

For each test bed (the project's harness, tests/cluster/harness.py, and the independent one,
/work/shared/testbed/cluster.py), each size and each case (healthy; one node blackholed, the
middle one), ``doctor preflight --no-allreduce`` runs RUNS times in a row quiet, then RUNS times
while busy loops hold both cores (``loaded``). A verdict is the set of fail findings (code and
nodes): healthy must be none, blackholed must name that node alone, within 120 s; every run is
kept with its time and the load averages before and after it. "Quiet" is only as quiet as the
machine: other work shares it, and its load average is recorded beside every run.

With ``--split`` it also times, for each size, quiet and loaded, the preflight stage by stage
(probe alone, with reachability, whole) beside the floor of the same logins and connects done by
a shell: one ``ssh node true`` per node at once (the probe's logins), one login per node that
opens a TCP connection to each peer the doctor's reachability tested (bash's /dev/tcp, to port
22), and one login per node that runs ``ssh peer true`` to each peer its mesh tested, all at
once. On a test bed every node's logins are paid by this one machine's two cores.

Run as root from the repository root:
``python3 -m bench.load_bench [--beds harness testbed] [--sizes 16 40 64] [--runs 5] [--split]``;
results go to ``bench/load_bench.json`` (merged with what is there, per bed and size);
``python3 -m bench.load_bench --document`` prints them as the tables of docs/scale.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from bench import kernel_window
from bench.floor import by_source, fan_out, logins, ssh_floor
from bench.scale_bench import mesh_floor, tested_pairs
from tests.cluster.busy import busy_cores
from tests.cluster.harness import make_cluster

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "load_bench.json"
TESTBED = Path("/work/shared/testbed/cluster.py")
WITHIN = 120.0  # seconds the blackholed case must take at most


class Bed(Protocol):
    @property
    def names(self) -> list[str]: ...

    @property
    def ssh_config(self) -> Path: ...

    def hosts_arg(self) -> str: ...

    def blackhole(self, name: str) -> None: ...


class Testbed:
    """The independent test bed: its nodes are in this machine's ~/.ssh/config while it is up."""

    ssh_config = Path.home() / ".ssh" / "config"

    def __init__(self, n: int) -> None:
        self._cli("up", str(n))
        self.names = [f"node{i}" for i in range(1, n + 1)]

    def _cli(self, *args: str) -> str:
        argv = [sys.executable, str(TESTBED), *args]
        return subprocess.run(argv, check=True, capture_output=True, text=True).stdout

    def hosts_arg(self) -> str:
        return ",".join(self.names)

    def blackhole(self, name: str) -> None:
        self._cli("blackhole", name.removeprefix("node"))

    def close(self) -> None:
        self._cli("down")


@contextlib.contextmanager
def bed(kind: str, n: int) -> Iterator[Bed]:
    if kind == "testbed":
        testbed = Testbed(n)
        try:
            yield testbed
        finally:
            testbed.close()
        return
    with tempfile.TemporaryDirectory() as tmp, make_cluster(n, Path(tmp)) as cluster:
        yield cluster


def doctor(b: Bed, *extra: str) -> tuple[float, float, dict[str, Any]]:
    """Wall seconds, the doctor process's CPU seconds, and its report (this checkout's code)."""
    argv = [sys.executable, "-m", "doctor", "preflight", "-H", b.hosts_arg()]
    argv += ["--ssh-config", str(b.ssh_config), "--no-allreduce", "-f", "json"]
    argv += ["--python", sys.executable, *extra]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=900, cwd=ROOT)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, json.loads(proc.stdout)


def verdict(report: dict[str, Any]) -> list[str]:
    """The fail findings, as ``code nodes``: what a user acts on."""
    return sorted(
        f"{f['code']} {','.join(sorted(f['nodes']))}"
        for f in report["findings"]
        if f["severity"] == "fail"
    )


def named(report: dict[str, Any]) -> list[str]:
    return sorted({n for f in report["findings"] if f["severity"] == "fail" for n in f["nodes"]})


def runs(b: Bed, runs_: int, loaded: bool) -> list[dict[str, Any]]:
    out = []
    with busy_cores(loaded):
        for _ in range(runs_):
            before = os.getloadavg()
            wall, cpu, report = doctor(b)
            out.append(
                {
                    "seconds": round(wall, 1),
                    "controller_cpu_s": round(cpu, 2),
                    "verdict": verdict(report),
                    "named": named(report),
                    "warnings": sorted(
                        {f["code"] for f in report["findings"] if f["severity"] == "warn"}
                    ),
                    "load_before": [round(x, 1) for x in before],
                    "load_after": [round(x, 1) for x in os.getloadavg()],
                }
            )
            print(json.dumps(out[-1]), file=sys.stderr, flush=True)
    return out


def reach_floor(b: Bed, pairs: list[tuple[str, str]]) -> float:
    """One login per node that opens a TCP connection to each of its tested peers at once."""
    each = 'bash -c "exec 3<>/dev/tcp/$t/22"'
    commands = {source: fan_out(each, t) for source, t in by_source(pairs).items()}
    return logins(b.ssh_config, commands, "reach floor", 600)


def split(b: Bed, loaded: bool) -> dict[str, Any]:
    """The preflight stage by stage beside the shell's floor of the same logins and connects."""
    with busy_cores(loaded):
        load = [round(x, 1) for x in os.getloadavg()]
        probe, probe_cpu, _ = doctor(b, "--mesh", "off", "--reach", "off")
        with_reach, _, report = doctor(b, "--mesh", "off")
        whole, whole_cpu, full = doctor(b)
        reach_pairs = tested_pairs(report["reachability"]["coverage"], list(b.names))
        mesh_pairs = tested_pairs(full["ssh_mesh"]["coverage"], list(b.names))
        floors = {
            "probe": ssh_floor(b),  # type: ignore[arg-type]
            "reach": reach_floor(b, reach_pairs),
            "mesh": mesh_floor(b, mesh_pairs),  # type: ignore[arg-type]
        }
    stages = {"probe": probe, "reach": with_reach - probe, "mesh": whole - with_reach}
    return {
        "loaded": loaded,
        "load_before": load,
        "stages_s": {k: round(v, 1) for k, v in stages.items()},
        "floors_s": {k: round(v, 1) for k, v in floors.items()},
        "whole_s": round(whole, 1),
        "floor_sum_s": round(sum(floors.values()), 1),
        "overhead_s": round(whole - sum(floors.values()), 1),
        "controller_cpu_s": {"probe": round(probe_cpu, 2), "whole": round(whole_cpu, 2)},
        "pairs": {"reach": len(reach_pairs), "mesh": len(mesh_pairs)},
        "fail_findings": len(verdict(full)),
    }


def size(kind: str, n: int, runs_: int, with_split: bool) -> dict[str, Any]:
    middle = f"node{n // 2 + 1}"
    result: dict[str, Any] = {"bed": kind, "nodes": n, "runs": runs_, "cases": {}}
    with bed(kind, n) as b:
        if with_split:
            result["split"] = [split(b, loaded) for loaded in (False, True)]
        for case in ("healthy", "blackholed") if runs_ else ():  # --runs 0: the split only
            if case == "blackholed":
                b.blackhole(middle)
            expected = [] if case == "healthy" else [middle]
            quiet, loaded = runs(b, runs_, False), runs(b, runs_, True)
            every = quiet + loaded
            result["cases"][case] = {
                "expected_named": expected,
                "quiet": quiet,
                "loaded": loaded,
                # The verdict held: the same in every run, naming exactly the broken node (if
                # any), and a blackholed cluster's run within WITHIN seconds.
                "same_verdict": len({tuple(r["verdict"]) for r in every}) == 1,
                "right_nodes": all(r["named"] == expected for r in every),
                "within_s": case == "healthy" or all(r["seconds"] <= WITHIN for r in every),
            }
    return result


def _verdict_text(runs_: list[dict[str, Any]]) -> str:
    verdicts = {"; ".join(r["verdict"]) or "clean" for r in runs_}
    return " / ".join(sorted(verdicts)) + f" ({len(runs_)}×)"


def _seconds(runs_: list[dict[str, Any]]) -> str:
    times = [r["seconds"] for r in runs_]
    return f"{min(times):.0f}–{max(times):.0f}"


def _load(runs_: list[dict[str, Any]]) -> str:
    ones = [r["load_before"][0] for r in runs_] + [r["load_after"][0] for r in runs_]
    return f"{min(ones):.0f}–{max(ones):.0f}"


def verdict_table(doc: dict[str, Any]) -> list[str]:
    """The verdicts quiet and loaded, per bed, size and case (markdown), from the results."""
    out = [
        "| test bed | nodes | case | quiet: verdict | quiet: s | quiet: load avg | "
        "loaded: verdict | loaded: s | loaded: load avg | same verdict, right node "
        f"| every run within {WITHIN:.0f} s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in doc["results"]:
        for case, c in r["cases"].items():
            held = c["same_verdict"] and c["right_nodes"]
            within = "-" if case == "healthy" else ("yes" if c["within_s"] else "NO")
            out.append(
                f"| {r['bed']} | {r['nodes']} | {case} | {_verdict_text(c['quiet'])} "
                f"| {_seconds(c['quiet'])} | {_load(c['quiet'])} "
                f"| {_verdict_text(c['loaded'])} | {_seconds(c['loaded'])} "
                f"| {_load(c['loaded'])} | {'yes' if held else 'NO'} | {within} |"
            )
    return out


def split_table(doc: dict[str, Any]) -> list[str]:
    """Per bed and size with a split: each stage beside the shell's floor of its logins."""
    out = [
        "| test bed | nodes | machine | probe (floor) | reachability (floor) | mesh (floor) "
        "| whole preflight | sum of floors | the doctor's own overhead |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in doc["results"]:
        for x in r.get("split", []):
            st, fl = x["stages_s"], x["floors_s"]
            state = f"loaded (load avg {x['load_before'][0]:.0f})"
            if not x["loaded"]:
                state = f"quiet (load avg {x['load_before'][0]:.0f})"
            out.append(
                f"| {r['bed']} | {r['nodes']} | {state} "
                + " ".join(f"| {st[k]:.1f} s ({fl[k]:.1f} s)" for k in ("probe", "reach", "mesh"))
                + f" | {x['whole_s']:.1f} s | {x['floor_sum_s']:.1f} s | {x['overhead_s']:+.1f} s |"
            )
    return out


def main(argv: list[str]) -> None:
    kernel_window.from_now()
    if argv[1:] == ["--document"]:
        doc = json.loads(RESULTS.read_text())
        print("\n".join([*verdict_table(doc), "", *split_table(doc)]))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--beds", nargs="+", default=["harness", "testbed"])
    parser.add_argument("--sizes", nargs="+", type=int, default=[16, 40, 64])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--split", action="store_true")
    args = parser.parse_args(argv[1:])
    for kind in args.beds:
        for n in args.sizes:
            result = size(kind, n, args.runs, args.split)
            result["run_at"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
            save(result)
            print(f"{kind} {n}: written to {RESULTS.relative_to(ROOT)}", file=sys.stderr)


def save(result: dict[str, Any]) -> None:
    """Merge one bed and size into the results file, read afresh (another bench may have
    written it meanwhile); what this run did not measure again is kept from before."""
    doc = json.loads(RESULTS.read_text()) if RESULTS.exists() else {"results": []}
    key = (result["bed"], result["nodes"])
    for old in (r for r in doc["results"] if (r["bed"], r["nodes"]) == key):
        result.setdefault("split", old.get("split", []))
        if not result["cases"]:
            result["cases"], result["runs"] = old["cases"], old["runs"]
    kept = [r for r in doc["results"] if (r["bed"], r["nodes"]) != key]
    doc["results"] = sorted([*kept, result], key=lambda r: (r["bed"], r["nodes"]))
    doc["machine"] = (
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    RESULTS.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv)
