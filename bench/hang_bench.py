"""A hung job's stacks: `doctor stacks` against the by-hand peer, and `doctor run`'s verdict time.

On an N-node namespace cluster with real sshd (2 ranks a node, plain torchrun over ssh, rank 3
asleep while the others wait in an allreduce: tests/hang/job.py --mode sleep), each round runs,
in rotating order:

- by hand: ``ssh NODE py-spy dump --pid P`` for every rank at once (the recipe of
  ml-engineering's "torch-distributed-hanging-solutions": py-spy on every rank through pdsh),
  the pids known beforehand, as the user who ran ``pgrep`` already would;
- doctor: ``doctor stacks -H ... --python PY``: finds the ranks on every node, takes every
  stack, judges; py-spy found beside the nodes' Python, as the peer's is;
- doctor, shipped: the same with ``--python /usr/bin/python3`` (the system Python, no py-spy
  beside it or on the nodes' PATH): the controller's py-spy is shipped to every node.

Then, once per size, ``doctor run --hang-after 5`` of the same job: the seconds from the watch
firing ("no output for 5s: looking ...") to the printed verdict, as the doctor itself reports.

Before the rounds: py-spy against pystack on one hung rank of this machine (the choice of stack
tool), 5 runs each. Medians to ``bench/hang_bench.json``.
Run as root from the repository root: ``python3 -m bench.hang_bench [NODES ...]`` (3 16).
"""

from __future__ import annotations

import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.cluster.harness import Cluster, make_cluster
from tests.cluster.jobs import end_job, running

HERE = Path(__file__).parent
PY = sys.executable
JOB = str(HERE.parent / "tests" / "hang" / "job.py")
PYSPY = str(Path(PY).parent / "py-spy")
MARKS = ("hang/job.py", "torch.distributed.run")
ROUNDS = 5


def torchrun(nnodes: int, rank: int, port: int, *args: str) -> list[str]:
    return [
        PY, "-m", "torch.distributed.run", "--nnodes", str(nnodes), "--nproc-per-node", "2",
        "--node-rank", str(rank), "--master-addr", "node1", "--master-port", str(port), JOB,
        *args,
    ]  # fmt: skip


def launch(c: Cluster, folder: Path) -> list[subprocess.Popen[bytes]]:
    procs = []
    for rank, node in enumerate(c.names):
        argv = torchrun(len(c.names), rank, 29641, "--mode", "sleep", "--rank", "3")
        log = (folder / f"{node}.log").open("wb")
        procs.append(
            subprocess.Popen([*ssh(c, node), "timeout", "900", *argv], stdout=log, stderr=log)
        )
    want = 2 * len(c.names)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        text = b"".join(p.read_bytes() for p in folder.glob("node*.log"))
        if text.count(b"steps done") >= want:
            time.sleep(2)
            return procs
        time.sleep(1)
    raise SystemExit(f"the job did not reach its hang on {len(c.names)} nodes")


def ranks(c: Cluster) -> dict[str, list[int]]:
    """Each node's rank processes (the workers, not torchrun's agent)."""
    found = running(c, ("hang/job.py",))
    return {n: [p for p, cmd in pids.items() if "-u" in cmd.split()] for n, pids in found.items()}


def ssh(c: Cluster, node: str) -> list[str]:
    return ["ssh", "-F", str(c.ssh_config), "-o", "BatchMode=yes", node]


