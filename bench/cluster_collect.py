"""Cluster collection speed on the netns harness: doctor vs the SSH floor vs `ansible -m setup`.

Run as root from the repository root: ``.venv/bin/python -m bench.cluster_collect [ROUNDS]``.
For 3 and 16 nodes, each round of the comparison runs, back to back and in rotating order:

- floor: ``ssh -o BatchMode=yes host true`` to every node at once (OpenSSH, one process per node);
- doctor_probe_only: ``doctor preflight -H ... --no-allreduce --no-mesh --no-reach`` (fact
  gathering and the checks, like ansible's fact gathering);
- ansible: ``ansible all -m setup -f N`` (the usual way to gather facts over SSH), with its
  default settings and again with pipelining (its fastest mode, like the doctor's own), each
  from cold connections as the doctor's are; and, as its best case, with pipelining over the
  ControlPersist masters an untimed ``-m ping`` just opened.

Then, in rounds of their own (their 240 logins at 16 nodes load the 2 cores for seconds after,
which would tax whatever ran next in a shared round):

- doctor: the whole ``doctor preflight -H ... --no-allreduce`` (probe, checks, the all-pairs SSH
  mesh and TCP reachability);
- mesh alone: the SSH mesh stage by itself, in-process, over open connections;
- doctor_probe_only_2000_known_hosts: the comparison's doctor run with a login node's
  known_hosts (2,000 other hosts listed before the cluster's own).

Medians go to ``bench/cluster_collect.json`` and ``bench/cluster_collect.txt``.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import kernel_window
from bench.floor import ssh_floor
from bench.installed import compile_bytecode
from doctor.nodes.connect import WORKERS
from doctor.nodes.inventory import build_inventory
from doctor.nodes.transport.ssh import SshTransport
from doctor.stages.mesh import run_mesh
from tests.cluster.harness import Cluster, make_cluster

HERE = Path(__file__).parent
MESH_FAILURES: list[int] = []
SIZES = (3, 16)
DOCTOR = str(Path(sys.executable).parent / "doctor")


def timed(argv: list[str], env: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    elapsed = time.perf_counter() - started
    if proc.returncode not in (0, 1):  # 1: findings (this harness has none, but do not hide it)
        raise RuntimeError(f"{argv[0]} failed ({proc.returncode}): {proc.stderr[-500:]}")
    return elapsed


def doctor(c: Cluster, *extra: str, ssh_config: Path | None = None) -> float:
    config = ssh_config or c.ssh_config
    base = [DOCTOR, "preflight", "-H", c.hosts_arg(), "--ssh-config", str(config)]
    return timed([*base, "--no-allreduce", "-f", "json", *extra])


def login_node_config(c: Cluster, workdir: Path) -> Path:
    """The cluster's ssh_config with a known_hosts like a login node's: 2,000 other hosts first."""
    key = c.known_hosts.read_text().splitlines()[0].split(maxsplit=1)[1]
    known = workdir / f"known_hosts{len(c.names)}"
    others = "".join(f"other{i}.example.com {key}\n" for i in range(2000))
    known.write_text(others + c.known_hosts.read_text())
    config = workdir / f"ssh_config{len(c.names)}"
    config.write_text(c.ssh_config.read_text().replace(str(c.known_hosts), str(known)))
    return config


def ansible(c: Cluster, workdir: Path, *, pipelining: bool = False, warm: bool = False) -> float:
    """Cold, like the doctor (which opens fresh connections every run): no SSH master left from
    an earlier run. Warm: masters just opened by an untimed ``-m ping``, ansible's best case."""
    stop_ansible_masters(c)
    inventory = workdir / f"inventory{len(c.names)}.ini"
    inventory.write_text("[all]\n" + "\n".join(c.names) + "\n")
    env = {
        **os.environ,
        # Ansible's default multiplexing, with the sockets kept in this cluster's own folder.
        "ANSIBLE_SSH_ARGS": f"-F {c.ssh_config} -o ControlMaster=auto -o ControlPersist=60s",
        "ANSIBLE_SSH_CONTROL_PATH_DIR": str(c.workdir / "ansible-cp"),
        "ANSIBLE_PYTHON_INTERPRETER": "/usr/bin/python3",  # discovery finds pyenv shims here
        "ANSIBLE_LOCAL_TEMP": str(workdir / "ansible-local"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_PIPELINING": str(pipelining),
    }
    argv = ["ansible", "all", "-i", str(inventory), "-f", str(len(c.names)), "-m"]
    if warm:
        timed([*argv, "ping"], env)
    return timed([*argv, "setup"], env)


def stop_ansible_masters(c: Cluster) -> None:
    """End ansible's persistent SSH masters for this cluster (never leave a process behind)."""
    folder = c.workdir / "ansible-cp"
    for sock in folder.glob("*") if folder.is_dir() else []:
        subprocess.run(
            ["ssh", "-o", f"ControlPath={sock}", "-O", "exit", "x"], capture_output=True, timeout=10
        )


def mesh_alone(c: Cluster) -> float:
    nodes = build_inventory(hosts=c.hosts_arg(), ssh_config=c.ssh_config)
    with SshTransport() as transport:
        for n in nodes:  # open the connections first: time the mesh, not the controller's SSH
            transport.execute(n, ["true"], b"", 30)
        started = time.perf_counter()
        mesh = run_mesh(nodes, transport, workers=WORKERS)  # as the preflight runs it
        elapsed = time.perf_counter() - started
    # On 2 shared cores a few of the n*(n-1) logins can overrun; count them, do not hide them.
    MESH_FAILURES.append(len(mesh.failed()) + len(mesh.not_run))
    return elapsed


def measure(n: int, rounds: int, workdir: Path) -> dict[str, object]:
    with make_cluster(n, workdir / f"c{n}") as c:
        compared = {
            "floor": lambda: ssh_floor(c),
            "doctor_probe_only": lambda: doctor(c, "--no-mesh", "--no-reach"),
            "ansible": lambda: ansible(c, workdir),
            "ansible_pipelining": lambda: ansible(c, workdir, pipelining=True),
            "ansible_pipelining_warm": lambda: ansible(c, workdir, pipelining=True, warm=True),
        }
        login = login_node_config(c, workdir)
        own = {
            "doctor": lambda: doctor(c),
            "mesh_alone": lambda: mesh_alone(c),
            "doctor_probe_only_2000_known_hosts": lambda: doctor(
                c, "--no-mesh", "--no-reach", ssh_config=login
            ),
        }
        times: dict[str, list[float]] = {}
        for group in (compared, own):
            for fn in group.values():  # warm-up (page cache), not recorded
                fn()
            for r in range(rounds):
                order = list(group)[r % len(group) :] + list(group)[: r % len(group)]
                for name in order:
                    times.setdefault(name, []).append(group[name]())
        stop_ansible_masters(c)
    med = {k: round(statistics.median(v), 3) for k, v in times.items()}
    return {
        "nodes": n,
        "median_s": med,
        "all_s": {k: [round(x, 3) for x in v] for k, v in times.items()},
    }


def main() -> None:
    kernel_window.from_now()
    compile_bytecode()
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    with tempfile.TemporaryDirectory() as tmp:
        results = [measure(n, rounds, Path(tmp)) for n in SIZES]
    small, big = (r["median_s"] for r in results)
    assert isinstance(small, dict) and isinstance(big, dict)
    extra = SIZES[1] - SIZES[0]
    ratios = {
        "doctor_over_floor_16": round(big["doctor"] / big["floor"], 2),
        "doctor_probe_only_over_floor_16": round(big["doctor_probe_only"] / big["floor"], 2),
        "ansible_over_doctor_16": round(big["ansible"] / big["doctor"], 2),
        "ansible_over_doctor_probe_only_16": round(big["ansible"] / big["doctor_probe_only"], 2),
        "ansible_pipelining_over_doctor_probe_only_16": round(
            big["ansible_pipelining"] / big["doctor_probe_only"], 2
        ),
        "ansible_pipelining_warm_over_doctor_probe_only_16": round(
            big["ansible_pipelining_warm"] / big["doctor_probe_only"], 2
        ),
        "doctor_16_over_3": round(big["doctor"] / small["doctor"], 2),
        "doctor_probe_only_16_over_3": round(
            big["doctor_probe_only"] / small["doctor_probe_only"], 2
        ),
        "floor_16_over_3": round(big["floor"] / small["floor"], 2),
        # What one more node costs: the slope, without the fixed start that the ratio hides.
        "doctor_probe_only_s_per_extra_node": round(
            (big["doctor_probe_only"] - small["doctor_probe_only"]) / extra, 3
        ),
        "floor_s_per_extra_node": round((big["floor"] - small["floor"]) / extra, 3),
        "mesh_16_over_3": round(big["mesh_alone"] / small["mesh_alone"], 2),
    }
    load = os.getloadavg()
    doc = {
        "machine": f"{platform.node()} {os.cpu_count()} CPUs, load {load[0]:.1f} at the end",
        "rounds": rounds,
        "results": results,
        "ratios": ratios,
        "mesh_alone_failed_links_per_run": MESH_FAILURES,
    }
    (HERE / "cluster_collect.json").write_text(json.dumps(doc, indent=1) + "\n")
    lines = [f"cluster collection, medians of {rounds} rounds ({doc['machine']})"]
    lines.append(f"{'':<36}{'3 nodes':>10}{'16 nodes':>10}")
    for key in small:
        lines.append(f"{key:<36}{small[key]:>9.3f}s{big[key]:>9.3f}s")
    lines += [f"{k}: {v}" for k, v in ratios.items()]
    lines.append(f"mesh_alone failed links per run (load on 2 cores): {MESH_FAILURES}")
    (HERE / "cluster_collect.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
