"""Start-up per command, and `doctor collect` on 3 nodes against the parallel `ssh true` floor.

Each round runs, back to back and in rotating order, on this node:

- python: ``python3 -c pass`` (the interpreter's own start, the floor of any Python command);
- ``doctor --version``, ``doctor checks list``, ``doctor explain`` of a 20-line log,
  ``doctor preflight --local --no-allreduce`` and ``doctor collect --local``;

and on a 3-node namespace cluster with real sshd:

- floor: ``ssh -o BatchMode=yes host true`` to the 3 nodes at once;
- the same over warm OpenSSH masters (``ControlMaster``/``ControlPersist``, started before the
  rounds and stopped after): what connection multiplexing saves a second run, at the price of an
  ssh process per node left running between runs, which the doctor never leaves;
- the probe over OpenSSH: the same logins, each running the doctor's probe (its source on stdin,
  as the doctor ships it): what the doctor's own work on the nodes costs a shell;
- the doctor's reach: a Python process that does what ``doctor collect`` does to reach the nodes
  (the inventory from the same ssh_config, one paramiko connection per node, its wrapper) and
  runs ``true`` on each: the transport alone, like for like with the floor;
- collect: ``doctor collect -H node1,node2,node3 --save-raw DIR`` (one login and one probe per
  node, the captures written).

Medians (and each command's ratio to its floor) go to ``bench/startup_bench.json``.
Run as root from the repository root: ``python3 -m bench.startup_bench [ROUNDS]``.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from bench import kernel_window
from bench.floor import logins, ssh_floor
from bench.installed import compile_bytecode
from doctor.judge.registry import load_checks
from doctor.pipeline.request import Request
from doctor.pipeline.steps import probe_spec
from doctor.stages.collect import LOADER, probe_source
from tests.cluster.harness import Cluster, make_cluster

HERE = Path(__file__).parent
# The doctor's transport running `true` on every node at once, nothing else. The inventory comes
# first, as in the doctor: it imports paramiko without invoke, which ssh_config does not need.
REACH = """
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from doctor.nodes.inventory import build_inventory
nodes = build_inventory(hosts=sys.argv[1], ssh_config=Path(sys.argv[2]))
from doctor.nodes.transport.ssh import SshTransport
with SshTransport() as ssh, ThreadPoolExecutor(len(nodes)) as pool:
    results = list(pool.map(lambda node: ssh.execute(node, ["true"], b"", 60), nodes))
sys.exit(0 if all(getattr(r, "rc", 1) == 0 for r in results) else 1)
"""
DOCTOR = str(Path(sys.executable).parent / "doctor")
LOG = HERE.parent / "tests" / "fixtures" / "logs" / "real" / "nccl-wrong-magic.log"


def timed(argv: list[str], ok: tuple[int, ...] = (0, 1)) -> float:
    started = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, check=False, timeout=300)
    took = time.perf_counter() - started
    if proc.returncode not in ok:  # 1: the run completed and found something
        raise SystemExit(f"{argv[:4]} failed ({proc.returncode}): {proc.stderr.decode()[-500:]}")
    return took


def local_commands(log: Path, out: Path) -> dict[str, list[str]]:
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "doctor --version": [DOCTOR, "--version"],
        "doctor checks list": [DOCTOR, "checks", "list"],
        "doctor explain (20 lines)": [DOCTOR, "explain", str(log)],
        "doctor collect --local": [DOCTOR, "collect", "--local", "--save-raw", str(out / "local")],
        "doctor preflight --local": [DOCTOR, "preflight", "--local", "--no-allreduce"],
    }


def multiplexed(c: Cluster, out: Path) -> Path:
    """An ssh_config that sends every login through one persistent master per node."""
    config = out / "ssh_config.mux"
    config.write_text(
        f"Host *\n  ControlMaster auto\n  ControlPath {out}/mux-%C\n  ControlPersist 600\n"
        f"Include {c.ssh_config}\n"
    )
    return config


def stop_masters(config: Path, names: list[str]) -> None:
    for name in names:
        subprocess.run(["ssh", "-F", str(config), "-O", "exit", name], capture_output=True)


def cluster_commands(c: Cluster, out: Path, mux: Path) -> dict[str, Callable[[], float]]:
    collect = [DOCTOR, "collect", "-H", c.hosts_arg(), "--ssh-config", str(c.ssh_config)]
    collect += ["--python", sys.executable, "--save-raw", str(out / "cluster")]
    # The spec the doctor sends: every check's files and commands, every node's name resolved.
    spec = probe_spec(Request("collect", checks=tuple(load_checks())), list(c.names))
    probe = shlex.join([sys.executable, "-c", LOADER, json.dumps(spec)])
    return {
        "ssh true, 3 nodes": lambda: ssh_floor(c),
        "ssh true over warm masters, 3 nodes": lambda: logins(
            mux, dict.fromkeys(c.names, "true"), "multiplexed floor", 120
        ),
        "doctor's transport, true on 3 nodes": partial(
            timed, [sys.executable, "-c", REACH, c.hosts_arg(), str(c.ssh_config)], (0,)
        ),
        "ssh + probe, 3 nodes": lambda: logins(
            c.ssh_config, dict.fromkeys(c.names, probe), "probe floor", 120, probe_source()
        ),
        "doctor collect, 3 nodes": lambda: timed(collect, (0,)),
    }


def main(argv: list[str]) -> None:
    kernel_window.from_now()
    rounds = int(argv[1]) if len(argv) > 1 else 7
    compile_bytecode()
    with tempfile.TemporaryDirectory() as tmp, make_cluster(3, Path(tmp)) as c:
        out = Path(tmp)
        log = out / "short.log"
        lines = LOG.read_text().splitlines()[:20]
        log.write_text("\n".join(lines) + "\n")
        runs: dict[str, Callable[[], float]] = {
            name: partial(timed, argv) for name, argv in local_commands(log, out).items()
        }
        mux = multiplexed(c, out)
        runs |= cluster_commands(c, out, mux)
        times: dict[str, list[float]] = {name: [] for name in runs}
        names = list(runs)
        try:
            runs["ssh true over warm masters, 3 nodes"]()  # starts the masters
            for r in range(rounds):
                for name in names[r % len(names) :] + names[: r % len(names)]:
                    times[name].append(runs[name]())
        finally:
            stop_masters(mux, list(c.names))
    med = {name: round(statistics.median(t), 3) for name, t in times.items()}
    python, floor = med["python -c pass"], med["ssh true, 3 nodes"]
    doc = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}",
        "rounds": rounds,
        "median_s": med,
        "vs_python_start": {
            name: round(t / python, 2) for name, t in med.items() if name.startswith("doctor ")
        },
        "transport_vs_ssh_floor": round(med["doctor's transport, true on 3 nodes"] / floor, 2),
        "collect_vs_ssh_floor": round(med["doctor collect, 3 nodes"] / floor, 2),
        "collect_vs_ssh_probe_floor": round(
            med["doctor collect, 3 nodes"] / med["ssh + probe, 3 nodes"], 2
        ),
        "probe_floor_vs_ssh_floor": round(med["ssh + probe, 3 nodes"] / floor, 2),
        "load_average_at_end": os.getloadavg(),
    }
    (HERE / "startup_bench.json").write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps(doc, indent=2))


if __name__ == "__main__":
    main(sys.argv)