def by_hand(c: Cluster, pids: dict[str, list[int]]) -> float:
    started = time.perf_counter()
    procs = [
        subprocess.Popen(
            [*ssh(c, node), PYSPY, "dump", "--pid", str(pid)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for node, found in pids.items()
        for pid in found
    ]
    if any(p.wait(120) != 0 for p in procs):
        raise SystemExit("by hand: a py-spy dump failed")
    return time.perf_counter() - started


def doctor_stacks(c: Cluster, python: str) -> float:
    argv = [PY, "-m", "doctor", "stacks", "-H", c.hosts_arg(), "--ssh-config", str(c.ssh_config)]
    started = time.perf_counter()
    argv += ["--python", python, "-f", "json"]
    out = subprocess.run(argv, capture_output=True, timeout=300)
    took = time.perf_counter() - started
    found = [f for f in json.loads(out.stdout)["findings"] if f["check"] == "hang"]
    if [(f["code"], f["data"].get("ranks")) for f in found] != [("hang.outside_collective", [3])]:
        raise SystemExit(f"doctor stacks judged wrong: {found}")
    return took


def verdict_after_firing(c: Cluster, folder: Path) -> dict[str, float]:
    """doctor run --hang-after 5 on the same job: firing to printed verdict, by its own clock."""
    argv = [PY, "-m", "doctor", "run", "-H", c.hosts_arg(), "--ssh-config", str(c.ssh_config)]
    argv += ["--python", PY, "--profile", "quick", "--mesh", "off", "--no-allreduce"]
    argv += ["--logs", str(folder / "run"), "--hang-after", "5", "--on-hang", "stop", "--"]
    job = [
        PY, "-m", "torch.distributed.run", "--nnodes", "{nnodes}", "--nproc-per-node", "2",
        "--node-rank", "{node_rank}", "--master-addr", "{master_addr}", "--master-port",
        "{master_port}", JOB, "--mode", "sleep", "--rank", "3",
    ]  # fmt: skip
    out = subprocess.run([*argv, *job], capture_output=True, text=True, timeout=900)
    said = re.search(r"verdict ([0-9.]+)s after the look began", out.stderr)
    if out.returncode != 124 or said is None:
        raise SystemExit(f"doctor run did not end the hung job: {out.stderr[-2000:]}")
    return {"firing_to_verdict_s": float(said.group(1))}


def tool_choice(folder: Path) -> dict[str, object]:
    """py-spy and pystack on one hung rank here (pystack from PyPI, in a folder of its own)."""
    site = folder / "pystack"
    subprocess.run([PY, "-m", "pip", "install", "-q", "--target", str(site), "pystack"], check=True)
    job = subprocess.Popen(
        [PY, "-m", "torch.distributed.run", "--nproc-per-node", "2", JOB, "--mode", "sleep"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        time.sleep(20)
        found = subprocess.run(["pgrep", "-f", "hang/job.py --mode sleep"], capture_output=True)
        pid = max(int(p) for p in found.stdout.split())  # a worker: started after torchrun
        env = dict(os.environ, PYTHONPATH=str(site))
        runs: dict[str, list[float]] = {"py-spy": [], "pystack": []}
        for _ in range(ROUNDS):
            for name, argv in (
                ("py-spy", [PYSPY, "dump", "--pid", str(pid)]),
                ("pystack", [PY, "-m", "pystack", "remote", str(pid)]),
            ):
                started = time.perf_counter()
                subprocess.run(argv, capture_output=True, check=True, env=env, timeout=60)
                runs[name].append(time.perf_counter() - started)
        size = sum(f.stat().st_size for f in site.rglob("*") if f.is_file())
        return {
            "median_s": {k: round(statistics.median(v), 3) for k, v in runs.items()},
            "installed_bytes": {"py-spy": Path(PYSPY).stat().st_size, "pystack": size},
            "needs_on_node": {
                "py-spy": "one static binary",
                "pystack": "a Python package with compiled libraries, for the node's Python",
            },
        }
    finally:
        os.killpg(job.pid, 9)
        job.wait()


def one_size(n: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp, make_cluster(n, Path(tmp) / "bed") as c:
        folder = Path(tmp)
        procs = launch(c, folder)
        try:
            pids = ranks(c)
            runs: dict[str, list[float]] = {"by_hand": [], "doctor": [], "doctor_shipped": []}
            steps = [
                ("by_hand", lambda: by_hand(c, pids)),
                ("doctor", lambda: doctor_stacks(c, PY)),
                ("doctor_shipped", lambda: doctor_stacks(c, "/usr/bin/python3")),
            ]
            for i in range(ROUNDS):
                for name, step in steps[i % 3 :] + steps[: i % 3]:
                    runs[name].append(step())
        finally:
            end_job(c, MARKS)
            for p in procs:
                p.wait(60)
        medians = {k: round(statistics.median(v), 3) for k, v in runs.items()}
        hang = verdict_after_firing(c, folder)
        end_job(c, MARKS)
        return {
            "nodes": n,
            "ranks": 2 * n,
            "median_s": medians,
            "doctor_over_by_hand": round(medians["doctor"] / medians["by_hand"], 2),
            "shipped_over_by_hand": round(medians["doctor_shipped"] / medians["by_hand"], 2),
            "runs_s": {k: [round(x, 3) for x in v] for k, v in runs.items()},
            **hang,
        }


def main(sizes: list[int]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tools = tool_choice(Path(tmp))
    results = [one_size(n) for n in sizes]
    doc = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, shared by every node",
        "rounds": ROUNDS,
        "job": "torchrun, 2 ranks a node, Gloo; rank 3 asleep, the others in an allreduce",
        "stack_tool": tools,
        "sizes": results,
    }
    (HERE / "hang_bench.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [3, 16])
