"""Every shape of hang on both test beds, quiet and loaded: which rank and node the doctor named,
and what was left running after.

The beds: the project's harness (tests/cluster/harness.py) and the independent one of
../shared/testbed/cluster.py (its own namespaces, sshd and addresses; reached through the
controller's ~/.ssh/config, as its ``up`` writes it). On each, 3 nodes and 2 ranks a node:

- ``doctor stacks`` on plain torchrun over ssh: a sleeping rank (3), a DataLoader worker blocked
  on a FIFO (rank 5), a broadcast against the others' allreduce (rank 2), a rank killed before
  it joined (4, and node3's torchrun ends 5);
- ``doctor run --hang-after 8 --on-hang stop``: a sleeping rank (3), a slow job that progresses
  (never hung), node3 cut off mid-training (blackholed), node3's links to the others cut while
  the controller still reaches it (every rank in one collective: the links name node3);

loaded: a busy loop on every core for the whole run (tests/cluster/busy.py). Each run's finding
codes, nodes and ranks, what was expected, and the processes left after, to
``bench/hang_shapes.json``. Run as root: ``python3 -m bench.hang_shapes [SHARED_CLUSTER_PY]
[SHAPE ...]``; with shapes named, only those run, and their results join the saved ones.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import kernel_window
from tests.cluster.busy import busy_cores
from tests.cluster.harness import make_cluster
from tests.cluster.netns import sh

HERE = Path(__file__).parent
PY = sys.executable
JOB = str(HERE.parent / "tests" / "hang" / "job.py")
MARKS = ("hang/job.py", "torch.distributed.run", "doctor-job", "doctor-stacks")
SHARED = Path(__file__).resolve().parents[2] / "shared" / "testbed" / "cluster.py"
TORCHRUN = [
    PY, "-m", "torch.distributed.run", "--nnodes", "{nnodes}", "--nproc-per-node", "2",
    "--node-rank", "{node_rank}", "--master-addr", "{master_addr}",
    "--master-port", "{master_port}", JOB,
]  # fmt: skip
OUTSIDE, SLOW = "hang.outside_collective", ["--mode", "slow", "--step-seconds"]
# shape -> (how it runs, job arguments, the finding expected: code, nodes, ranks)
SHAPES: dict[str, tuple[str, list[str], tuple[str, list[str], list[int] | None]]] = {
    "sleep": ("stacks", ["--mode", "sleep", "--rank", "3"], (OUTSIDE, ["node2"], [3])),
    "fifo": ("stacks", ["--mode", "fifo", "--rank", "5"], (OUTSIDE, ["node3"], [5])),
    "op": ("stacks", ["--mode", "op", "--rank", "2"], ("hang.mismatch", ["node2"], None)),
    "vanish": (
        "stacks",
        ["--mode", "vanish", "--rank", "4"],
        ("hang.rank_gone", ["node3"], [4, 5]),
    ),
    "run-sleep": ("run", ["--mode", "sleep", "--rank", "3"], (OUTSIDE, ["node2"], [3])),
    "run-slow": ("run", [*SLOW, "2", "--seconds", "30"], ("", [], None)),
    "run-cut": ("run", [*SLOW, "0.3", "--seconds", "200"], ("hang.node_silent", ["node3"], None)),
    "run-links": ("run", [*SLOW, "0.3", "--seconds", "200"], ("hang.symmetric", ["node3"], None)),
}


@dataclass
class Bed:
    name: str
    names: list[str]
    doctor: list[str]  # the node options the doctor needs there
    ssh: list[str]  # ssh and its options, before the node
    namespaces: dict[str, str]
    blackhole: Any
    unblackhole: Any
    cut_between: Any  # (src, dst): dst drops what src sends it; the controller still reaches both

    def running(self) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for node, ns in self.namespaces.items():
            for pid in sh("ip", "netns", "pids", ns, check=False).stdout.split():
                with contextlib.suppress(OSError):
                    stat = Path(f"/proc/{pid}/stat").read_text()
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                    if stat.rsplit(")", 1)[1].split()[0] != "Z" and any(m in cmd for m in MARKS):
                        found.setdefault(node, []).append(f"{pid} {cmd[:100]}")
        return found

    def kill_job(self) -> None:
        for lines in self.running().values():
            for line in lines:
                if "hang/job.py" in line or "torch.distributed.run" in line:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        sh("kill", "-9", line.split()[0], check=False)


@contextlib.contextmanager
def harness_bed(folder: Path) -> Iterator[Bed]:
    with make_cluster(3, folder) as c:
        yield Bed(
            "harness",
            c.names,
            ["-H", c.hosts_arg(), "--ssh-config", str(c.ssh_config)],
            ["ssh", "-F", str(c.ssh_config), "-o", "BatchMode=yes"],
            {n.name: n.ns.name for n in c.nodes},
            c.blackhole,
            c.unblackhole,
            c.blackhole_between,
        )


@contextlib.contextmanager
def shared_bed(tool: Path) -> Iterator[Bed]:
    subprocess.run([sys.executable, str(tool), "up", "3"], check=True, capture_output=True)
    halves = ("198.18.0.0/25", "198.18.0.128/25")

    def unblackhole(node: str) -> None:
        for half in halves:
            sh("ip", "-n", f"ivcn{node[-1]}", "route", "del", "blackhole", half, check=False)

    try:
        yield Bed(
            "shared",
            ["node1", "node2", "node3"],
            ["-H", "node1,node2,node3"],
            ["ssh", "-o", "BatchMode=yes"],
            {f"node{i}": f"ivcn{i}" for i in (1, 2, 3)},
            lambda node: subprocess.run([PY, str(tool), "blackhole", node[-1]], check=True),
            unblackhole,
            lambda src, dst: sh(
                "ip", "-n", f"ivcn{dst[-1]}", "route", "add", "blackhole", f"198.18.0.{src[-1]}/32"
            ),
        )
    finally:
        subprocess.run([sys.executable, str(tool), "down"], check=False, capture_output=True)


def plain_torchrun(bed: Bed, folder: Path, args: list[str]) -> list[subprocess.Popen[bytes]]:
    procs = []
    for rank, node in enumerate(bed.names):
        values = {"{nnodes}": "3", "{node_rank}": str(rank), "{master_addr}": "node1"}
        values["{master_port}"] = "29671"
        argv = [values.get(w, w) for w in TORCHRUN] + args
        log = (folder / f"{node}.log").open("wb")
        procs.append(
            subprocess.Popen([*bed.ssh, node, "timeout", "300", *argv], stdout=log, stderr=log)
        )
    return procs


def wait_for(folder: Path, text: bytes, count: int, seconds: float = 240) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if b"".join(p.read_bytes() for p in folder.glob("node*.log")).count(text) >= count:
            return
        time.sleep(0.5)


def findings(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"code": f["code"], "nodes": f["nodes"], "ranks": f["data"].get("ranks")}
        for f in doc["findings"]
        if f["check"] == "hang"
    ]


def one(bed: Bed, shape: str, folder: Path) -> dict[str, Any]:
    how, args, expected = SHAPES[shape]
    began = time.monotonic()
    if how == "stacks":
        if shape == "fifo":
            fifo = folder / "fifo"
            os.mkfifo(fifo)
            args = [*args, "--fifo", str(fifo)]
        procs = plain_torchrun(bed, folder, args)
        if shape == "vanish":
            time.sleep(20)
        else:
            wait_for(folder, b"steps done", 5 if shape == "fifo" else 6)
            time.sleep(2)
        out = subprocess.run(
            [PY, "-m", "doctor", "stacks", *bed.doctor, "--python", PY, "-f", "json"],
            capture_output=True, text=True, timeout=180,
        )  # fmt: skip
        got = findings(json.loads(out.stdout))
        bed.kill_job()
        for p in procs:
            p.wait(60)
    else:
        argv = [PY, "-m", "doctor", "run", *bed.doctor, "--python", PY, "--profile", "quick"]
        argv += ["--mesh", "off", "--logs", str(folder), "--hang-after", "8", "--on-hang", "stop"]
        proc = subprocess.Popen(
            [*argv, "--grace", "3", "--", *TORCHRUN, *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        if shape in ("run-cut", "run-links"):
            wait_for(folder, b"steps done", 6)
            time.sleep(3)
            if shape == "run-cut":
                bed.blackhole("node3")
            else:
                bed.cut_between("node1", "node3")
                bed.cut_between("node2", "node3")
        proc.communicate(timeout=400)
        if shape == "run-cut":
            bed.unblackhole("node3")
        saved = folder / "hang-1.json"
        got = findings(json.loads(saved.read_text())) if saved.exists() else []
    end = time.monotonic() + 60
    while (left := bed.running()) and time.monotonic() < end:
        time.sleep(1)
    code, nodes, ranks = expected
    want = [{"code": code, "nodes": nodes, "ranks": ranks}] if code else []
    named_right = [(g["code"], g["nodes"]) for g in got] == [(w["code"], w["nodes"]) for w in want]
    if ranks is not None:
        named_right = named_right and [g["ranks"] for g in got] == [ranks]
    return {
        "bed": bed.name,
        "shape": shape,
        "named": got,
        "expected": want,
        "right": named_right,
        "left_running": left,
        "seconds": round(time.monotonic() - began, 1),
    }


def main(shared: Path, shapes: list[str]) -> None:
    kernel_window.from_now()
    results = []
    for load in (False, True):
        for make in (lambda d: harness_bed(d / "bed"), lambda d: shared_bed(shared)):
            with tempfile.TemporaryDirectory() as tmp, make(Path(tmp)) as bed, busy_cores(load):
                for shape in shapes:
                    folder = Path(tmp) / shape
                    folder.mkdir()
                    result = one(bed, shape, folder) | {"load": "loaded" if load else "quiet"}
                    print(json.dumps(result), flush=True)
                    results.append(result)
    saved = HERE / "hang_shapes.json"
    if shapes != list(SHAPES) and saved.exists():
        kept = [r for r in json.loads(saved.read_text())["runs"] if r["shape"] not in shapes]
        results = kept + results
    doc = {
        "runs": results,
        "right": sum(r["right"] for r in results),
        "of": len(results),
        "left_running": sum(bool(r["left_running"]) for r in results),
    }
    (HERE / "hang_shapes.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps({k: v for k, v in doc.items() if k != "runs"}))


if __name__ == "__main__":
    named = [a for a in sys.argv[1:] if a in SHAPES]
    paths = [Path(a) for a in sys.argv[1:] if a not in SHAPES]
    main(paths[0] if paths else SHARED, named or list(SHAPES))
