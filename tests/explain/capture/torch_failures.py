"""Make real PyTorch c10d/Gloo failures on this machine and save what they print.

Run by hand as root from the repository root: ``python tests/explain/capture/torch_failures.py``.
Each scenario runs real torch (CPU) on loopback or in network namespaces it creates (addresses
from 198.18.0.0/15) and removes by name afterwards. Output goes to tests/fixtures/logs/real/.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from tests.cluster.netns import Netns, unique
from tests.explain.capture.bed import Nodes
from tests.explain.capture.bed import save as save_to

PY = sys.executable

# A tiny worker: join a Gloo group and allreduce one tensor.
WORKER = r"""
import datetime, os, sys, time, torch, torch.distributed as dist
rank, world = int(sys.argv[1]), int(sys.argv[2])
timeout = datetime.timedelta(seconds=float(os.environ.get("CAP_TIMEOUT", "5")))
dist.init_process_group(
    "gloo", init_method=sys.argv[3], rank=rank, world_size=world, timeout=timeout
)
if os.environ.get("CAP_STALL_RANK") == str(rank):
    time.sleep(8)
t = torch.ones(1)
dist.all_reduce(t)
print(f"rank {rank} sum {t.item()}", flush=True)
"""


def save(name: str, header: str, text: str) -> None:
    save_to(__file__, name, header, text)


def run(argv: list[str], env: dict[str, str] | None = None, timeout: float = 60) -> str:
    proc = subprocess.run(
        argv, env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=timeout
    )
    return proc.stdout + proc.stderr


def gloo_bogus_iface() -> None:
    out = run(
        [PY, "-c", WORKER, "0", "1", "tcp://127.0.0.1:29611"], {"GLOO_SOCKET_IFNAME": "bogus0"}
    )
    save("torch-gloo-bogus-iface.log", "GLOO_SOCKET_IFNAME=bogus0, world size 1", out)


def gloo_op_timeout() -> None:
    """Rank 1 stalls past the group timeout, so rank 0's allreduce times out in Gloo."""
    env = {"CAP_STALL_RANK": "1", "CAP_TIMEOUT": "2"}
    init = "tcp://127.0.0.1:29612"
    procs = [
        subprocess.Popen(
            [PY, "-c", WORKER, str(r), "2", init],
            env={**os.environ, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for r in range(2)
    ]
    outs = [p.communicate(timeout=60)[0] for p in procs]
    save(
        "torch-gloo-op-timeout.log", "2 ranks on loopback, rank 1 stalls 8 s, timeout 2 s", outs[0]
    )


def store_connect_timeout() -> None:
    """The store address has no listener: the TCPStore client retries, then times out."""
    code = (
        "import datetime, torch.distributed as dist\n"
        "dist.TCPStore('127.0.0.1', 29613, 2, False, timeout=datetime.timedelta(seconds=3))\n"
    )
    save(
        "torch-tcpstore-refused.log",
        "client to 127.0.0.1:29613 (nothing listening), 3 s",
        run([PY, "-c", code]),
    )


def store_wait_clients() -> None:
    """The store server waits for 2 clients; only itself joins."""
    code = (
        "import datetime, torch.distributed as dist\n"
        "dist.TCPStore('127.0.0.1', 29614, 2, True, timeout=datetime.timedelta(seconds=3),"
        " wait_for_workers=True)\n"
    )
    save(
        "torch-tcpstore-wait-clients.log",
        "server for 2 on 127.0.0.1:29614, 1 joined, 3 s",
        run([PY, "-c", code]),
    )


def store_wait_timeout() -> None:
    """A rank waits for a key no other rank ever writes (as when a peer died before init)."""
    code = (
        "import datetime, torch.distributed as dist\n"
        "wait = datetime.timedelta(seconds=2)\n"
        "store = dist.TCPStore('127.0.0.1', 29620, 1, True, timeout=wait)\n"
        "store.get('rank_1_address')\n"
    )
    save(
        "torch-store-wait-timeout.log",
        "store on 127.0.0.1:29620, get of a key nobody sets, 2 s",
        run([PY, "-c", code]),
    )


def healthy_store_server_late() -> None:
    """A client starts 3 s before the store's server (as ranks do before rank 0): c10d logs each
    refused attempt and retries, then connects; nothing failed."""
    server = (
        "import datetime, time, torch.distributed as dist\n"
        "time.sleep(3)\n"
        "wait = datetime.timedelta(seconds=20)\n"
        "store = dist.TCPStore('127.0.0.1', 29621, 2, True, timeout=wait)\n"
        "store.set('x', '1')\n"
        "time.sleep(3)\n"
    )
    client = (
        "import datetime, torch.distributed as dist\n"
        "wait = datetime.timedelta(seconds=20)\n"
        "store = dist.TCPStore('127.0.0.1', 29621, 2, False, timeout=wait)\n"
        "print('client got', store.get('x'), flush=True)\n"
    )
    env = {**os.environ, "TORCH_CPP_LOG_LEVEL": "INFO", "TORCH_DISTRIBUTED_DEBUG": "DETAIL"}
    started = subprocess.Popen(
        [PY, "-c", server], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    out = run([PY, "-c", client], env)
    save(
        "healthy-store-server-late.log",
        "TCPStore client 3 s before its server, TORCH_CPP_LOG_LEVEL=INFO "
        "TORCH_DISTRIBUTED_DEBUG=DETAIL; the client's output, then the server's",
        out + started.communicate(timeout=60)[0],
    )


def store_port_in_use() -> None:
    """Rank 0 hosts the store on a port another socket of this machine already listens on."""
    code = (
        "import datetime, socket, torch.distributed as dist\n"
        "taken = socket.socket()\n"
        "taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        "taken.bind(('0.0.0.0', 29619))\n"
        "taken.listen()\n"
        "dist.init_process_group('gloo', init_method='tcp://127.0.0.1:29619', rank=0,"
        " world_size=2, timeout=datetime.timedelta(seconds=3))\n"
    )
    save(
        "torch-store-port-in-use.log",
        "rank 0 of 2, tcp://127.0.0.1:29619 while another socket listens on 29619",
        run([PY, "-c", code]),
    )


def init_unreachable() -> None:
    """init_process_group(env://) in a namespace with only loopback: MASTER_ADDR has no route."""
    ns = Netns(unique("cxu"))
    try:
        code = (
            "import datetime, torch.distributed as dist\n"
            "dist.init_process_group('gloo', rank=1, world_size=2,"
            " timeout=datetime.timedelta(seconds=3))\n"
        )
        env = {**os.environ, "MASTER_ADDR": "198.18.7.1", "MASTER_PORT": "29615"}
        proc = ns.run([PY, "-c", code], env=env, timeout=60)
        save(
            "torch-init-unreachable.log",
            "rank 1 of 2, MASTER_ADDR=198.18.7.1 unroutable from its namespace, 3 s",
            proc.stdout + proc.stderr,
        )
    finally:
        ns.delete()


def torchrun_rendezvous_timeout() -> None:
    """torchrun expects 2 nodes through the c10d rendezvous; only one comes."""
    argv = [
        PY,
        "-m",
        "torch.distributed.run",
        "--nnodes=2",
        "--nproc-per-node=1",
        "--rdzv-backend=c10d",
        "--rdzv-endpoint=127.0.0.1:29616",
        "--rdzv-id=cap",
        "--rdzv-conf=join_timeout=5",
        "--max-restarts=0",
        "-m",
        "this",
    ]
    save(
        "torch-torchrun-rdzv-timeout.log",
        "torchrun --nnodes=2, one node, join_timeout=5",
        run(argv, timeout=120),
    )


def gloo_loopback_hostname() -> None:
    """Two namespaces whose /etc/hosts map their own hostname to 127.0.1.1 (Debian's default)."""
    cluster = Nodes("cxg", 9, 2)
    nodes: list[tuple[Netns, str]] = []
    hosts_dirs: list[Path] = []
    try:
        for i, ns in enumerate(cluster.nodes, 1):
            hostname = f"gnode{i}"
            folder = Path("/etc/netns") / ns.name
            folder.mkdir(parents=True, exist_ok=True)
            hosts_dirs.append(folder)
            (folder / "hosts").write_text(
                f"127.0.0.1 localhost\n127.0.1.1 {hostname}\n198.18.9.1 gnode1-data\n"
            )
            nodes.append((ns, hostname))
        init = "tcp://198.18.9.1:29617"
        procs = []
        for rank, (ns, hostname) in enumerate(nodes):
            argv = ns.exec_argv(
                [
                    "unshare",
                    "--uts",
                    "sh",
                    "-c",
                    f'hostname {hostname}; exec "$0" "$@"',
                    PY,
                    "-c",
                    WORKER,
                    str(rank),
                    "2",
                    init,
                ]
            )
            procs.append(
                subprocess.Popen(
                    argv,
                    env={**os.environ, "CAP_TIMEOUT": "5"},
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                )
            )
        outs = [p.communicate(timeout=90)[0] for p in procs]
        text = "".join(f"[rank{r}]:{line}\n" for r, o in enumerate(outs) for line in o.splitlines())
        save(
            "torch-gloo-loopback-hostname.log",
            "2 namespaces, hostname -> 127.0.1.1, no GLOO_SOCKET_IFNAME; "
            "lines tagged [rankN]: as torchrun --tee does",
            text,
        )
    finally:
        for folder in hosts_dirs:
            (folder / "hosts").unlink(missing_ok=True)
            folder.rmdir()
        cluster.close()


def plain_connect_refused() -> None:
    """A user script (no framework) dials a port nobody listens on: the generic signature."""
    code = "import socket\nsocket.create_connection(('127.0.0.1', 29618), timeout=3)\n"
    save(
        "python-connect-refused.log",
        "socket.create_connection to 127.0.0.1:29618",
        run([PY, "-c", code]),
    )


def gloo_size_mismatch() -> None:
    """torchrun, 3 Gloo workers: rank 0 allreduces 16 floats, the others 8 (tests/hang/job.py
    --mode size --rank 0): the ranks that receive more than their buffer abort."""
    job = str(Path(__file__).resolve().parents[2] / "hang" / "job.py")
    argv = [PY, "-m", "torch.distributed.run", "--nproc-per-node", "3", job, "--mode", "size"]
    save(
        "torch-gloo-size-mismatch.log",
        "torchrun, 3 Gloo workers; rank 0 allreduces twice the elements of the others",
        run([*argv, "--rank", "0"]),
    )


SCENARIOS = [
    plain_connect_refused,
    gloo_size_mismatch,
    gloo_bogus_iface,
    gloo_op_timeout,
    store_connect_timeout,
    store_wait_clients,
    store_port_in_use,
    store_wait_timeout,
    healthy_store_server_late,
    init_unreachable,
    torchrun_rendezvous_timeout,
    gloo_loopback_hostname,
]

if __name__ == "__main__":
    wanted = set(sys.argv[1:])
    for scenario in SCENARIOS:
        if not wanted or scenario.__name__ in wanted:
            scenario()
